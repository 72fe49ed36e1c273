#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Per-clip scatter of one policy against another (default: audiokv against uniform_stride)
at some retentions (default 0.2 and 0.1), from run_quality.py's per-clip rows.

Each point is a clip: x = its delta WER (points, against the run's reference) under --x, y =
under --y; below the diagonal --y wins on that clip. The title counts the clips on each side.

Usage:
  plot_scatter.py benchmarks/results/quality_streaming.jsonl [more.jsonl ...] \\
      --out benchmarks/results/quality_streaming_scatter.png [--x uniform_stride --y audiokv]
Several files (e.g. the Asterisk and voices sets) are drawn in one figure, a marker each.
run_variants.py's rows are read too (its defaults row is audiokv).
"""
import argparse
import json
import os


def as_quality_row(r):
    """run_quality.py rows as they are; run_variants.py rows (variant, word_errors, full_errors,
    ref_words) as the same keys (defaults -> audiokv; one file per protocol is expected)."""
    if "variant" not in r:
        return r
    return {"policy": "audiokv" if r["variant"] == "defaults" else r["variant"],
            "clip": f"{r['set']}/{r['clip']}", "retention": r["retention"],
            "delta_wer": (r["word_errors"] - r["full_errors"]) / max(1, r["ref_words"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("jsonl", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--x", default="uniform_stride")
    ap.add_argument("--y", default="audiokv")
    ap.add_argument("--ratios", default="0.2,0.1")
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ratios = [float(r) for r in args.ratios.split(",")]
    fig, axes = plt.subplots(1, len(ratios), figsize=(5.5 * len(ratios), 5), squeeze=False)
    markers = ["o", "s", "^", "D"]
    for ax, ratio in zip(axes[0], ratios):
        better = worse = 0
        top = 1.0
        for i, path in enumerate(args.jsonl):
            rows = [as_quality_row(json.loads(line)) for line in open(path)]
            cell = {(r["policy"], r["clip"]): r for r in rows if r["retention"] == ratio}
            clips = sorted(c for p, c in cell if p == args.x and (args.y, c) in cell)
            xs = [100 * cell[(args.x, c)]["delta_wer"] for c in clips]
            ys = [100 * cell[(args.y, c)]["delta_wer"] for c in clips]
            better += sum(y < x for x, y in zip(xs, ys))
            worse += sum(y > x for x, y in zip(xs, ys))
            top = max([top] + [abs(v) for v in xs + ys])
            label = os.path.basename(path).replace(".jsonl", "")
            ax.scatter(xs, ys, s=18, alpha=0.7, marker=markers[i % len(markers)], label=label)
        lim = min(top * 1.05, 400)
        ax.plot([-lim, lim], [-lim, lim], color="black", linewidth=0.8)
        ax.set_xscale("symlog", linthresh=5)
        ax.set_yscale("symlog", linthresh=5)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_xlabel(f"{args.x}: clip delta WER (points)")
        ax.set_ylabel(f"{args.y}: clip delta WER (points)")
        ax.set_title(f"retention {ratio:g}: {args.y} better on {better}, worse on {worse}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(args.out)


if __name__ == "__main__":
    main()
