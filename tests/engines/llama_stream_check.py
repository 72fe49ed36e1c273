#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/llama_cpp/llama_stream, unchanged, on tiny random-weight GGUFs with a byte tokenizer
(scripts/models/make_tiny_gguf.py --tokenizer bytes): qwen2 (one KV cache) and gemma2 (a full and
a window cache), on a text that is not one of the benchmark texts (the repository's LICENSE).

For each model every task runs (ppl, passkey once and stream, generate) with the adapter's
policies and llama.cpp's context shift, and every JSON line must say "ok"; an evicting policy
never holds more than its budget plus one chunk and the deferred newest cell (the budget at the
question after a one-shot compression), in a context bounded by the budget, not by the
stream's length. A policy name the registry does not know is one "error" line, the
others still run, and the exit status says a case failed.

Usage: llama_stream_check.py LLAMA_STREAM --models A.gguf,B.gguf --text FILE
"""
import argparse
import json
import subprocess
import sys

EVICTING = {"audiokv", "h2o", "tova", "streaming_llm", "uniform_stride", "snapkv"}


def run(binary, model, args):
    cmd = [binary, "--model", model, "--threads", "1", "--json"] + args
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    return p.returncode, rows, p.stderr


def check_rows(rows, expected, what):
    errors = []
    if len(rows) != expected:
        errors.append(f"{what}: {len(rows)} result lines, expected {expected}")
    for r in rows:
        tag = f"{what} {r.get('policy')} {r.get('budget_spec')} {r.get('depth', '')}"
        if r.get("status") != "ok":
            errors.append(f"{tag}: status {r.get('status')}: {r.get('error')}")
            continue
        if r["policy"] in EVICTING:
            if r.get("mode") == "once":
                # Compressed once after the prefill: the budget (and the newest cell) remain.
                if r["cells_at_question"] > r["budget"] + 1:
                    errors.append(f"{tag}: {r['cells_at_question']} cells at the question, "
                                  f"budget {r['budget']}")
            elif r["max_cells"] > r["budget"] + r["chunk"] + 1:
                # Evicted between chunks: a chunk's tokens and the deferred newest cell on top.
                errors.append(f"{tag}: held {r['max_cells']} cells, budget {r['budget']} "
                              f"+ chunk {r['chunk']} + 1")
            if r.get("evicted", 1) <= 0:
                errors.append(f"{tag}: nothing was evicted")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary")
    ap.add_argument("--models", required=True)
    ap.add_argument("--text", required=True)
    a = ap.parse_args()
    errors = []
    for model in a.models.split(","):
        ppl = ["full", "audiokv", "h2o", "tova", "streaming_llm", "uniform_stride", "context_shift"]
        rc, rows, err = run(a.binary, model, [
            "--text", a.text, "--task", "ppl", "--policies", ",".join(ppl), "--budgets", "64",
            "--max-tokens", "400"])
        errors += check_rows(rows, len(ppl), f"{model} ppl")
        if rc != 0:
            errors.append(f"{model} ppl: exit status {rc}: {err[-300:]}")
        for r in rows:
            if r.get("status") == "ok" and r["policy"] != "full" and r["n_ctx"] >= r["tokens"]:
                errors.append(f"{model} ppl {r['policy']}: n_ctx {r['n_ctx']} is not bounded by "
                              f"the budget ({r['tokens']} tokens)")
        for mode, policies in (("once", "audiokv,tova,snapkv"), ("stream", "audiokv,tova")):
            rc, rows, err = run(a.binary, model, [
                "--task", "passkey", "--passkey-mode", mode, "--max-tokens", "512",
                "--depths", "10,90", "--policies", policies, "--budgets", "20%"])
            errors += check_rows(rows, 2 * len(policies.split(",")), f"{model} passkey {mode}")
            if rc != 0:
                errors.append(f"{model} passkey {mode}: exit status {rc}")
        rc, rows, err = run(a.binary, model, [
            "--text", a.text, "--task", "generate", "--policies", "audiokv", "--budgets", "128",
            "--max-tokens", "300", "--chunk", "64", "--gen", "8"])
        errors += check_rows(rows, 1, f"{model} generate")
        if rows and rows[0].get("generated") != 8:
            errors.append(f"{model} generate: {rows[0].get('generated')} tokens, expected 8")
        # One failing case: an error line naming it, the other policy still runs, status != 0.
        rc, rows, err = run(a.binary, model, [
            "--text", a.text, "--task", "ppl", "--policies", "audiokv,no_such_policy",
            "--budgets", "64", "--max-tokens", "200"])
        status = {r.get("policy"): r.get("status") for r in rows}
        if status != {"audiokv": "ok", "no_such_policy": "error"} or rc == 0:
            errors.append(f"{model}: an unknown policy gave {status}, exit status {rc}")
    for e in errors:
        print("FAIL", e)
    print(f"llama_stream_check: {len(errors)} failure(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
