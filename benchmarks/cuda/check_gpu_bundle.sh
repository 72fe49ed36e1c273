#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest gpu_bundle.relocated_run: the GPU bundle runs from a folder copied to another path.
#   check_gpu_bundle.sh CMAKE LAYOUT_SCRIPT INPUTS
# Lays the already-built GPU executables out (cmake/gpu_bundle_layout.cmake), copies the folder to
# another path and deletes the original, then runs benchmarks/cuda/run_gpu_checks.sh on the copy
# with the benchmarks only listed. Passes when the script exits 0, every executable resolves its
# non-system libraries inside the copy, every test binary in the MANIFEST ran with no failure,
# every example passed and every benchmark binary listed its benchmarks (without a device: the
# tests skip and the examples exit 77).
set -euo pipefail
cmake_bin="$1" layout="$2" inputs="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

"${cmake_bin}" -DAUDIOKV_GPU_BUNDLE_INPUTS="${inputs}" -DAUDIOKV_GPU_BUNDLE_DIR="${tmp}/built" \
  -P "${layout}"
mkdir -p "${tmp}/elsewhere/deeper"
cp -a "${tmp}/built" "${tmp}/elsewhere/deeper/bundle"
rm -rf "${tmp}/built"
bundle="${tmp}/elsewhere/deeper/bundle"

# Every executable finds its RUNPATH libraries in the copy, none in the build or system folders.
for exe in "${bundle}"/bin/*; do
  readelf -d "${exe}" | grep -q 'RUNPATH.*\$ORIGIN/\.\./lib' ||
    fail "${exe##*/}: no RUNPATH \$ORIGIN/../lib"
  if readelf -d "${exe}" | grep -q 'NEEDED.*libcudart'; then
    fail "${exe##*/}: needs the shared CUDA runtime"
  fi
done
for lib in "${bundle}"/lib/*; do
  name="${lib##*/}"
  for exe in "${bundle}"/bin/*; do
    resolved="$(ldd "${exe}" | awk -v n="${name}" '$1 == n { print $3 }')"
    [[ -z "${resolved}" ]] && continue
    if [[ "$(realpath "${resolved}")" != "$(realpath "${bundle}/lib/${name}")" ]]; then
      fail "${exe##*/} loads ${name} from ${resolved}, not from the bundle"
    fi
  done
done
if grep -q '^benchmark ' "${bundle}/MANIFEST"; then
  grep -q '^lib libbenchmark' "${bundle}/MANIFEST" || fail "libbenchmark is not in the bundle"
fi

status=0
(cd "${tmp}" && OUT="${tmp}/out" AUDIOKV_GPU_CHECKS_BENCHMARKS=list \
  bash "${here}/run_gpu_checks.sh" "${bundle}") >"${tmp}/run.log" 2>&1 || status=$?
cat "${tmp}/run.log"
[[ "${status}" == 0 ]] || fail "run_gpu_checks.sh exited ${status}"
for f in summary.txt device.txt tests.log tests-xml.tar.gz bench.log; do
  [[ -s "${tmp}/out/${f}" ]] || fail "no ${f} in OUT"
done
no_device=0
grep -q '^device: none' "${tmp}/run.log" && no_device=1
tar -tzf "${tmp}/out/tests-xml.tar.gz" >"${tmp}/xml.list"
n_tests=0
for t in $(awk '$1 == "test" { print $2 }' "${bundle}/MANIFEST"); do
  n_tests=$((n_tests + 1))
  line="$(grep "^test ${t}: " "${tmp}/run.log")" || fail "${t} did not run"
  [[ "${line}" =~ ok,\ exit\ 0,\ ran\ ([0-9]+),.*skipped\ ([0-9]+),\ failed\ 0$ ]] ||
    fail "${t}: ${line}"
  ((BASH_REMATCH[1] > 0)) || fail "${t} ran no test"
  grep -qx "xml/${t}.xml" "${tmp}/xml.list" || fail "no XML for ${t}"
done
((n_tests > 0)) || fail "no test binary in the MANIFEST"
for e in $(awk '$1 == "example" { print $2 }' "${bundle}/MANIFEST"); do
  if ((no_device)); then
    grep -q "^example ${e}: skipped (.*), exit 77$" "${tmp}/run.log" || fail "${e} did not skip"
  else
    grep -q "^example ${e}: ok, exit 0$" "${tmp}/run.log" || fail "${e} failed"
  fi
done
for b in $(awk '$1 == "benchmark" { print $2 }' "${bundle}/MANIFEST"); do
  grep -q "^benchmark ${b}: loads, [1-9][0-9]* benchmarks listed" "${tmp}/run.log" ||
    fail "${b} did not list its benchmarks"
done
if ((no_device)); then
  grep -Eq '^tests: [0-9]+ ran, [0-9]+ passed, [1-9][0-9]* skipped, 0 failed' "${tmp}/run.log" ||
    fail "no device, yet no test skipped"
fi
echo "gpu bundle: ${n_tests} test binaries ran from a relocated copy (no device: ${no_device})"
