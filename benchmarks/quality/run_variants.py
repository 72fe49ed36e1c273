#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Paired comparison of AudioKV config variants against its defaults and the uniform stride.

For every (set, protocol) it runs examples/asr_whisper once with the policies full, audiokv
(defaults) and uniform_stride (with --oracle also oracle_future, the ceiling), then once per
variant (audiokv with the variant's flags; the full cache's row is the first run's), all on the
same clips and with --model's Whisper, and writes one row per (variant, protocol, set, clip,
retention) to --jsonl, a table to --md and with --plot delta WER against retention:

  corpus dWER = (sum of word errors - sum of the reference run's word errors) / sum of reference
  words, in points, per set and over all sets ("all"); the reference is the full cache under the
  same protocol. Paired differences (variant minus stride, variant minus defaults) are bootstrap
  95% intervals over the clips of all sets (2000 resamples, seed 7, as run_quality.py), and
  "better-worse" counts the clips with fewer / more word errors than the stride (or the defaults).
  A run the library rejected (an asr_whisper error row) is kept as a row with its "error"; the
  statistics leave it out (differences pair only clips both sides have results for) and the
  "errors" column counts it per retention.

Usage (tuning is for the dev splits only):
  run_variants.py --set asterisk=build/data/asr/manifest.tsv \\
      --set voices=build/data/voices/manifest.tsv --split dev --protocols streaming,offline \\
      --ratios 0.4,0.2,0.1 --variant "decay1=--past-decay-floor 1 --past-density 0" \\
      --jsonl out.jsonl --md out.md
"""
import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_quality  # noqa: E402  (word normalisation, repetition rule, binary path)


def run_process(binary, manifest, split, protocol, policies, ratios, flags, max_clips,
                model="tiny.en"):
    cmd = [binary, "--manifest", manifest, "--split", split, "--json", "--frames", "all",
           "--protocol", protocol] + run_quality.model_args(model) + [
           "--policies", ",".join(policies),
           "--keep-ratios", ",".join(str(r) for r in ratios)] + shlex.split(flags)
    if max_clips > 0:
        cmd += ["--max-clips", str(max_clips)]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if out.returncode != 0:
        raise RuntimeError("asr_whisper failed: " + " ".join(cmd))
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def rows_of(raw, variant, flags, protocol, set_name, full):
    rows = []
    for r in raw:
        if r["policy"] == "full":
            continue
        f = full.get(r["clip_id"])
        name = variant if variant else r["policy"]
        if "error" in r or f is None or "error" in f:
            rows.append({
                "variant": name, "flags": flags, "protocol": protocol, "set": set_name,
                "clip": r["clip_id"], "retention": r["keep_ratio"],
                "error": r.get("error") or {"argument": "full", "message": "the full-cache run "
                                            "of this clip has no result to compare with"},
            })
            continue
        rows.append({
            "variant": name, "flags": flags, "protocol": protocol, "set": set_name,
            "clip": r["clip_id"], "retention": r["keep_ratio"],
            "word_errors": r["word_errors"], "full_errors": f["word_errors"],
            "ref_words": r["ref_words"], "full_tokens": f["tokens"],
            "runaway": run_quality.runaway(r["text"], r["reference"]),
            "repetition": run_quality.repeated(r["tokens"], r["reached_eot"], f["tokens"]),
        })
    return rows


def sweep(args, variants, baseline):
    jobs = []
    for set_name, manifest in args.sets:
        for protocol in args.protocols:
            if not any(r["set"] == set_name and r["protocol"] == protocol for r in baseline):
                jobs.append((set_name, manifest, protocol, "", "",
                             ["full", "audiokv", "uniform_stride"] + args.extra))
            for name, flags in variants:
                # The full cache does not depend on the variant's flags: its row comes from the
                # baseline job of the same set and protocol (or --baseline-jsonl's).
                jobs.append((set_name, manifest, protocol, name, flags, ["audiokv"]))
    results, lock = {}, threading.Lock()
    queue = list(range(len(jobs)))

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                i = queue.pop(0)
            set_name, manifest, protocol, name, flags, policies = jobs[i]
            raw = run_process(args.binary, manifest, args.split, protocol, policies, args.ratios,
                              (args.flags + " " + flags).strip(), args.max_clips, args.model)
            with lock:
                results[i] = raw
                print(f"done {set_name} {protocol} {name or 'defaults+stride'}", file=sys.stderr,
                      flush=True)

    threads = [threading.Thread(target=worker) for _ in range(args.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = []
    fulls = {}  # (set, protocol) -> clip -> the full cache's raw row (word_errors, tokens)
    for r in baseline:
        fulls.setdefault((r["set"], r["protocol"]), {})[r["clip"]] = {
            "word_errors": r["full_errors"], "tokens": r.get("full_tokens", [])}
    for i, (set_name, _, protocol, _, _, _) in enumerate(jobs):
        for r in results[i]:
            if r["policy"] == "full" and "error" not in r:
                fulls.setdefault((set_name, protocol), {})[r["clip_id"]] = r
    for i, (set_name, _, protocol, name, flags, _) in enumerate(jobs):
        full = fulls[(set_name, protocol)]
        raw = [r for r in results[i] if name == "" or r["policy"] == "audiokv"]
        rows += rows_of(raw, name, flags, protocol, set_name, full)
    for r in rows:
        if r["variant"] == "audiokv":
            r["variant"] = "defaults"
    return baseline + rows


def corpus_delta(rows):
    ref = sum(r["ref_words"] for r in rows)
    return 100.0 * sum(r["word_errors"] - r["full_errors"] for r in rows) / max(1, ref)


def bootstrap_pair(a, b, n=2000, seed=7):
    """95% interval of corpus_delta(a) - corpus_delta(b) over resampled clips (paired)."""
    keys = sorted(set(a) & set(b))
    rng = random.Random(seed)
    values = []
    for _ in range(n):
        pick = [rng.choice(keys) for _ in keys]
        values.append(corpus_delta([a[k] for k in pick]) - corpus_delta([b[k] for k in pick]))
    values.sort()
    return values[int(0.025 * n)], values[int(0.975 * n) - 1]


def emit(text, md=None):
    """Prints a table and, when `md` names a file, writes it there too."""
    if md:
        with open(md, "w") as f:
            f.write(text)
    print(text, end="")


def table(rows, sets, protocol, ratios, variants):
    by, errors = {}, {}
    for r in rows:
        if r["protocol"] == protocol:
            target = errors if "error" in r else by
            target.setdefault((r["variant"], r["retention"]), {})[(r["set"], r["clip"])] = r
    for key in errors:
        by.setdefault(key, {})
    header = ("| variant | flags | " + " | ".join(f"{s} {' / '.join(f'{int(100 * x)}' for x in ratios)}%"
                                                for s in sets + ["all"])
              + " | repetitions/runaways | minus defaults, all (95% CI; clips better–worse) | minus stride, all (95% CI) | better-worse than stride | errors |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    flags = dict(variants)
    for name in ["defaults", "uniform_stride", "oracle_future"] + [v for v, _ in variants]:
        if not any(v == name for v, _ in by):
            continue  # not run under this protocol
        cells = [f"**{name}**" if name == "defaults" else name, f"`{flags[name]}`" if flags.get(name) else ""]
        for s in sets + ["all"]:
            vals = []
            for x in ratios:
                sel = [r for k, r in by.get((name, x), {}).items() if s == "all" or k[0] == s]
                vals.append(f"{corpus_delta(sel):+.2f}" if sel else "—")
            cells.append(" / ".join(vals))
        reps, minus_def, minus_stride, counts = [], [], [], []
        n_errors = " / ".join(str(len(errors.get((name, x), {}))) for x in ratios)
        for x in ratios:
            mine = by.get((name, x), {})
            reps.append(f"{sum(r['repetition'] for r in mine.values())}/"
                        f"{sum(r.get('runaway', 0) for r in mine.values())}")
            d, st = by.get(("defaults", x), {}), by.get(("uniform_stride", x), {})
            # Paired: only the clips both sides have results for.
            d = {k: v for k, v in d.items() if k in mine}
            st = {k: v for k, v in st.items() if k in mine}
            mine_d = {k: v for k, v in mine.items() if k in d}
            mine_st = {k: v for k, v in mine.items() if k in st}
            if not mine_d or not mine_st:
                minus_def.append("—")
                minus_stride.append("—")
                counts.append("—")
                continue
            diff_def = corpus_delta(list(mine_d.values())) - corpus_delta(list(d.values()))
            if name in ("defaults", "uniform_stride"):
                minus_def.append(f"{diff_def:+.2f}")
            else:
                lo, hi = bootstrap_pair(mine_d, d)
                better = sum(mine[k]["word_errors"] < d[k]["word_errors"] for k in mine_d)
                worse = sum(mine[k]["word_errors"] > d[k]["word_errors"] for k in mine_d)
                minus_def.append(f"{diff_def:+.2f} ({lo:+.2f} to {hi:+.2f}; {better}–{worse})")
            if name == "uniform_stride":
                minus_stride.append("—")
                counts.append("—")
                continue
            lo, hi = bootstrap_pair(mine_st, st)
            diff = corpus_delta(list(mine_st.values())) - corpus_delta(list(st.values()))
            minus_stride.append(f"{diff:+.2f} ({lo:+.2f} to {hi:+.2f})")
            better = sum(mine[k]["word_errors"] < st[k]["word_errors"] for k in mine_st)
            worse = sum(mine[k]["word_errors"] > st[k]["word_errors"] for k in mine_st)
            counts.append(f"{better}–{worse}")
        cells += [" / ".join(reps), " / ".join(minus_def), " / ".join(minus_stride), " / ".join(counts),
                  n_errors]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_set_table(rows, sets, protocol, ratios, variants):
    """Each variant minus the defaults per set and over all sets (paired bootstrap 95% interval;
    bold where it excludes 0), the comparison a rule for changing a default reads."""
    by = {}
    for r in rows:
        if r["protocol"] == protocol and "error" not in r:
            by.setdefault((r["variant"], r["retention"]), {})[(r["set"], r["clip"])] = r
    head = " | ".join(f"{int(100 * x)}%" for x in ratios)
    lines = [f"| variant minus defaults | set | {head} |", "|---" * (2 + len(ratios)) + "|"]
    for name, _ in variants:
        if not any(v == name for v, _ in by):
            continue
        for s in sets + ["all"]:
            cells = []
            for x in ratios:
                mine = {k: v for k, v in by.get((name, x), {}).items() if s == "all" or k[0] == s}
                d = {k: v for k, v in by.get(("defaults", x), {}).items() if k in mine}
                mine = {k: v for k, v in mine.items() if k in d}
                if not mine:
                    cells.append("—")
                    continue
                diff = corpus_delta(list(mine.values())) - corpus_delta(list(d.values()))
                lo, hi = bootstrap_pair(mine, d)
                text = f"{diff:+.2f} ({lo:+.2f} to {hi:+.2f})"
                cells.append(f"**{text}**" if lo > 0 or hi < 0 else text)
            lines.append(f"| {name} | {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows, protocols, ratios, path):
    """Corpus delta WER (all sets) against retention, a curve per variant and protocol
    (oracle_future dashed), to `path` (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(protocols), figsize=(6.5 * len(protocols), 4.8),
                             squeeze=False)
    for ax, protocol in zip(axes[0], protocols):
        names = sorted({r["variant"] for r in rows if r["protocol"] == protocol})
        for name in names:
            pts = []
            for x in ratios:
                sel = [r for r in rows if r["protocol"] == protocol and r["variant"] == name
                       and r["retention"] == x]
                if sel:
                    pts.append((x, corpus_delta(sel)))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    linestyle="--" if name == "oracle_future" else "-",
                    linewidth=2.5 if name == "defaults" else 1.2, label=name)
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=2)
        ax.minorticks_off()
        ax.set_xticks(ratios)
        ax.set_xticklabels([f"{x:g}" for x in ratios])
        ax.set_xlabel("retention (fraction of audio frames kept per head)")
        ax.set_ylabel("corpus delta WER vs the full cache (points)")
        ax.set_title(f"{protocol}, dev splits")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--set", action="append", required=True, help="NAME=MANIFEST")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--protocols", default="streaming")
    ap.add_argument("--ratios", default="0.4,0.2,0.1")
    ap.add_argument("--variant", action="append", default=[], help="NAME=FLAGS")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--max-clips", type=int, default=-1)
    ap.add_argument("--binary", default=run_quality.BINARY)
    ap.add_argument("--model", default="tiny.en", help="tiny.en, base, or a model directory")
    ap.add_argument("--oracle", action="store_true",
                    help="also run oracle_future beside the defaults and the stride (a ceiling)")
    ap.add_argument("--jsonl", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--from-jsonl", action="store_true", help="only summarise --jsonl")
    ap.add_argument("--plot", help="also draw delta WER against retention into this PNG")
    ap.add_argument("--flags", default="",
                    help="asr_whisper options for every run, the baseline's included (e.g. "
                         "--language auto for sets in several languages)")
    ap.add_argument("--baseline-jsonl",
                    help="take the defaults and the stride from this earlier run's rows (same "
                         "clips, same library) instead of running them again")
    args = ap.parse_args()
    args.sets = [tuple(s.split("=", 1)) for s in args.set]
    args.extra = ["oracle_future"] if args.oracle else []
    args.protocols = args.protocols.split(",")
    args.ratios = [float(x) for x in args.ratios.split(",")]
    variants = [tuple(v.split("=", 1)) for v in args.variant]
    if args.from_jsonl:
        with open(args.jsonl) as f:
            rows = [json.loads(line) for line in f]
    else:
        baseline = []
        if args.baseline_jsonl:
            with open(args.baseline_jsonl) as f:
                baseline = [r for r in map(json.loads, f)
                            if r["variant"] in ("defaults", "uniform_stride", "oracle_future")
                            and r["protocol"] in args.protocols and r["retention"] in args.ratios
                            and r["set"] in dict(args.sets)]
        rows = sweep(args, variants, baseline)
        with open(args.jsonl, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    sets = [s for s, _ in args.sets]
    if args.plot:
        plot(rows, args.protocols, args.ratios, args.plot)
    with open(args.md, "w") as f:
        for protocol in args.protocols:
            f.write(f"### {protocol}, split {args.split}\n\n")
            f.write(table(rows, sets, protocol, args.ratios, variants) + "\n\n")
            if variants:
                f.write(f"Per set, {protocol}: each variant minus the defaults (paired, 95% CI; "
                        "bold where it excludes 0):\n\n")
                f.write(per_set_table(rows, sets, protocol, args.ratios, variants) + "\n\n")
    print(open(args.md).read())


if __name__ == "__main__":
    main()
