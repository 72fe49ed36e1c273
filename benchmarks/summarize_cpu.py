#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints the CPU tables of docs/results.md from a Google Benchmark JSON file of audiokv_bench.

Ratios compare rows of the same run: observe / attention per step, eviction / attention,
selection / std::nth_element, the median's ns per cell, and the roofline table: for observe,
observe_group and each eviction phase, the bytes its byte model says it must move (the
`floor_bytes` counter; each model is stated beside its benchmark in
benchmarks/cpu/roofline_phases.cpp), the time those bytes take at the STREAM bandwidth measured
in the same run over arrays of the same size (the better of copy and triad), the measured time,
the achieved fraction of that roofline, and the ratio to the Eigen attention step.

With repetitions, the median aggregate of each benchmark is used (run_cpu.sh runs 3).

Usage:
  summarize_cpu.py RESULT.json                  print the tables
  summarize_cpu.py --annotate --save-dir DIR RESULT.json
      first adds the lscpu description and the load average at the end to the JSON context and
      writes it to DIR/cpu_micro_<family>.json (family: amd, intel, or the vendor id)
"""
import argparse
import json
import os
import subprocess
import sys

SIZES = (1024, 4096, 32768, 131072)
ROOFLINE_SIZES = (4096, 32768)
DRAM_STREAM = 4194304  # cells argument of the main-memory STREAM rows (2^25 floats per array)
HEADS, HEAD_DIM = 8, 128

# (label, benchmark name) of the roofline table, in pipeline order.
ROOFLINE_ROWS = (
    ("observe", "BM_RooflineObserve"),
    ("observe_heads() (8 heads together)", "BM_RooflineObserveHeads"),
    ("observe_group (G = 4)", "BM_RooflineObserveGroup4"),
    ("smoothing pipeline", "BM_RooflineSmoothing"),
    ("  median W=5 stage", "BM_RooflineStage<audiokv::median_stage<5>>"),
    ("  Holt trend stage", "BM_RooflineStage<audiokv::trend_stage>"),
    ("  speaker norm stage", "BM_RooflineStage<audiokv::speaker_norm_stage>"),
    ("protection rules", "BM_RooflineProtection"),
    ("speech rules", "BM_RooflineSpeechRules"),
    ("entropy ratio", "BM_RooflineEntropy"),
    ("selection (radix select)", "BM_RooflineSelect"),
    ("promotions", "BM_RooflinePromotions"),
    ("plan building", "BM_RooflineBuildPlan"),
    ("plan() whole", "BM_RooflinePlan"),
    ("apply()", "BM_RooflineApply"),
    ("eviction = plan() + apply()", "BM_RooflineEviction"),
    ("plan_heads() (8 heads together)", "BM_RooflinePlanLayer"),
    ("eviction = plan_heads() + apply()", "BM_RooflineEvictionLayer"),
)


def load_rows(data):
    """name -> row; the median aggregate when the run has repetitions, else the iteration row."""
    rows = {}
    for b in data["benchmarks"]:
        if b.get("run_type", "iteration") == "iteration":
            rows.setdefault(b["name"], b)
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median":
            rows[b["run_name"]] = b
    return rows


def to_us(row):
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[row.get("time_unit", "ns")]
    return row["cpu_time"] * scale


def lscpu():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    info = {}
    for line in out.splitlines():
        key, _, value = line.partition(":")
        info[key.strip()] = value.strip()
    keep = ("Architecture", "Vendor ID", "Model name", "CPU family", "Model", "Stepping",
            "CPU(s)", "Thread(s) per core", "Hypervisor vendor", "L1d cache", "L2 cache",
            "L3 cache", "CPU max MHz", "BogoMIPS")
    result = {k: info[k] for k in keep if k in info}
    flags = set(info.get("Flags", "").split())
    result["simd"] = " ".join(f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f") if f in flags)
    return result


def git_state():
    """The commit measured, and whether the library's headers differed from it (a working tree
    with uncommitted changes under include/)."""
    def git(*cmd):
        try:
            return subprocess.run(["git", *cmd], capture_output=True, text=True,
                                  check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""
    return {"head": git("rev-parse", "HEAD"),
            "include_uncommitted": bool(git("status", "--porcelain", "--", "include"))}


def family(info):
    vendor = info.get("Vendor ID", "unknown")
    return {"AuthenticAMD": "amd", "GenuineIntel": "intel"}.get(vendor, vendor.lower())


def micro_table(rows):
    print("| cells x 8 KV heads | attention step (us) | observe (us) | observe / attention "
          "| eviction (us) | median W=5 (ns/cell) | select 10% (us) | nth_element (us) |")
    print("|---|---|---|---|---|---|---|---|")
    for n in SIZES:
        def t(name):
            # Exactly name/n, or name/n/<options> (e.g. iterations:5).
            for key, row in rows.items():
                if key == f"{name}/{n}" or key.startswith(f"{name}/{n}/"):
                    return to_us(row), row
            return float("nan"), {}
        att, _ = t("BM_EigenDecodeAttention")
        obs, _ = t("BM_AudiokvObserve")
        ev, _ = t("BM_AudiokvEviction")
        _, med = t("BM_Median5")
        sel, _ = t("BM_SelectLowest")
        nth, _ = t("BM_NthElementFloats")
        print(f"| {n} | {att:.0f} | {obs:.1f} | {100 * obs / att:.2f}% | {ev:.0f} | "
              f"{med.get('ns_per_cell', float('nan')) * 1e9:.2f} | {sel:.1f} | {nth:.1f} |")


def bandwidth(rows, cells):
    """Best of STREAM copy and triad (bytes/s) at `cells` x 8 floats per array, or None."""
    values = [rows[f"{k}/{cells}"]["bytes_per_second"] for k in ("BM_StreamCopy", "BM_StreamTriad")
              if f"{k}/{cells}" in rows]
    return max(values) if values else None


def roofline_table(rows):
    if bandwidth(rows, ROOFLINE_SIZES[0]) is None:
        print("\n(no roofline rows in this file)")
        return
    dram = bandwidth(rows, DRAM_STREAM) or float("nan")  # nan: a filtered run without it
    print("\nSTREAM (GB/s, copy / triad):", ", ".join(
        f"{label} {rows[f'BM_StreamCopy/{c}']['bytes_per_second'] / 1e9:.1f} / "
        f"{rows[f'BM_StreamTriad/{c}']['bytes_per_second'] / 1e9:.1f}"
        for label, c in (("4096 x 8", 4096), ("32768 x 8", 32768), ("2^25 (memory)", DRAM_STREAM))
        if f"BM_StreamCopy/{c}" in rows and f"BM_StreamTriad/{c}" in rows))
    for n in ROOFLINE_SIZES:
        bw = bandwidth(rows, n)
        if bw is None:
            continue
        att_row = rows.get(f"BM_EigenDecodeAttention/{n}")
        att = to_us(att_row) if att_row else float("nan")
        print(f"\n{n} cells x 8 KV heads: roofline {bw / 1e9:.1f} GB/s (STREAM, same size), "
              f"{dram / 1e9:.1f} GB/s (memory); Eigen attention step {att:.0f} us")
        # Attention reads K and V (2 x 128 floats per cell and head) and writes one probability.
        att_bytes = float(n) * HEADS * (2 * HEAD_DIM * 4 + 4)
        print(f"(attention step: {att_bytes / 1e6:.1f} MB of K/V, {att_bytes / dram * 1e6:.0f} us "
              f"at memory bandwidth = {100 * att_bytes / dram * 1e6 / att:.0f}% of its roofline)")
        print("| phase | floor bytes | floor (us), cache / memory bw | measured (us) "
              "| fraction of roofline, cache / memory | x floor, cache / memory "
              "| / attention step |")
        print("|---|---|---|---|---|---|---|")
        for label, name in ROOFLINE_ROWS:
            row = rows.get(f"{name}/{n}")
            if not row:
                continue
            floor_bytes = row["floor_bytes"]
            floor_us, floor_mem = floor_bytes / bw * 1e6, floor_bytes / dram * 1e6
            measured = to_us(row)
            print(f"| {label} | {floor_bytes / 1e6:.3f} MB | {floor_us:.1f} / {floor_mem:.1f} "
                  f"| {measured:.1f} | {100 * floor_us / measured:.1f}% / "
                  f"{100 * floor_mem / measured:.1f}% | {measured / floor_us:.1f} / "
                  f"{measured / floor_mem:.1f} | {100 * measured / att:.2f}% |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="?", default="benchmarks/results/cpu_micro_amd.json")
    parser.add_argument("--annotate", action="store_true",
                        help="add lscpu and the current load average to the JSON context")
    parser.add_argument("--save-dir", help="write the (annotated) JSON as cpu_micro_<family>.json")
    parser.add_argument("--library-commit",
                        help="with --annotate: the commit the benchmark was built from, when it "
                             "was not built from this checkout (e.g. a clean export)")
    args = parser.parse_args()
    data = json.load(open(args.json))
    ctx = data["context"]
    if args.annotate:
        ctx["lscpu"] = lscpu()
        ctx["load_avg_end"] = list(os.getloadavg())
        ctx["git"] = ({"head": args.library_commit, "include_uncommitted": False}
                      if args.library_commit else git_state())
    if args.save_dir:
        path = os.path.join(args.save_dir, f"cpu_micro_{family(ctx.get('lscpu', {}))}.json")
        with open(path, "w") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        print(f"wrote {path}")
    cpu = ctx.get("lscpu", {})
    model = cpu.get("Model name", ctx.get("cpu_model", "?"))
    detail = (f" (family {cpu['CPU family']}, model {cpu['Model']}, {cpu.get('simd', '')})"
              if "CPU family" in cpu else "")
    load = ctx.get("load_avg", [float("nan")])[0]
    load_end = ctx.get("load_avg_end", [float("nan")])[0]
    print(f"machine: {model}{detail}, {ctx['num_cpus']} cpus, {ctx['date']}, "
          f"load {load:.2f} at start, {load_end:.2f} at end")
    if "git" in ctx:
        dirty = " + uncommitted include/ changes" if ctx["git"]["include_uncommitted"] else ""
        print(f"library: {ctx['git']['head'][:12] or 'unknown (not a git checkout)'}{dirty}")
    micro_table(load_rows(data))
    roofline_table(load_rows(data))


if __name__ == "__main__":
    sys.exit(main())
