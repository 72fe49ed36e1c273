#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Paired comparison of two run_quality.py (or run_variants.py) sweeps of the same clips.

For every (policy, retention) both sweeps hold, and for each policy summed over its retentions:

  corpus WER  = word errors / reference words over the clips, against the clips' texts (not
                against either sweep's full-cache run, which moves with what is compared)
  difference  = WER(other) - WER(base) in points, paired over the clips, bootstrap 95% interval
                (2000 resamples, seed 7, as check_reference.py); "summed" adds the retentions' word
                errors per clip, so its difference is the sum of the retentions' differences
  better-worse = clips with fewer / more word errors under "other"
  runaways    = clips whose output has more than 1.5x the reference's words, each side; the
                clips only one side runs away on, and the exact two-sided McNemar p of those
Each sweep's own summary (run_quality.py) has the cost columns.

Usage:
  compare_runs.py --cell "base menus=DEFAULT.jsonl:OTHER.jsonl" [--cell ...] \\
      --names default,la3 [--md OUT.md]
  compare_runs.py --cell "Asterisk=quality.jsonl:quality.jsonl" --pair audiokv:audiokv+he-0.25 \\
      --names defaults,he-0.25
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_reference  # noqa: E402  (corpus WER, paired bootstrap)
import run_variants  # noqa: E402  (emit)


def load(path):
    """(policy, retention) -> clip -> row, result rows only. Rows of run_variants.py (a
    "variant" instead of a "policy", several sets in one file) key their clips by set."""
    cells = {}
    with open(path) as f:
        for row in map(json.loads, f):
            if "error" not in row:
                policy = row.get("policy", row.get("variant"))
                clip = (row["set"], row["clip"]) if "set" in row else row["clip"]
                cells.setdefault((policy, row["retention"]), {})[clip] = row
    return cells


def summed(cells, keys):
    """clip -> one row whose word errors are summed over the (policy, retention) keys."""
    clips = set.intersection(*(set(cells[k]) for k in keys))
    return {c: {"word_errors": sum(cells[k][c]["word_errors"] for k in keys),
                "ref_words": cells[keys[0]][c]["ref_words"]} for c in clips}


def mcnemar(only_base, only_other):
    """Exact two-sided McNemar p: P(a split at least this uneven of the discordant clips)."""
    n, k = only_base + only_other, min(only_base, only_other)
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * sum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n)


def runaways(base, other, clips):
    """(runaways of base, of other, clips only base / only other runs away on, McNemar p); None
    for rows without a runaway flag (summed rows)."""
    if not all("runaway" in base[c] and "runaway" in other[c] for c in clips):
        return None
    only_base = sum(bool(base[c]["runaway"]) and not other[c]["runaway"] for c in clips)
    only_other = sum(bool(other[c]["runaway"]) and not base[c]["runaway"] for c in clips)
    return (sum(bool(base[c]["runaway"]) for c in clips),
            sum(bool(other[c]["runaway"]) for c in clips), only_base, only_other,
            mcnemar(only_base, only_other))


def compare(base, other):
    """WER of each side, the paired difference and its interval, clips better / worse, clip
    count, runaways (see runaways())."""
    clips = sorted(set(base) & set(other))
    base = {c: base[c] for c in clips}
    other = {c: other[c] for c in clips}
    d, low, high = check_reference.paired_difference(other, base)
    better = sum(other[c]["word_errors"] < base[c]["word_errors"] for c in clips)
    worse = sum(other[c]["word_errors"] > base[c]["word_errors"] for c in clips)
    return (check_reference.corpus(base.values()), check_reference.corpus(other.values()), d, low,
            high, better, worse, len(clips), runaways(base, other, clips))


def paired_policies(base, other, pair):
    """base's rows of policy pair[0] and other's of pair[1], keyed by pair[0] (both may come
    from one sweep: a policy against another on the same clips)."""
    first, second = pair
    return ({k: v for k, v in base.items() if k[0] == first},
            {(first, k[1]): v for k, v in other.items() if k[0] == second})


def table(cells, names, pair=None):
    head = (f"| cell | policy | retention | clips | WER {names[0]} | WER {names[1]} | "
            f"{names[1]} - {names[0]} (95% CI) | better-worse | runaways {names[0]} / "
            f"{names[1]} (only one side's; McNemar p) |\n" + "|---" * 9 + "|\n")
    lines = []
    for label, (base_path, other_path) in cells:
        base, other = load(base_path), load(other_path)
        if pair:
            base, other = paired_policies(base, other, pair)
        keys = sorted(set(base) & set(other), key=lambda k: (k[0] != "full", k[0], -k[1]))
        policies = []
        for policy, retention in keys:
            lines.append(row(label, policy, str(retention), compare(base[(policy, retention)],
                                                                    other[(policy, retention)])))
            if policy not in policies:
                policies.append(policy)
        for policy in policies:
            mine = [k for k in keys if k[0] == policy]
            if len(mine) > 1:
                lines.append(row(label, policy, "summed", compare(summed(base, mine),
                                                                  summed(other, mine))))
    return head + "\n".join(lines) + "\n"


def row(label, policy, retention, stats):
    wer_a, wer_b, d, low, high, better, worse, n, ran = stats
    mark = "**" if low > 0 or high < 0 else ""
    ran_text = f"{ran[0]} / {ran[1]} ({ran[2]}-{ran[3]}; p {ran[4]:.2g})" if ran else "—"
    return (f"| {label} | {policy} | {retention} | {n} | {wer_a:.2f} | {wer_b:.2f} | "
            f"{mark}{d:+.2f} ({low:+.2f} to {high:+.2f}){mark} | {better}-{worse} | {ran_text} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cell", action="append", required=True, help="LABEL=BASE.jsonl:OTHER.jsonl")
    ap.add_argument("--names", default="base,other", help="the two sweeps' names, base first")
    ap.add_argument("--pair", help="BASE_POLICY:OTHER_POLICY: compare the first sweep's rows of "
                                   "one policy with the second's of another (the files may be "
                                   "the same)")
    ap.add_argument("--md", help="also write the table here")
    args = ap.parse_args()
    cells = []
    for cell in args.cell:
        label, paths = cell.split("=", 1)
        cells.append((label, tuple(paths.split(":", 1))))
    run_variants.emit(table(cells, args.names.split(","),
                            args.pair.split(":", 1) if args.pair else None), args.md)


if __name__ == "__main__":
    main()
