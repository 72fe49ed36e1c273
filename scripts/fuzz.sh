#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets of tests/fuzz with clang++ (-fsanitize=fuzzer,address,undefined,
# whatever compiler the CMake build uses) and runs each one, one process on one core at a time,
# starting from the committed seed corpus tests/fuzz/corpus/<target>/.
#
# Usage: scripts/fuzz.sh [--smoke | --long SECONDS | --replay] [--build-dir DIR]
#                        [TARGET...]
#   --smoke        20 s per target (the CI default; 6 targets stay at 2 minutes of fuzzing)
#   --long S       S seconds per target (600 for the 10-minute runs of the issue)
#   --replay       run every committed seed and crash reproducer once (a fast regression check)
#   --build-dir D  where binaries, working corpora and crash artifacts go (default build/fuzz)
#   TARGET         policy_fuzzer, store_fuzzer, snapshot_fuzzer, page_granular_fuzzer,
#                  wav_fuzzer, model_loader_fuzzer (default: every one whose sources exist)
# Exit status: 0 no findings, 1 a fuzzer found a crash/leak/invariant violation (the reproducer
# path is printed), 2 bad usage or a build failure, 77 no clang++ with libFuzzer (skip).
# The committed corpus is never modified: new inputs go to <build-dir>/corpus/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

mode=smoke
seconds=20
build=build/fuzz
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) mode=smoke; seconds=20 ;;
    --long) mode=long; seconds="${2:?--long needs SECONDS}"; shift ;;
    --replay) mode=replay ;;
    --build-dir) build="${2:?--build-dir needs a directory}"; shift ;;
    -h|--help) sed -n '3,17p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
[[ "$build" = /* ]] || build="$root/$build"

cxx="${FUZZ_CXX:-}"
if [[ -z "$cxx" ]]; then
  for c in clang++ clang++-14 clang++-15 clang++-16 clang++-17 clang++-18; do
    if command -v "$c" >/dev/null; then cxx=$c; break; fi
  done
fi
if [[ -z "$cxx" ]]; then
  echo "fuzz.sh: SKIP: no clang++ found (apt-get install clang libclang-rt-14-dev)"
  exit 77
fi
mkdir -p "$build"
probe="$build/.probe"
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
    "$cxx" -x c++ - -fsanitize=fuzzer,address,undefined -o "$probe" 2>/dev/null; then
  echo "fuzz.sh: SKIP: $cxx cannot link -fsanitize=fuzzer (apt-get install libclang-rt-14-dev)"
  exit 77
fi

asr="$root/examples/asr_whisper"
eigen_flags=$(pkg-config --cflags eigen3 2>/dev/null || echo "-I/usr/include/eigen3")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(policy_fuzzer store_fuzzer)
  [[ -f "$root/tests/fuzz/snapshot_fuzzer.cpp" ]] && targets+=(snapshot_fuzzer)
  [[ -f "$root/tests/fuzz/page_granular_fuzzer.cpp" ]] && targets+=(page_granular_fuzzer)
  [[ -f "$asr/src/wav_reader.hpp" ]] && targets+=(wav_fuzzer)
  [[ -f "$asr/src/ct2_model_file.hpp" && -f "$asr/src/whisper_weights.hpp" ]] &&
    targets+=(model_loader_fuzzer)
fi

flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=all -I"$root/include")

build_target() {  # $1 target -> $build/$1 (rebuilt when a source or header is newer)
  local t=$1 src="$root/tests/fuzz/$1.cpp" out="$build/$1"
  local extra=()
  case "$t" in
    wav_fuzzer|model_loader_fuzzer) extra=(-I"$asr/src" $eigen_flags) ;;
  esac
  if [[ -x "$out" && -z "$(find "$src" "$root/include" "$asr/src" "$0" -newer "$out" \
        -print -quit 2>/dev/null)" ]]; then
    echo "$out"; return
  fi
  echo "[fuzz] building $t" >&2
  "$cxx" "${flags[@]}" "${extra[@]}" "$src" -o "$out" >&2 || return 1
  echo "$out"
}

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

status=0
summary=()
for t in "${targets[@]}"; do
  [[ -f "$root/tests/fuzz/$t.cpp" ]] || { echo "fuzz.sh: no target $t" >&2; exit 2; }
  bin=$(build_target "$t") || { echo "fuzz.sh: build of $t failed" >&2; exit 2; }
  seeds="$root/tests/fuzz/corpus/$t"
  work="$build/corpus/$t"
  art="$build/artifacts/$t/"
  mkdir -p "$work" "$art"
  log="$build/$t.$mode.log"
  # One plain libFuzzer process: one worker on one core (-jobs=1 would fork a child that logs to
  # ./fuzz-0.log instead).
  args=(-timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1
        -artifact_prefix="$art")
  [[ -f "$root/tests/fuzz/$t.dict" ]] && args+=(-dict="$root/tests/fuzz/$t.dict")
  echo "[fuzz] $t: $mode${mode:+ }$([[ $mode != replay ]] && echo "${seconds}s")"
  rc=0
  if [[ $mode == replay ]]; then
    # Every seed and every committed crash reproducer once, no mutation.
    dirs=("$seeds")
    [[ -d "$root/tests/fuzz/crashes/$t" ]] && dirs+=("$root/tests/fuzz/crashes/$t")
    "$bin" "${args[@]}" -runs=0 "${dirs[@]}" >"$log" 2>&1 || rc=$?
  else
    "$bin" "${args[@]}" -max_total_time="$seconds" "$work" "$seeds" >"$log" 2>&1 || rc=$?
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  corp=$(grep -Eo 'corp: [0-9]+/[0-9]+[a-zA-Z]*' "$log" | tail -1 || true)
  line="$t: runs=${runs:-?} exec/s=${eps:-?} ${cov:-cov: ?} ${corp:-} rc=$rc"
  if [[ $rc -ne 0 ]]; then
    status=1
    line+=" FINDING"
    grep -E 'ERROR: |runtime error:|invariant violated|unexpected exception|Test unit written' \
      "$log" | head -8 | sed 's/^/    /' >&2 || true
    tail -40 "$log" >&2
  fi
  echo "[fuzz] $line"
  summary+=("$line")
done
echo "[fuzz] summary ($mode):"
printf '  %s\n' "${summary[@]}"
exit $status
