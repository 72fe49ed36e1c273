#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/quality/run_quality.py's word normalisation (used for runaway counts and the
per-run WER of the sweeps) against the cases in spoken_numbers_cases.tsv, which asr_smoke_test
checks against examples/asr_whisper/src/wer.hpp: the two normalisations stay the same."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks", "quality"))
import run_quality  # noqa: E402


def main():
    failures = 0
    cases = 0
    with open(os.path.join(HERE, "spoken_numbers_cases.tsv"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            text, expected = line.rstrip("\n").split("\t")
            got = run_quality.normalize_words(text)
            cases += 1
            if got != expected.split():
                failures += 1
                print(f"FAIL {text!r}: {got} != {expected.split()}")
    print(f"spoken_numbers_check: {cases - failures}/{cases} cases")
    return 1 if failures or cases == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
