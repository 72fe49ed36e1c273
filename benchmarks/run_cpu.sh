#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the CPU micro benchmarks (Release) and writes benchmarks/results/cpu_micro.json, then
# prints the overhead ratios the README quotes. Usage: benchmarks/run_cpu.sh [extra gbench args]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps/build.sh
cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DAUDIOKV_BUILD_BENCHMARKS=ON \
  -DAUDIOKV_BUILD_TESTS=OFF -DAUDIOKV_BUILD_EXAMPLES=OFF -DAUDIOKV_ENABLE_CUDA=OFF >/dev/null
cmake --build build/bench --target audiokv_bench
mkdir -p benchmarks/results
build/bench/benchmarks/audiokv_bench --benchmark_min_time=0.3 \
  --benchmark_out=benchmarks/results/cpu_micro.json --benchmark_out_format=json "$@"
python3 benchmarks/summarize_cpu.py benchmarks/results/cpu_micro.json
