// SPDX-License-Identifier: Apache-2.0
/// @file
/// Test helpers: frame batches, and the synthetic speech stream of examples/common.
#pragma once

#include <audiokv/types/frame.hpp>

#include <cstdint>
#include <random>
#include <vector>
#include "synthetic_speech.hpp"

namespace audiokv::test {

/// Frames at positions first, first + 1, ... with the given speaker and voice.
inline std::vector<frame_meta> frames(std::int32_t first, std::int32_t count,
                                      std::int32_t speaker = 0, float voice = 1.0f) {
  std::vector<frame_meta> out(count);
  for (std::int32_t i = 0; i < count; ++i) out[i] = frame_meta{first + i, speaker, voice, 0, 0.0f};
  return out;
}

using synthetic::speech_stream;

}  // namespace audiokv::test
