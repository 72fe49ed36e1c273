#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What a change of the measurement protocol does to every policy's cost (dev, before adopting it).

A repair of the streaming protocol is meant to mend the full cache's reference. It must leave
what eviction costs alone: a change that mends the reference and makes the evicting runs it
touches worse flatters whichever policy it touches least. This compares two run_variants.py
--jsonl files of the same clips, the protocol in use (BEFORE) and the candidate (AFTER, run with
--flags), policy by policy (its variants: defaults, uniform_stride, oracle_future with --oracle):

  per (protocol, variant, retention): corpus dWER before and after (each against its own full
  cache), after minus before paired over the clips (bootstrap 95% interval, 2000 resamples,
  seed 7, as run_variants.py), and the runs whose word errors or whose full cache's word errors
  differ: how many, and of those the runs whose cost (word errors minus the full cache's) rose
  or fell (by 5 or more in brackets).

Usage:
  protocol_change.py BEFORE.jsonl AFTER.jsonl [--md OUT.md]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_variants import bootstrap_pair, corpus_delta, emit  # noqa: E402


def keyed(path):
    """(protocol, variant, retention) -> (set, clip) -> row, error rows left out."""
    out = {}
    with open(path) as f:
        for r in map(json.loads, f):
            if "error" not in r:
                out.setdefault((r["protocol"], r["variant"], r["retention"]), {})[
                    (r["set"], r["clip"])] = r
    return out


def changed(a, b):
    """Runs whose word errors or full cache's word errors differ, and how their cost moved."""
    n, worse, better, worse5, better5 = 0, 0, 0, 0, 0
    for k in sorted(set(a) & set(b)):
        ra, rb = a[k], b[k]
        if (ra["word_errors"], ra["full_errors"]) == (rb["word_errors"], rb["full_errors"]):
            continue
        n += 1
        d = (rb["word_errors"] - rb["full_errors"]) - (ra["word_errors"] - ra["full_errors"])
        worse, better = worse + (d > 0), better + (d < 0)
        worse5, better5 = worse5 + (d >= 5), better5 + (d <= -5)
    return n, worse, better, worse5, better5


def table(before, after):
    lines = ["| protocol | policy | retention | dWER before | dWER after | after - before (95% CI) "
             "| runs changed | worse (>= 5) | better (>= 5) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(set(before) & set(after), key=lambda k: (k[0], k[1], -k[2])):
        a, b = before[key], after[key]
        common = sorted(set(a) & set(b))
        da = corpus_delta([a[k] for k in common])
        db = corpus_delta([b[k] for k in common])
        lo, hi = bootstrap_pair(b, a)
        n, worse, better, worse5, better5 = changed(a, b)
        lines.append(f"| {key[0]} | {key[1]} | {key[2]:g} | {da:+.2f} | {db:+.2f} | "
                     f"{db - da:+.2f} ({lo:+.2f} to {hi:+.2f}) | {n} of {len(common)} | "
                     f"{worse} ({worse5}) | {better} ({better5}) |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--md")
    args = ap.parse_args()
    emit(table(keyed(args.before), keyed(args.after)) + "\n", args.md)


if __name__ == "__main__":
    main()
