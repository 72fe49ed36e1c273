#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: installs what is missing, builds the example ASR loop, and transcribes its
# built-in default clip (six Asterisk telephone prompts, 18.8 s) with Whisper tiny.en under the
# streaming protocol (audio revealed 0.5 s at a time, decoding as it arrives), with the full
# cross-attention cache and with AudioKV holding at most 40% of the audio frames, and prints
# each run's peak K/V; then offline, with AudioKV's buffer-pool rows in int8.
# Arguments replace the default runs (see build/asr/examples/asr_whisper/asr_whisper --help).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps/build.sh
source scripts/deps/asr.sh
cmake -S . -B build/asr -G Ninja -DCMAKE_BUILD_TYPE=Release -DAUDIOKV_BUILD_TESTS=OFF \
  -DAUDIOKV_ENABLE_CUDA=OFF >/dev/null
cmake --build build/asr --target asr_whisper
asr=build/asr/examples/asr_whisper/asr_whisper
if (($# > 0)); then exec "$asr" "$@"; fi
"$asr" --frames all --protocol streaming --policies full,audiokv --keep-ratios 0.4
exec "$asr" --frames all --policies full,audiokv --keep-ratios 0.4 --int8-buffer
