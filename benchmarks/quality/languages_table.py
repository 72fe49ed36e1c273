#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tables of the other-language check: Whisper base on the Asterisk prompts in other languages.

Merge (once, after the sweeps): each language's run_quality.py rows of both protocols
(`--model base --set lang_L --flags "--language L"`) into one file, clip ids prefixed "L:" and a
"language" key added:

  languages_table.py --merge OUT.jsonl es=OFFLINE.jsonl,STREAMING.jsonl fr=... it=... ru=...

Tables (from that file; printed, and written to --md):

  languages_table.py --rows benchmarks/results/quality_languages.jsonl [--md OUT.md]

1. per language and pooled, per protocol: the full cache's WER (against the clips' texts), each
   policy's delta WER against its protocol's full cache (offline: the true model), AudioKV minus
   the stride paired over the clips with the bootstrap 95% interval (2000 resamples, seed 7, as
   every quality table), and runaways (more than 1.5x the reference's words) at 10%;
2. where the file has them, the layer's split offline (audiokv+he-0.5, tiered_layer<>): its delta
   WER, minus the stride and minus AudioKV per head (paired), runaways at 10%;
3. the streaming reference: the full cache's streaming WER minus its offline WER, paired.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_reference  # noqa: E402

RATIOS = (0.4, 0.2, 0.1)
LAYER = "audiokv+he-0.5"  # run_quality's name of tiered_layer<>'s split (--head-budget-entropy -0.5)


def merge(out, specs):
    with open(out, "w") as f:
        for spec in specs:
            lang, paths = spec.split("=", 1)
            for path in paths.split(","):
                for line in open(path):
                    r = json.loads(line)
                    r["clip"] = "%s:%s" % (lang, r["clip"])
                    r["language"] = lang
                    f.write(json.dumps(r) + "\n")


def paired(a, b):
    """(difference, low, high) in points: corpus WER of rows b minus rows a (clip -> row), paired
    over their common clips (check_reference.paired_difference)."""
    return check_reference.paired_difference(b, a)


def corpus(rows):
    return check_reference.corpus(rows.values())


def layer_table(cells, langs):
    """Offline rows of the layer's split (LAYER, tiered_layer<>'s one-shot compression), when
    the file has them: its delta WER, the same minus the stride and minus AudioKV per head
    (paired), and its runaways at 10%."""
    if not any(key[2] == LAYER for key in cells):
        return []
    out = ["", "The layer's split offline (`%s`, `tiered_layer<>`'s one-shot compression):" % LAYER,
           "", "| set | clips | layer delta 40 / 20 / 10% | layer - stride 40% | 20% | 10% | "
           "layer - AudioKV 20% | runaways at 10% layer / AudioKV / stride |",
           "|---|---|---|---|---|---|---|---|"]
    for lang in langs:
        full = cells.get((lang, "offline", "full", 1.0))
        if not full or (lang, "offline", LAYER, 0.2) not in cells:
            continue
        base = corpus(full)
        layer = {x: cells[(lang, "offline", LAYER, x)] for x in RATIOS}
        deltas = " / ".join("%+.2f" % (corpus(layer[x]) - base) for x in RATIOS)
        pairs = ["%+.2f (%+.2f to %+.2f)" % paired(cells[(lang, "offline", "uniform_stride", x)],
                                                  layer[x]) for x in RATIOS]
        per_head = "%+.2f (%+.2f to %+.2f)" % paired(cells[(lang, "offline", "audiokv", 0.2)],
                                                    layer[0.2])
        run10 = " / ".join(str(sum(r["runaway"] for r in cells[(lang, "offline", p, 0.1)].values()))
                           for p in (LAYER, "audiokv", "uniform_stride"))
        out.append("| %s | %d | %s | %s | %s | %s |" % (lang, len(full), deltas, " | ".join(pairs),
                                                       per_head, run10))
    return out


def tables(rows):
    rows = [r for r in rows if "error" not in r]
    cells = {}
    for r in rows:
        key = (r["language"], r["protocol"], r["policy"], r["retention"])
        cells.setdefault(key, {})[r["clip"]] = r
        cells.setdefault(("pooled",) + key[1:], {})[r["clip"]] = r
    langs = sorted({r["language"] for r in rows}) + ["pooled"]
    fmt = "%+.2f"
    out = ["| set | protocol | clips | full WER | AudioKV delta 40 / 20 / 10% | stride delta "
           "40 / 20 / 10% | AudioKV - stride 40% | 20% | 10% | runaways at 10% AudioKV / "
           "stride / full |", "|---|---|---|---|---|---|---|---|---|---|"]
    for lang in langs:
        for proto in ("offline", "streaming"):
            full = cells.get((lang, proto, "full", 1.0))
            if not full:
                continue
            base = corpus(full)
            deltas = {p: " / ".join(fmt % (corpus(cells[(lang, proto, p, x)]) - base)
                                    for x in RATIOS) for p in ("audiokv", "uniform_stride")}
            pairs = []
            for x in RATIOS:
                d, lo, hi = paired(cells[(lang, proto, "uniform_stride", x)],
                                   cells[(lang, proto, "audiokv", x)])
                pairs.append("%+.2f (%+.2f to %+.2f)" % (d, lo, hi))
            run10 = " / ".join(str(sum(r["runaway"] for r in cells[(lang, proto, p, x)].values()))
                               for p, x in (("audiokv", 0.1), ("uniform_stride", 0.1),
                                            ("full", 1.0)))
            out.append("| %s | %s | %d | %.2f | %s | %s | %s | %s |" % (
                lang, proto, len(full), base, deltas["audiokv"], deltas["uniform_stride"],
                " | ".join(pairs), run10))
    out += layer_table(cells, langs)
    out += ["", "| set | clips | offline WER | streaming WER | streaming - offline (95% CI) |",
            "|---|---|---|---|---|"]
    for lang in langs:
        off, st = cells.get((lang, "offline", "full", 1.0)), cells.get((lang, "streaming", "full", 1.0))
        if off and st:
            d, lo, hi = paired(off, st)
            out.append("| %s | %d | %.2f | %.2f | %+.2f (%+.2f to %+.2f) |" % (
                lang, len(off), corpus(off), corpus(st), d, lo, hi))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--merge", nargs="+", metavar=("OUT", "L=FILES"))
    ap.add_argument("--rows")
    ap.add_argument("--md")
    args = ap.parse_args()
    if args.merge:
        merge(args.merge[0], args.merge[1:])
        return 0
    if not args.rows:
        ap.error("give --rows or --merge")
    text = tables([json.loads(line) for line in open(args.rows)])
    sys.stdout.write(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
