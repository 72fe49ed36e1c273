#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite: installs what is missing, then configures, builds and runs ctest through
# a CMake workflow preset. Usage: scripts/test.sh [PRESET]
#   PRESET  ci (default when nvcc is present: CUDA sources compiled, warnings are errors),
#           cpu (default without nvcc), asan (AddressSanitizer + UBSan), tsan (ThreadSanitizer:
#           builds and runs only the tests labelled threading), cuda (with a GPU).
# Without a PRESET argument it then runs the Python package's pytest (scripts/test_python.sh)
# with the real kvpress 0.5.5 for the kvpress press (AUDIOKV_PY_KVPRESS=0 leaves kvpress out).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps/build.sh
[[ -f scripts/deps/asr.sh ]] && source scripts/deps/asr.sh
[[ -f scripts/deps/llama_cpp.sh ]] && source scripts/deps/llama_cpp.sh

preset="${1:-}"
python_tests=0
if [[ -z "$preset" ]]; then
  python_tests=1
  if [[ -x /usr/local/cuda/bin/nvcc ]]; then preset=ci; else preset=cpu; fi
fi
echo "[test] cmake --workflow --preset $preset"
export CTEST_PARALLEL_LEVEL="${CTEST_PARALLEL_LEVEL:-$(nproc)}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
cmake --workflow --preset "$preset"
if [[ "$python_tests" == 1 ]]; then
  if [[ "${AUDIOKV_PY_KVPRESS:-1}" == 1 ]]; then
    bash scripts/test_python.sh --with-kvpress
  else
    bash scripts/test_python.sh
  fi
fi
