#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Asterisk prompts in other languages for the languages set of
# scripts/make_data.sh (examples/asr_whisper/tools/make_clips.py --language L):
#   Debian: asterisk-core-sounds-L (prompt texts) and asterisk-core-sounds-L-wav (8 kHz PCM16)
#           for L in $AUDIOKV_LANGUAGES (default "es fr it ru": Mexican Spanish, Canadian
#           French, Italian, Russian; one voice each, about 80 MB of packages)
# Idempotent; safe to `source` (it does not change the caller's shell options) or to run.

source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

audiokv_language_deps() {
  local packages=() lang
  for lang in ${AUDIOKV_LANGUAGES:-es fr it ru}; do
    packages+=("asterisk-core-sounds-$lang" "asterisk-core-sounds-$lang-wav")
  done
  audiokv_apt_install languages "${packages[@]}"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  audiokv_language_deps
  exit $?
else
  audiokv_language_deps
fi
