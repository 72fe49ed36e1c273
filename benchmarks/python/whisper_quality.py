#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Whisper tiny.en transcription with the full cross-attention cache and with an eviction policy,
from Python: runs the C++ example `asr_whisper` (the same binary the quality sweep uses) with
`--json` and prints each clip's WER for every policy and retention, plus the totals.

    python3 benchmarks/python/whisper_quality.py                      # built-in 18.8 s clip
    python3 benchmarks/python/whisper_quality.py --policies audiokv,uniform_stride \\
        --keep-ratios 0.4,0.2 --manifest build/data/asr/manifest.tsv --split dev

The binary is built by `scripts/run.sh` (build/asr/examples/asr_whisper/asr_whisper) or any
build with AUDIOKV_BUILD_EXAMPLES=ON; pass another with --binary. The reference is the full
model (all 1500 frames); the budget of every policy is round(retention x audio frames).
"""

import argparse
import json
import os
import subprocess
import sys

DEFAULT_BINARY = "build/asr/examples/asr_whisper/asr_whisper"


def run(binary, policies, ratios, manifest, split):
    cmd = [binary, "--json", "--frames", "all", "--policies", ",".join(["full"] + policies),
           "--keep-ratios", ",".join(str(r) for r in ratios)]
    if manifest:
        cmd += ["--manifest", manifest, "--split", split]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=DEFAULT_BINARY)
    ap.add_argument("--policies", default="audiokv")
    ap.add_argument("--keep-ratios", default="0.4")
    ap.add_argument("--manifest", default="")
    ap.add_argument("--split", default="dev")
    args = ap.parse_args()
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"{args.binary} not found: run scripts/run.sh once (it builds it), or pass --binary")
    rows = run(args.binary, args.policies.split(","), [float(r) for r in args.keep_ratios.split(",")],
               args.manifest, args.split)
    totals = {}
    for r in rows:
        key = ("full cache", 1.0) if r["policy"] == "full" else (r["policy"], r["keep_ratio"])
        errors, words = totals.get(key, (0, 0))
        totals[key] = (errors + r["word_errors"], words + r["ref_words"])
        print(f"{r['clip_id']:>12}  {key[0]:>16} {key[1]:4.2f}  WER {100 * r['wer']:6.2f}%  {r['text']}")
    full_errors, full_words = totals.get(("full cache", 1.0), (0, 0))
    print()
    for (policy, ratio), (errors, words) in totals.items():
        wer = 100.0 * errors / max(words, 1)
        delta = wer - 100.0 * full_errors / max(full_words, 1)
        print(f"{policy:>16} keep {ratio:4.2f}: WER {wer:6.2f}%  ({delta:+.2f} points vs full cache)")


if __name__ == "__main__":
    main()
