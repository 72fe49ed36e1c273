#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the CPU micro benchmarks (Release), runs them (3 repetitions in random interleaving, so
# that load on a shared machine spreads over all rows; the medians are reported), records the CPU
# (lscpu) and writes benchmarks/results/cpu_micro_<family>.json (amd, intel, ...), then prints
# the overhead ratios docs/results.md quotes and the roofline table (each phase against the STREAM
# bandwidth and the attention step of the same run).
# Usage: benchmarks/run_cpu.sh [extra gbench args]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps/build.sh
cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DAUDIOKV_BUILD_BENCHMARKS=ON \
  -DAUDIOKV_BUILD_TESTS=OFF -DAUDIOKV_BUILD_EXAMPLES=OFF -DAUDIOKV_ENABLE_CUDA=OFF >/dev/null
cmake --build build/bench --target audiokv_bench
mkdir -p benchmarks/results
echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
build/bench/benchmarks/audiokv_bench --benchmark_min_time=0.3 --benchmark_repetitions=3 \
  --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
  --benchmark_out=build/bench/cpu_micro.json --benchmark_out_format=json "$@"
python3 benchmarks/summarize_cpu.py --annotate --save-dir benchmarks/results \
  build/bench/cpu_micro.json
