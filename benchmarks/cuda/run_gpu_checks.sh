#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs a GPU bundle (benchmarks/cuda/build_gpu_bundle.sh) on the machine it is on: every test
# binary and example in its MANIFEST, then the GPU benchmarks. Builds nothing and needs no CMake,
# compiler, GoogleTest or Google Benchmark: only bash, coreutils and, for a device, its driver.
#
#   benchmarks/cuda/run_gpu_checks.sh [BUNDLE]
#     BUNDLE   the bundle folder: the argument, else $AUDIOKV_GPU_BUNDLE, else build/gpu-bundle
#              under the repository root; it may have been copied to any path.
#   Environment:
#     OUT                              output folder (default ./gpu-out)
#     AUDIOKV_GPU_CHECKS_BENCHMARKS    run (default): time them on a device; list: only list them
#     AUDIOKV_BENCH_MIN_TIME           --benchmark_min_time in seconds (default 0.05)
#     AUDIOKV_BENCH_FILTER             --benchmark_filter (default: all)
#     AUDIOKV_TEST_TIMEOUT, AUDIOKV_BENCH_TIMEOUT   seconds per binary (default 180, 240)
#     AUDIOKV_GPU_CHECKS_DEADLINE      seconds for the whole run (default 500): a binary gets at
#                                      most what is left, and none starts with under 10 s left
#
# Writes to $OUT, six files at most: summary.txt, device.txt, tests.log (every test and example
# binary's output), tests-xml.tar.gz (GoogleTest XML per binary), bench.log and, on a device,
# gpu_<device>.json (Google Benchmark JSON of every benchmark binary, merged). Copy that file to
# benchmarks/results/ to keep it.
# Without a CUDA device the tests report their skips, the benchmarks are only listed (proving
# they load), and the exit status is 0. Exit 1 when a test, example or benchmark binary fails,
# 2 when the bundle is missing or broken.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUNDLE="${1:-${AUDIOKV_GPU_BUNDLE:-${ROOT}/build/gpu-bundle}}"
OUT="${OUT:-${PWD}/gpu-out}"
BENCH_MODE="${AUDIOKV_GPU_CHECKS_BENCHMARKS:-run}"
MIN_TIME="${AUDIOKV_BENCH_MIN_TIME:-0.05}"
TEST_TIMEOUT="${AUDIOKV_TEST_TIMEOUT:-180}"
BENCH_TIMEOUT="${AUDIOKV_BENCH_TIMEOUT:-240}"
DEADLINE="${AUDIOKV_GPU_CHECKS_DEADLINE:-500}"
START="$(date +%s)"

if [[ ! -f "${BUNDLE}/MANIFEST" ]]; then
  echo "run_gpu_checks: no bundle at ${BUNDLE} (no MANIFEST); build one with" \
    "benchmarks/cuda/build_gpu_bundle.sh" >&2
  exit 2
fi
BUNDLE="$(cd "${BUNDLE}" && pwd)"
mkdir -p "${OUT}"
OUT="$(cd "${OUT}" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "${WORK}"' EXIT

summary="${OUT}/summary.txt"
: >"${summary}"
say() { printf '%s\n' "$*" | tee -a "${summary}"; }
entries() { awk -v k="$1" '$1 == k { print $2 }' "${BUNDLE}/MANIFEST"; }
# The number captured by the extended regex $1 on the last line of $2 it matches (start anchored).
gcount() { sed -nE "s/^$1.*/\\1/p" "$2" | tail -n 1; }

# Seconds a binary may run: its own limit $1, at most what is left of the deadline; 0 when under
# 10 s are left.
budget() {
  local left=$((DEADLINE - ($(date +%s) - START)))
  if ((left < 10)); then echo 0; elif ((left < $1)); then echo "${left}"; else echo "$1"; fi
}

say "bundle: ${BUNDLE}"
say "$(grep -m1 '^# built' "${BUNDLE}/MANIFEST" | sed 's/^# //')"
status=0

# ---- device ----
device_rc=77
device_name="none"
if [[ -n "$(entries probe)" ]]; then
  probe="${BUNDLE}/bin/$(entries probe | head -n 1)"
  timeout 60 "${probe}" >"${OUT}/device.txt" 2>&1
  device_rc=$?
else
  echo "no probe in the bundle" >"${OUT}/device.txt"
  nvidia-smi -L >/dev/null 2>&1 && device_rc=0
fi
nvidia-smi >>"${OUT}/device.txt" 2>&1 || echo "nvidia-smi: not available" >>"${OUT}/device.txt"
case "${device_rc}" in
  0)
    device_name="$(sed -n 's/^name: //p' "${OUT}/device.txt" | head -n 1)"
    device_name="$(printf '%s' "${device_name:-unknown}" | tr -c 'A-Za-z0-9._-' '_' | sed 's/_*$//')"
    say "device: ${device_name} ($(sed -n 's/^compute_capability: //p' "${OUT}/device.txt" |
      head -n 1 | sed 's/^/sm /'), driver $(sed -n 's/^driver_version: //p' "${OUT}/device.txt"))"
    ;;
  77)
    say "device: none ($(grep -m1 '^no CUDA device' "${OUT}/device.txt" || echo 'no CUDA device')):" \
      "GPU tests skip, benchmarks are listed, not timed"
    ;;
  *)
    say "device: probe failed (exit ${device_rc}); see device.txt"
    status=2
    ;;
esac

# ---- tests and examples ----
tests_log="${OUT}/tests.log"
: >"${tests_log}"
mkdir -p "${WORK}/xml"
n_failed_bins=0
total_ran=0 total_passed=0 total_skipped=0 total_failed=0
for t in $(entries test); do
  log="${WORK}/${t}.log"
  limit="$(budget "${TEST_TIMEOUT}")"
  if ((limit == 0)); then
    say "test ${t}: FAILED, not run (deadline of ${DEADLINE} s reached)"
    n_failed_bins=$((n_failed_bins + 1))
    status=$((status > 1 ? status : 1))
    continue
  fi
  timeout "${limit}" "${BUNDLE}/bin/${t}" --gtest_output="xml:${WORK}/xml/${t}.xml" \
    >"${log}" 2>&1
  rc=$?
  # GoogleTest's closing lines: "[==========] N tests from M test suites ran.",
  # "[  PASSED  ] N tests.", "[  SKIPPED ] N tests, listed below:", "[  FAILED  ] N tests, ...".
  ran="$(gcount '\[==========\] ([0-9]+) tests? from .* ran\.' "${log}")"
  passed="$(gcount '\[  PASSED  \] ([0-9]+) tests?\.' "${log}")"
  skipped="$(gcount '\[  SKIPPED \] ([0-9]+) tests?, listed below:' "${log}")"
  failed="$(gcount '\[  FAILED  \] ([0-9]+) tests?, listed below:' "${log}")"
  ran="${ran:-0}" passed="${passed:-0}" skipped="${skipped:-0}" failed="${failed:-0}"
  verdict="ok"
  if [[ "${rc}" != 0 || "${failed}" != 0 || "${ran}" == 0 ]]; then
    verdict="FAILED"
    n_failed_bins=$((n_failed_bins + 1))
    status=$((status > 1 ? status : 1))
  fi
  say "test ${t}: ${verdict}, exit ${rc}, ran ${ran}, passed ${passed}, skipped ${skipped}," \
    "failed ${failed}"
  total_ran=$((total_ran + ran)) total_passed=$((total_passed + passed))
  total_skipped=$((total_skipped + skipped)) total_failed=$((total_failed + failed))
  { echo "===== ${t} (exit ${rc})"; cat "${log}"; } >>"${tests_log}"
done
for e in $(entries example); do
  log="${WORK}/${e}.log"
  limit="$(budget "${TEST_TIMEOUT}")"
  if ((limit == 0)); then
    say "example ${e}: FAILED, not run (deadline of ${DEADLINE} s reached)"
    n_failed_bins=$((n_failed_bins + 1))
    status=$((status > 1 ? status : 1))
    continue
  fi
  timeout "${limit}" "${BUNDLE}/bin/${e}" >"${log}" 2>&1
  rc=$?
  case "${rc}" in
    0) verdict="ok" ;;
    77) verdict="skipped ($(grep -m1 -i 'skip' "${log}" || echo 'no reason printed'))" ;;
    *)
      verdict="FAILED"
      n_failed_bins=$((n_failed_bins + 1))
      status=$((status > 1 ? status : 1))
      ;;
  esac
  say "example ${e}: ${verdict}, exit ${rc}"
  { echo "===== ${e} (exit ${rc})"; cat "${log}"; } >>"${tests_log}"
done
tar -czf "${OUT}/tests-xml.tar.gz" -C "${WORK}" xml
say "tests: ${total_ran} ran, ${total_passed} passed, ${total_skipped} skipped," \
  "${total_failed} failed; ${n_failed_bins} binaries failed"

# ---- benchmarks ----
bench_log="${OUT}/bench.log"
: >"${bench_log}"
if [[ "${device_rc}" != 0 && "${BENCH_MODE}" == run ]]; then BENCH_MODE=list; fi
jsons=()
for b in $(entries benchmark); do
  if [[ "${BENCH_MODE}" == run ]]; then
    args=(--benchmark_min_time="${MIN_TIME}" --benchmark_out="${WORK}/${b}.json"
      --benchmark_out_format=json)
    [[ -n "${AUDIOKV_BENCH_FILTER:-}" ]] && args+=(--benchmark_filter="${AUDIOKV_BENCH_FILTER}")
  else
    args=(--benchmark_list_tests=true)
  fi
  { echo "===== ${b} ${args[*]}"; } >>"${bench_log}"
  limit="$(budget "${BENCH_TIMEOUT}")"
  if ((limit == 0)); then
    say "benchmark ${b}: not run (deadline of ${DEADLINE} s reached)"
    continue
  fi
  timeout "${limit}" "${BUNDLE}/bin/${b}" "${args[@]}" >"${WORK}/${b}.log" 2>&1
  rc=$?
  cat "${WORK}/${b}.log" >>"${bench_log}"
  if [[ "${rc}" != 0 ]]; then
    say "benchmark ${b}: FAILED, exit ${rc}"
    status=$((status > 1 ? status : 1))
  elif [[ "${BENCH_MODE}" == run ]]; then
    errors="$(grep -c 'ERROR OCCURRED' "${WORK}/${b}.log" || true)"
    say "benchmark ${b}: ok, $(grep -o '"run_name"' "${WORK}/${b}.json" | wc -l) runs," \
      "${errors:-0} reported errors"
    jsons+=("${WORK}/${b}.json")
  else
    say "benchmark ${b}: loads, $(grep -c . "${WORK}/${b}.log") benchmarks listed (not timed)"
  fi
done

if ((${#jsons[@]} > 0)); then
  result="${OUT}/gpu_${device_name}.json"
  if command -v python3 >/dev/null 2>&1; then
    # One JSON: the first binary's context, every binary's benchmarks (each tagged "binary").
    python3 - "${result}" "${jsons[@]}" <<'PY'
import json, os, sys
merged = None
for path in sys.argv[2:]:
    with open(path) as f:
        doc = json.load(f)
    name = os.path.basename(path)[: -len(".json")]
    for b in doc.get("benchmarks", []):
        b["binary"] = name
    if merged is None:
        merged = doc
    else:
        merged["benchmarks"].extend(doc.get("benchmarks", []))
with open(sys.argv[1], "w") as f:
    json.dump(merged, f, indent=1)
PY
    say "benchmark results: ${result}"
  else
    for j in "${jsons[@]}"; do cp "${j}" "${OUT}/gpu_${device_name}_$(basename "${j}")"; done
    say "benchmark results: ${OUT}/gpu_${device_name}_*.json (no python3 to merge them)"
  fi
  for b in $(entries benchmark); do
    grep -E '^BM_' "${WORK}/${b}.log" | head -n 60
  done
fi

say "run_gpu_checks: exit ${status} after $(($(date +%s) - START)) s"
exit "${status}"
