#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""KV memory over time on one long stream: runs examples' stream_demo (one hour of 10 ms frames,
AudioKV, budget 2000 cells) with --trace and plots cells in use against the budget and trigger.

Usage: benchmarks/quality/plot_memory.py [BUILD_DIR]   (default build/cpu)
Writes benchmarks/results/kv_memory_stream.png and prints the demo's summary.
"""
import csv
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "cpu")
    trace = os.path.join(build, "stream_trace.csv")
    out = subprocess.run([os.path.join(build, "examples", "stream_demo"), "--trace", trace],
                         check=True, capture_output=True, text=True).stdout
    print(out)
    rows = list(csv.DictReader(open(trace)))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    minutes = [int(r["frame"]) * 0.01 / 60 for r in rows]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(minutes, [int(r["cells"]) for r in rows], linewidth=0.8, label="cells in use (AudioKV)")
    ax.axhline(int(rows[0]["budget"]), color="red", linestyle="--", label="budget B")
    ax.axhline(int(rows[0]["trigger"]), color="gray", linestyle=":", label="trigger 0.9 B")
    ax.set_xlabel("audio time (minutes, 10 ms frames)")
    ax.set_ylabel("cached cells")
    ax.set_title("One hour of synthetic speech-like frames through one AudioKV cache")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(ROOT, "benchmarks", "results", "kv_memory_stream.png"), dpi=110)


if __name__ == "__main__":
    main()
