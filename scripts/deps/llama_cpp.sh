#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the llama.cpp library that include/audiokv/engines/llama_cpp.hpp, its tests and
# examples/llama_cpp link against, from the llama.cpp tree vendored in the PyPI source
# distribution llama-cpp-python==0.3.36 (llama.cpp commit 0c1e57098; the graph tensor names the
# adapter reads, kq_soft_max-<layer> and the K-store set_rows index, are internals of that commit).
#   build/llama-cpp/llama_cpp_python-0.3.36.tar.gz   the sdist (pip download; sha256 checked)
#   build/llama-cpp/install                          headers, static libraries, llama-config.cmake
# CPU only, Release, static, no network features (LLAMA_CURL, LLAMA_OPENSSL off) and only the
# library (tests, examples, server, tools, common off). GGML_NATIVE is off: the instruction set is
# then fixed (SSE4.2, AVX, AVX2, FMA, F16C, BMI2, i.e. x86-64-v3) instead of -march=native, so
# every x86-64-v3 machine runs the same kernels and the benchmarks' logits do not change with
# the host's extensions (AVX-512 machines would otherwise pick other matmul paths).
# Also installs the PyPI package gguf==0.19.0 (the gguf-py of that llama.cpp commit) when missing:
# tests/engines write their tiny random-weight GGUF models with it.
# Cached: a second run with the same sdist and options returns at once (a stamp file records
# them). Idempotent; safe to `source` (it does not change the caller's shell options) or to run.
# Environment: AUDIOKV_LLAMA_JOBS (build jobs, default 2), AUDIOKV_LLAMA_PYTHON (pip's python).
# The CMake configure of audiokv finds the install through its default hint
# build/llama-cpp/install (or llama_DIR / CMAKE_PREFIX_PATH).

audiokv_llama_cpp_deps() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  local dir="$root/build/llama-cpp"
  local version=0.3.36
  local sdist="llama_cpp_python-$version.tar.gz"
  local sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
  local src="$dir/llama_cpp_python-$version/vendor/llama.cpp"
  local py="${AUDIOKV_LLAMA_PYTHON:-python3}"
  local jobs="${AUDIOKV_LLAMA_JOBS:-2}"
  local options=(
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_COMMON=OFF
    -DLLAMA_BUILD_APP=OFF -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON
    -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_OPENMP=OFF -DGGML_CCACHE=OFF
  )
  if ! "$py" -c 'import importlib.metadata as m, sys; sys.exit(m.version("gguf") != "0.19.0")' \
      >/dev/null 2>&1; then
    echo "[deps/llama_cpp] pip install gguf==0.19.0"
    "$py" -m pip install --quiet --disable-pip-version-check gguf==0.19.0 || return 1
  fi
  local stamp="$dir/install/.audiokv-stamp"
  local want="$sha ${options[*]}"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "[deps/llama_cpp] llama.cpp present ($dir/install)"
    return 0
  fi
  mkdir -p "$dir" || return 1
  if [[ ! -f "$dir/$sdist" ]] || ! echo "$sha  $dir/$sdist" | sha256sum -c --quiet - 2>/dev/null; then
    echo "[deps/llama_cpp] pip download --no-deps --no-binary :all: llama-cpp-python==$version"
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
      "llama-cpp-python==$version" -d "$dir" || return 1
    echo "$sha  $dir/$sdist" | sha256sum -c --quiet - || {
      echo "[deps/llama_cpp] $sdist: sha256 differs from $sha" >&2
      return 1
    }
  fi
  if [[ ! -f "$src/include/llama.h" ]]; then
    rm -rf "$dir/llama_cpp_python-$version"
    tar -xzf "$dir/$sdist" -C "$dir" || return 1
  fi
  echo "[deps/llama_cpp] building llama.cpp (CPU, Release, static; $jobs jobs)"
  local t0=$SECONDS
  rm -rf "$dir/build" "$dir/install"
  cmake -S "$src" -B "$dir/build" -G Ninja -DCMAKE_INSTALL_PREFIX="$dir/install" \
    "${options[@]}" >"$dir/configure.log" 2>&1 || {
    tail -30 "$dir/configure.log" >&2
    return 1
  }
  cmake --build "$dir/build" --target install -j "$jobs" >"$dir/build.log" 2>&1 || {
    tail -30 "$dir/build.log" >&2
    return 1
  }
  echo "$want" >"$stamp"
  echo "[deps/llama_cpp] built in $((SECONDS - t0)) s ($dir/install)"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  audiokv_llama_cpp_deps
  exit $?
else
  audiokv_llama_cpp_deps
fi
