#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Is the streaming reference sound? The full cache under the streaming protocol against the
offline true model (all 1500 frames, every frame cached from the start), per model and set.

For every model, set and streaming variant (asr_whisper flags) it runs the full cache and
reports: corpus WER offline and streaming, their difference in points (the streaming reference
must stay within 1.5 points of the true model), the streaming WER minus the first variant's on
the same clips with its paired bootstrap 95% interval (2000 resamples, seed 7), the clips where
the streaming run emits nothing (or a single token), and runaways (a transcript with more than
1.5 times the reference's words) in each protocol. Tuning is for the dev splits only.

Usage:
  check_reference.py --set asterisk=build/data/asr/manifest.tsv \\
      --set voices=build/data/voices/manifest.tsv --split dev --models tiny.en,base \\
      --variant "current=" --variant "gate=--voice-gate 1" --jsonl out.jsonl --md out.md \\
      [--reuse earlier.jsonl]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_quality  # noqa: E402
import run_variants  # noqa: E402


def run(binary, model, manifest, split, protocol, flags, max_clips):
    """The full cache's rows (run_variants.run_process, policy full, ratio 1)."""
    return run_variants.run_process(binary, manifest, split, protocol, ["full"], [1.0], flags,
                                    max_clips, model)


def rescored(row):
    """`row` with word_errors, ref_words and runaway recomputed from its transcript and reference
    under today's word normalisation (run_quality.normalize_words): a metric change needs no
    re-run."""
    ref, hyp = run_quality.normalize_words(row["reference"]), run_quality.normalize_words(row["text"])
    return dict(row, word_errors=run_quality.edit_distance(ref, hyp), ref_words=len(ref),
                runaway=run_quality.runaway(row["text"], row["reference"]))


def corpus(rows):
    return 100.0 * sum(r["word_errors"] for r in rows) / max(1, sum(r["ref_words"] for r in rows))


def paired_difference(rows, first, n=2000, seed=7):
    """(difference, low, high): corpus WER of `rows` minus that of `first` over their common
    clips (clip -> row with word_errors, ref_words), in points, with the paired bootstrap 95%
    interval (resampled clips)."""
    keys = sorted(set(rows) & set(first))

    def diff(pick):
        ref = max(1, sum(first[k]["ref_words"] for k in pick))
        return 100.0 * sum(rows[k]["word_errors"] - first[k]["word_errors"] for k in pick) / ref

    low, high = run_quality.bootstrap(keys, diff, n, seed)
    return diff(keys), low, high


def versus(rows, first, n=2000, seed=7):
    """paired_difference as text; '—' for the first variant itself."""
    keys = set(rows) & set(first)
    if rows is first or not keys or all(rows[k] is first[k] for k in keys):
        return "—"
    return "{:+.2f} ({:+.2f} to {:+.2f})".format(*paired_difference(rows, first, n, seed))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--set", action="append", required=True, help="NAME=MANIFEST")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--models", default="tiny.en")
    ap.add_argument("--variant", action="append", default=[], help="NAME=FLAGS (streaming)")
    ap.add_argument("--max-clips", type=int, default=-1)
    ap.add_argument("--binary", default=run_quality.BINARY)
    ap.add_argument("--jsonl", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--from-jsonl", action="store_true", help="only summarise --jsonl")
    ap.add_argument("--reuse", help="an earlier run's --jsonl: its rows of the same model, set, "
                                    "protocol and flags are taken instead of run again")
    ap.add_argument("--rescore", action="store_true",
                    help="score the rows read (--from-jsonl, --reuse) again from their transcripts "
                         "under today's word normalisation")
    args = ap.parse_args()
    score = rescored if args.rescore else (lambda r: r)
    sets = [tuple(s.split("=", 1)) for s in args.set]
    variants = [tuple(v.split("=", 1)) for v in args.variant] or [("default", "")]
    models = args.models.split(",")
    rows = []
    if args.from_jsonl:
        rows = [score(json.loads(line)) for line in open(args.jsonl)]
    else:
        reused = [score(json.loads(line)) for line in open(args.reuse)] if args.reuse else []
        partial = open(args.jsonl + ".partial", "w")  # rows as they arrive
        for model in models:
            for set_name, manifest in sets:
                jobs = [("offline", "offline", "")] + [(n, "streaming", f) for n, f in variants]
                for name, protocol, flags in jobs:
                    old = list({r["clip"]: dict(r, variant=name) for r in reused  # one per clip
                                if r["model"] == model and r["set"] == set_name
                                and r["protocol"] == protocol
                                and (protocol == "offline" or r["flags"] == flags)}.values())
                    if old:
                        rows += old
                        partial.writelines(json.dumps(r) + "\n" for r in old)
                        print(f"reused {model} {set_name} {name}", file=sys.stderr, flush=True)
                        continue
                    for r in run(args.binary, model, manifest, args.split, protocol, flags,
                                 args.max_clips):
                        rows.append({"model": model, "set": set_name, "variant": name,
                                     "flags": flags, "protocol": protocol, "clip": r["clip_id"],
                                     "word_errors": r["word_errors"], "ref_words": r["ref_words"],
                                     "n_tokens": r["n_tokens"], "text": r["text"],
                                     "reference": r["reference"],
                                     "runaway": run_quality.runaway(r["text"], r["reference"])})
                        partial.write(json.dumps(rows[-1]) + "\n")
                        partial.flush()
                    print(f"done {model} {set_name} {name}", file=sys.stderr, flush=True)
        with open(args.jsonl, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    lines = [f"Full cache, split {args.split}: corpus WER % offline (the true model) and under the "
             "streaming protocol; difference in points; streaming WER minus the first variant's, "
             "paired over the clips (bootstrap 95% interval); clips where streaming emits at most "
             "one token; runaways (more than 1.5x the reference's words).", "",
             "| model | set | variant | flags | offline WER | streaming WER | streaming - offline "
             f"| minus {variants[0][0]} (95% CI) "
             "| clips <= 1 token | runaways offline / streaming | clips worse by >= 5 errors |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for model in models:
        for set_name, _ in sets:
            off = {r["clip"]: r for r in rows if r["model"] == model and r["set"] == set_name
                   and r["protocol"] == "offline"}
            first = {r["clip"]: r for r in rows if r["model"] == model and r["set"] == set_name
                     and r["variant"] == variants[0][0] and r["protocol"] == "streaming"}
            for name, flags in variants:
                st = {r["clip"]: r for r in rows if r["model"] == model and r["set"] == set_name
                      and r["variant"] == name and r["protocol"] == "streaming"}
                if not st or not off:
                    continue
                w_off, w_st = corpus(off.values()), corpus(st.values())
                empty = [c for c, r in st.items() if r["n_tokens"] <= 1]
                worse = [c for c, r in st.items()
                         if c in off and r["word_errors"] - off[c]["word_errors"] >= 5]
                lines.append(
                    f"| {model} | {set_name} | {name} | `{flags}` | {w_off:.2f} | {w_st:.2f} | "
                    f"{w_st - w_off:+.2f} | {versus(st, first)} | {len(empty)} {' '.join(empty)} | "
                    f"{sum(r['runaway'] for r in off.values())} / "
                    f"{sum(r['runaway'] for r in st.values())} | {len(worse)} {' '.join(worse)} |")
    with open(args.md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
