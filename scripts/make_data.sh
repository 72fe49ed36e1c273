#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Regenerates every evaluation set of examples/asr_whisper from Debian packages:
#   <out>/asr/manifest.tsv     Asterisk prompt clips, dev/test (tools/make_clips.py)
#   <out>/voices/manifest.tsv  synthetic voices, telephone band and noise, dev/test
#                              (tools/make_voices.py)
#   <out>/asr/dev_wide.tsv     the Asterisk dev clips plus 4 passes over the dev prompts in other
#                              orders (tuning only)
#   <out>/voices/dev_wide.tsv  the voice dev clips plus 3 passes with other voices and SNRs
#   <out>/voices/long.tsv      long streams of Asterisk prompts, split "long" (tools/make_voices.py)
#   <out>/menus/manifest.tsv   telephone-menu passages ("press 1 to ..., 2 to ..."), the same
#                              voices and channel, dev/test; menus/dev_wide.tsv with 3 more
#                              passes (tools/menu_passages.txt)
#   <out>/lang/L/manifest.tsv  Asterisk prompt clips in the language L, dev/test, for L in
#                              $AUDIOKV_LANGUAGES (default "es fr it ru"; scripts/deps/languages.sh;
#                              AUDIOKV_LANGUAGES=none skips them); lang/L/dev_wide.tsv with 3
#                              more passes over the dev prompts (tuning only)
# Usage: scripts/make_data.sh [OUT]   (default build/data). Installs what is missing first.
# Deterministic: the same packages give the same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build/data}"
source scripts/deps/asr.sh
py="${AUDIOKV_ASR_PYTHON:-python3}"
"$py" examples/asr_whisper/tools/make_clips.py --out "$out/asr" --wide-passes 4
"$py" examples/asr_whisper/tools/make_voices.py --out "$out/voices" --wide-passes 3
"$py" examples/asr_whisper/tools/make_voices.py --out "$out/menus" --no-long --wide-passes 3 \
  --passages examples/asr_whisper/tools/menu_passages.txt
if [[ "${AUDIOKV_LANGUAGES:-}" != none ]]; then
  source scripts/deps/languages.sh
  for lang in ${AUDIOKV_LANGUAGES:-es fr it ru}; do
    "$py" examples/asr_whisper/tools/make_clips.py --language "$lang" --out "$out/lang/$lang" \
      --wide-passes 3
  done
fi
