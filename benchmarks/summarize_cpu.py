#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints the README's CPU table from a Google Benchmark JSON file of audiokv_bench.

Ratios compare rows of the same run: observe / attention per step, eviction / attention,
selection / std::nth_element, and the median's ns per cell.
"""
import json
import sys


def main(path):
    data = json.load(open(path))
    rows = {b["name"]: b for b in data["benchmarks"] if b.get("run_type", "iteration") == "iteration"}
    ctx = data["context"]
    print(f"machine: {ctx.get('cpu_model', '?')}, {ctx['num_cpus']} cpus, {ctx['date']}")
    print("| cells x 8 KV heads | attention step (us) | observe (us) | observe / attention "
          "| eviction (us) | median W=5 (ns/cell) | select 10% (us) | nth_element (us) |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (1024, 4096, 32768, 131072):
        def t(name):
            for key, b in rows.items():
                if key.startswith(f"{name}/{n}"):
                    return b["cpu_time"], b
            return float("nan"), {}
        att, _ = t("BM_EigenDecodeAttention")
        obs, _ = t("BM_AudiokvObserve")
        ev, _ = t("BM_AudiokvEviction")
        _, med = t("BM_Median5")
        sel, _ = t("BM_SelectLowest")
        nth, _ = t("BM_NthElementFloats")
        print(f"| {n} | {att:.0f} | {obs:.1f} | {100 * obs / att:.2f}% | {ev:.0f} | "
              f"{med.get('ns_per_cell', float('nan')) * 1e9:.2f} | {sel:.1f} | {nth:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/cpu_micro.json")
