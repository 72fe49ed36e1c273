#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints the compaction-mode table from compaction_modes_bench's JSON output.

Usage: benchmarks/summarize_compaction_modes.py benchmarks/results/compaction_modes_<cpu>.json
       (or compaction_modes_paged_<cpu>.json for the paged modes)
"""
import json
import sys


def main(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
    ctx = data.get("context", {})
    print(f"# {ctx.get('cpu_model', '?')}, {ctx.get('num_cpus', '?')} CPUs, {ctx.get('date', '')}")
    gather = {}
    paged = []
    rows = []
    for b in data["benchmarks"]:
        name = b["name"]
        if name.startswith("BM_EvictionCycle"):
            parts = dict(p.split(":") for p in name.split("/")[1:3])
            mode = "hole-filling" if parts["hole_filling"] == "1" else "stable"
            rows.append(f"| {parts['cells']} | {mode} | {b['evicted']:.0f} | {b['rows_moved']:.0f} "
                  f"| {b['bytes_moved'] / 1e6:.2f} | {b['compact_us']:.0f} | {b['eviction_us']:.0f} "
                  f"| {b['attention_us']:.0f} | {100 * b['amortised_share']:.3f}% "
                  f"| {100 * b['amortised_compact_share']:.4f}% |")
        elif name.startswith("BM_PagedModes"):
            paged.append(b)
        elif name.startswith("BM_SlotGather"):
            gather[name.split("/")[1]] = (b["real_time"], b["attention_us"])
    if rows:
        print("| cells | mode | evicted / head | rows moved / head | MB moved (8 heads, K+V) "
          "| compaction (us) | eviction (us) | attention step (us) | eviction per step / attention "
          "| compaction per step / attention |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows))
    if paged:
        modes = {"0": "page-table rule (spares)", "1": "stable in own pages",
                 "2": "hole-filling in own pages", "3": "page-granular"}
        print("\n| cells | paged mode (P = 16) | evicted | rows copied | spare pages | pages freed "
              "| planning (us) |")
        print("|---|---|---|---|---|---|---|")
        for b in paged:
            parts = dict(p.split(":") for p in b["name"].split("/")[1:3])
            print(f"| {parts['cells']} | {modes[parts['mode']]} | {b['evicted']:.0f} "
                  f"| {b['rows_moved']:.0f} | {b['spare_pages']:.0f} | {b['pages_freed']:.0f} "
                  f"| {b['real_time']:.0f} |")
    if gather:
        print("\nPer-step slot-map gather (8 heads), hole-filling only:")
        for cells, (t, att) in gather.items():
            print(f"- {cells} cells: {t:.1f} us = {100 * t / att:.2f}% of the attention step")


if __name__ == "__main__":
    main(sys.argv[1])
