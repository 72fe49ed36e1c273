#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the GPU bundle on a machine with nvcc (no GPU needed): configures a CUDA build for the
# given architectures (default sm_90) with warnings as errors, builds every GPU test, example and
# benchmark executable, and lays them out with the shared libraries a CUDA host may lack
# (cmake/gpu_bundle.cmake): BUNDLE/bin, BUNDLE/lib, BUNDLE/MANIFEST. Copy BUNDLE anywhere on a
# GPU host and run benchmarks/cuda/run_gpu_checks.sh BUNDLE there.
#
#   benchmarks/cuda/build_gpu_bundle.sh [BUNDLE]
#     BUNDLE  output folder (default build/gpu-bundle under the repository root)
#   Environment: AUDIOKV_BUNDLE_BUILD_DIR (default build/gpu-bundle-build), CUDA_ARCHS (default
#   90), JOBS (default 2), AUDIOKV_BUNDLE_MAX_MIB (default 56: the bundle must fit next to the
#   source tree in a 64 MiB transfer).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUNDLE="${1:-${ROOT}/build/gpu-bundle}"
BUILD="${AUDIOKV_BUNDLE_BUILD_DIR:-${ROOT}/build/gpu-bundle-build}"
ARCHS="${CUDA_ARCHS:-90}"
JOBS="${JOBS:-2}"
MAX_MIB="${AUDIOKV_BUNDLE_MAX_MIB:-56}"
NVCC="${CUDACXX:-/usr/local/cuda/bin/nvcc}"
mkdir -p "${BUNDLE}" "${BUILD}"
BUNDLE="$(cd "${BUNDLE}" && pwd)"

cmake -S "${ROOT}" -B "${BUILD}" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DAUDIOKV_ENABLE_CUDA=ON -DCMAKE_CUDA_COMPILER="${NVCC}" -DCMAKE_CUDA_ARCHITECTURES="${ARCHS}" \
  -DAUDIOKV_BUILD_TESTS=ON -DAUDIOKV_BUILD_EXAMPLES=ON -DAUDIOKV_BUILD_BENCHMARKS=ON \
  -DAUDIOKV_GPU_BUNDLE=ON -DAUDIOKV_GPU_BUNDLE_DIR="${BUNDLE}" \
  -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >"${BUILD}/configure.log" 2>&1 ||
  {
    tail -n 30 "${BUILD}/configure.log"
    exit 1
  }
cmake --build "${BUILD}" -j "${JOBS}" --target gpu_bundle

mib="$(du -sm "${BUNDLE}" | cut -f1)"
echo "bundle: ${BUNDLE}, ${mib} MiB"
grep -v '^#' "${BUNDLE}/MANIFEST" | sed 's/^/  /'
if ((mib > MAX_MIB)); then
  echo "bundle is ${mib} MiB, over ${MAX_MIB} MiB: build fewer CUDA_ARCHS or strip the binaries" >&2
  exit 1
fi
