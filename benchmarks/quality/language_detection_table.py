#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Table of streaming language detection: asr_whisper --language auto against the language given.

Rows: asr_whisper --json rows (full cache, --protocol streaming) with two keys added, "set" (the
clips' set: asr, voices, es, fr, it, ru, ...) and "variant" ("given" for --language xx, "autoN"
for --language auto --language-frames N). Each set's expected language is given by --expect
(default: asr and voices English, every other set its own name).

  language_detection_table.py --rows benchmarks/results/quality_dev_language_streaming.jsonl

Per set and auto variant: clips whose language was named right (and the languages named
instead), the corpus WER with auto minus with the language given, paired over the clips with
the bootstrap 95% interval (2000 resamples, seed 7, as every quality table), and the clips
whose transcript equals the given language's token for token. A last row counts every set's
clips named right.
"""
import argparse
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_reference  # noqa: E402

ENGLISH_SETS = ("asr", "voices")


def expected_language(set_name, expect):
    if set_name in expect:
        return expect[set_name]
    return "en" if set_name in ENGLISH_SETS else set_name


def load(path):
    """{(set, variant): {clip_id: row}} and the sets and auto variants in the file's order."""
    cells = collections.OrderedDict()
    for line in open(path):
        if line.strip():
            r = json.loads(line)
            cells.setdefault((r["set"], r["variant"]), {})[r["clip_id"]] = r
    sets = list(dict.fromkeys(s for s, _ in cells))
    autos = sorted({v for _, v in cells if v != "given"}, key=lambda v: int(v[4:] or 0))
    return cells, sets, autos


def cell(auto, given, language):
    named = [r for r in auto.values() if r["language"] == language]
    wrong = sorted({r["language"] for r in auto.values() if r["language"] != language})
    equal = sum(1 for k, r in auto.items() if k in given and r["tokens"] == given[k]["tokens"])
    diff, low, high = check_reference.paired_difference(auto, given)
    where = f" ({', '.join(wrong)})" if wrong else ""
    return (len(named), f"{len(named)}{where}; {diff:+.2f} ({low:+.2f} to {high:+.2f}); {equal}")


def table(cells, sets, autos, expect):
    head = "| set (clips; WER given) | " + " | ".join(
        f"N = {v[4:]} ({int(v[4:]) / 50:g} s)" for v in autos) + " |"
    lines = [head, "|---" * (len(autos) + 1) + "|"]
    named = collections.Counter()
    total = 0
    for s in sets:
        given = cells.get((s, "given"), {})
        total += len(given)
        parts = []
        for v in autos:
            n, text = cell(cells.get((s, v), {}), given, expected_language(s, expect))
            named[v] += n
            parts.append(text)
        wer = check_reference.corpus(list(given.values()))
        lines.append(f"| {s} ({len(given)}; {wer:.2f}%) | " + " | ".join(parts) + " |")
    lines.append("| named right | " + " | ".join(f"{named[v]} / {total}" for v in autos) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", required=True, help="asr_whisper rows with set and variant keys")
    ap.add_argument("--expect", action="append", default=[],
                    help="SET=LANGUAGE: the language a set's clips are in")
    args = ap.parse_args()
    expect = dict(e.split("=", 1) for e in args.expect)
    cells, sets, autos = load(args.rows)
    print(table(cells, sets, autos, expect))


if __name__ == "__main__":
    main()
