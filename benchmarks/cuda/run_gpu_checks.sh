#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On a machine with an NVIDIA GPU: configure the `cuda` preset for sm_90, build, run the gpu
# tests and the GPU benchmarks. Logs and benchmark JSON go to $OUT (default ./gpu-out).
# Budget: < 8 minutes on an H200 with 16 cores.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-${ROOT}/gpu-out}"
BUILD="${ROOT}/build/gpu-checks"
JOBS="${JOBS:-$(nproc)}"
mkdir -p "${OUT}"

device="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)"
device="${device:-unknown}"
device="$(printf '%s' "${device}" | tr -c 'A-Za-z0-9._-' '_' | sed 's/_*$//')"
echo "device: ${device}" | tee "${OUT}/device.txt"
nvidia-smi >"${OUT}/nvidia-smi.txt" 2>&1 || true

cd "${ROOT}"
timeout 240 cmake --preset cuda -B "${BUILD}" -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DAUDIOKV_BUILD_BENCHMARKS=ON -DAUDIOKV_BUILD_EXAMPLES=OFF >"${OUT}/configure.log" 2>&1
timeout 300 cmake --build "${BUILD}" -j "${JOBS}" \
  --target cuda_kernels_test cuda_core_on_device_test cuda_kernels_bench >"${OUT}/build.log" 2>&1

status=0
(cd "${BUILD}" && timeout 120 ctest -L gpu --output-on-failure) >"${OUT}/ctest-gpu.log" 2>&1 ||
  status=$?
tail -n 5 "${OUT}/ctest-gpu.log"

timeout 120 "${BUILD}/benchmarks/cuda/cuda_kernels_bench" --benchmark_min_time=0.05 \
  --benchmark_out="${OUT}/gpu_${device}.json" --benchmark_out_format=json \
  >"${OUT}/bench.log" 2>&1 || status=$?
tail -n 30 "${OUT}/bench.log"
exit "${status}"
