#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the C++ toolchain and libraries the build needs, and only what is missing:
#   g++ cmake ninja-build libeigen3-dev libgtest-dev libbenchmark-dev clang-format
# The CUDA toolkit is optional: without /usr/local/cuda/bin/nvcc the CUDA sources are skipped.
# Idempotent; safe to `source` or to run.

audiokv_build_deps() {
  local missing=() p
  for p in g++ cmake ninja-build libeigen3-dev libgtest-dev libbenchmark-dev clang-format; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    echo "[deps/build] apt-get update && apt-get install -y ${missing[*]}"
    $sudo apt-get update -qq || return 1
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" || return 1
  else
    echo "[deps/build] apt packages present (g++ cmake ninja-build libeigen3-dev libgtest-dev" \
         "libbenchmark-dev clang-format)"
  fi
  return 0
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  audiokv_build_deps
  exit $?
else
  audiokv_build_deps
fi
