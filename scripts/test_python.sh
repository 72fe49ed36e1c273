#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package's tests: builds the extension with `pip install .` (scikit-build-core +
# nanobind from PyPI) into a virtual environment and runs pytest on python/tests.
# Usage: scripts/test_python.sh [--with-kvpress] [pytest args...]
#   --with-kvpress  also installs kvpress==0.5.5 (with torch and transformers, several GB from
#                   PyPI) so that python/tests/test_kvpress.py runs instead of skipping.
# Environment: AUDIOKV_PY_VENV (default build/py-venv), PYTHON (default python3).
# Exits with pytest's status; a missing Python or compiler stops it with a message and status 2.
set -euo pipefail
cd "$(dirname "$0")/.."

with_kvpress=0
if [[ "${1:-}" == "--with-kvpress" ]]; then
  with_kvpress=1
  shift
fi
venv="${AUDIOKV_PY_VENV:-build/py-venv}"
python="${PYTHON:-python3}"

if ! command -v "$python" >/dev/null 2>&1; then
  echo "[test_python] SKIPPED: no $python on PATH (the Python package needs Python >= 3.9)" >&2
  exit 2
fi
if ! command -v cmake >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1; then
  echo "[test_python] cmake or a C++ compiler is missing: installing the build tools" >&2
  source scripts/deps/build.sh
fi

if [[ ! -x "$venv/bin/python" ]]; then
  echo "[test_python] creating $venv"
  if ! "$python" -m venv "$venv"; then
    echo "[test_python] python3 -m venv failed: installing python3-venv" >&2
    source scripts/deps/apt.sh
    audiokv_apt_install python python3-venv
    "$python" -m venv "$venv"
  fi
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

echo "[test_python] installing the build and test requirements"
"${pip[@]}" install -q "numpy>=1.21" "pytest>=7" "hypothesis>=6" "nanobind>=2.0" \
  "scikit-build-core>=0.10"
if [[ "$with_kvpress" == 1 ]]; then
  echo "[test_python] installing kvpress==0.5.5 with torch and transformers"
  # torch's CUDA wheels take about 6 GB installed; without the cache the download is not kept
  # a second time. The free space is printed so that a full disk is named, not guessed.
  df -h "$venv" | tail -n 1 | awk '{print "[test_python] free disk: " $4}'
  "${pip[@]}" install -q --no-cache-dir "kvpress==0.5.5"
fi

echo "[test_python] pip install . (CMake build of the extension)"
# No build isolation: the backend and nanobind installed above are used, so the build needs no
# second download.
"${pip[@]}" install -q --no-build-isolation --force-reinstall --no-deps .

echo "[test_python] pytest python/tests"
# The source tree has no audiokv/ at the root, so the installed package is the one imported.
exec "$venv/bin/python" -m pytest -ra python/tests "$@"
