#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the C++ toolchain and libraries the build needs, and only what is missing:
#   g++ cmake ninja-build libeigen3-dev libgtest-dev libbenchmark-dev clang-format, and clang with
#   libclang-rt-14-dev (libFuzzer) and valgrind for the reliability tests, and doxygen (the API
#   pages and the documentation test)
# The CUDA toolkit is optional: without /usr/local/cuda/bin/nvcc the CUDA sources are skipped.
# Idempotent; safe to `source` or to run.

source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

audiokv_build_deps() {
  audiokv_apt_install build g++ cmake ninja-build libeigen3-dev libgtest-dev libbenchmark-dev \
    clang-format clang libclang-rt-14-dev valgrind doxygen
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  audiokv_build_deps
  exit $?
else
  audiokv_build_deps
fi
