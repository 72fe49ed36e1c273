#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: installs what is missing, builds the example ASR loop, and transcribes its
# built-in default clip (six Asterisk telephone prompts, 18.8 s) twice with Whisper tiny.en:
# with the full cross-attention cache, and with AudioKV keeping 40% of the audio frames and its
# buffer-pool rows in int8 (F12).
# Arguments replace the default ones (see build/asr/examples/asr_whisper/asr_whisper --help).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps/build.sh
source scripts/deps/asr.sh
cmake -S . -B build/asr -G Ninja -DCMAKE_BUILD_TYPE=Release -DAUDIOKV_BUILD_TESTS=OFF \
  -DAUDIOKV_ENABLE_CUDA=OFF >/dev/null
cmake --build build/asr --target asr_whisper
if (($# == 0)); then set -- --frames all --policies full,audiokv --keep-ratios 0.4 --int8-buffer; fi
exec build/asr/examples/asr_whisper/asr_whisper "$@"
