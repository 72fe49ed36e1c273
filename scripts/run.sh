#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: installs what is missing, builds the examples, and runs the example ASR loop on its
# built-in default clip (full cache vs AudioKV at 40% retention). Falls back to the synthetic
# stream demo when the ASR example is not built. Extra arguments go to the example.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps/build.sh
[[ -f scripts/deps/asr.sh ]] && source scripts/deps/asr.sh
cmake --preset cpu >/dev/null
cmake --build build/cpu --target stream_demo $( [[ -d examples/asr_whisper ]] && echo asr_whisper )
if [[ -x build/cpu/examples/asr_whisper/asr_whisper ]]; then
  exec build/cpu/examples/asr_whisper/asr_whisper "$@"
fi
exec build/cpu/examples/stream_demo "$@"
