#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_reference.py's paired column (a variant's streaming WER minus the first variant's, with
its bootstrap interval) on rows built here:
1. the first variant against itself reads "—";
2. one more word error on every clip of equal length: every resample gives the same difference,
   so the interval is the point (+10.00 on clips of 10 words);
3. clips that only one side has are left out of the pairing;
4. compare_runs.py's row summed over retentions differs by the sum of the retentions'
   differences, and counts a clip better or worse by its summed errors; its exact McNemar p
   of the clips only one side runs away on;
5. language_detection_table.py's row: clips named right with the languages named instead, the
   paired WER difference, transcripts equal token for token, and the count over every set;
6. protocol_change.py's row: a policy's cost before and after a protocol change, the paired
   difference, and the runs changed, worse and better (by 5 or more); a run whose full cache
   changed by as much as its own word errors did not change cost.
Exit: 0 pass, 1 fail."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "quality"))
import check_reference  # noqa: E402
import compare_runs  # noqa: E402
import language_detection_table  # noqa: E402
import protocol_change  # noqa: E402


def rows(errors):
    return {f"c{i}": {"word_errors": e, "ref_words": 10} for i, e in enumerate(errors)}


def main():
    first = rows([0, 2, 5, 1])
    worse = rows([1, 3, 6, 2])
    worse["extra"] = {"word_errors": 9, "ref_words": 10}  # not in `first`: unpaired
    checks = [
        (check_reference.versus(first, first), "—"),
        (check_reference.versus(worse, first), "+10.00 (+10.00 to +10.00)"),
        (check_reference.versus(first, worse), "-10.00 (-10.00 to -10.00)"),
    ]
    base = {("audiokv", 0.4): rows([0, 2, 5, 1]), ("audiokv", 0.2): rows([3, 3, 3, 3])}
    other = {("audiokv", 0.4): rows([1, 2, 5, 1]), ("audiokv", 0.2): rows([3, 1, 3, 3])}
    keys = list(base)
    stats = compare_runs.compare(compare_runs.summed(base, keys), compare_runs.summed(other, keys))
    checks += [
        ("{:+.2f}".format(stats[2]), "{:+.2f}".format(2.5 - 5.0)),  # +1 and -2 errors, 40 words
        (stats[5:8], (1, 1, 4)),  # c1 better, c0 worse, 4 clips
        (stats[8], None),  # summed rows carry no runaway flag
        ("{:.3g}".format(compare_runs.mcnemar(0, 13)), "0.000244"),  # 2 / 2^13
        ("{:.3g}".format(compare_runs.mcnemar(11, 2)), "0.0225"),  # 2 (1 + 13 + 78) / 2^13
        (compare_runs.mcnemar(0, 0), 1.0),
    ]
    def detected(clip, errors, language, tokens):
        return {"clip_id": clip, "word_errors": errors, "ref_words": 10, "language": language,
                "tokens": tokens}

    cells = {
        ("es", "given"): {c: detected(c, 1, "es", [1, 2]) for c in ("a", "b", "c")},
        ("es", "auto200"): {"a": detected("a", 1, "es", [1, 2]), "b": detected("b", 4, "it", [3]),
                            "c": detected("c", 1, "es", [1, 3])},
        ("asr", "given"): {"d": detected("d", 0, "en", [5])},
        ("asr", "auto200"): {"d": detected("d", 0, "en", [5])},
    }
    lines = language_detection_table.table(cells, ["es", "asr"], ["auto200"], {}).split("\n")
    checks += [
        # b: named "it", 3 more errors on 30 words; a: the same tokens
        (lines[2], "| es (3; 10.00%) | 2 (it); +10.00 (+0.00 to +30.00); 1 |"),
        (lines[3], "| asr (1; 0.00%) | 1; +0.00 (+0.00 to +0.00); 1 |"),
        (lines[4], "| named right | 3 / 4 |"),
    ]
    checks += protocol_change_checks()
    failures = [f"got {got!r}, expected {want!r}" for got, want in checks if got != want]
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


def protocol_change_checks():
    def run(errors, full):
        return {"word_errors": errors, "full_errors": full, "ref_words": 10}

    key = ("streaming", "uniform_stride", 0.2)
    before = {key: {("s", "a"): run(1, 0), ("s", "b"): run(2, 1), ("s", "c"): run(3, 3)}}
    # a: 6 more errors (worse by >= 5); b: full cache and run both one error more (same cost);
    # c: one error fewer (better).
    after = {key: {("s", "a"): run(7, 0), ("s", "b"): run(3, 2), ("s", "c"): run(2, 3)}}
    lines = protocol_change.table(before, after).split("\n")
    # Cost 2 then 7 errors on 30 words; per clip +6, 0, -1: a resample of three c's (or three a's)
    # has probability 1/27 > 2.5%, so the interval's ends are -3/30 and +18/30.
    return [(lines[2], "| streaming | uniform_stride | 0.2 | +6.67 | +23.33 | +16.67 (-10.00 to "
                       "+60.00) | 3 of 3 | 1 (1) | 1 (0) |")]


if __name__ == "__main__":
    sys.exit(main())
