// SPDX-License-Identifier: Apache-2.0
/// @file
/// What the host tells the cache about each new frame (one cached KV position).
#pragma once

#include <cstdint>

namespace audiokv::types {

/// Bit flags a host sets on a frame.
enum frame_flag : std::uint8_t {
  frame_flag_none = 0,
  /// Boundary protection: a phoneme transition; cells within +-boundary_radius positions are
  /// protected.
  frame_flag_phoneme_boundary = 1u << 0,
  /// Emergency pool: a segment start (utterance start, speaker change); lives in the emergency
  /// pool.
  frame_flag_segment_start = 1u << 1,
  /// Emergency pool: any other token the host wants kept; lives in the emergency pool.
  frame_flag_critical = 1u << 2,
  /// Emergency pool: an attention sink; lives in the emergency pool and is never evicted.
  frame_flag_sink = 1u << 3,
  /// Not audio: a text token of a speech LLM's sequence (its prompt, its output). The speech
  /// rules (temporal coverage floor, alignment frontier) govern audio frames only; a text cell
  /// is ranked by its score alone.
  frame_flag_text = 1u << 4,
};

/// Flags that place a frame in the emergency pool.
inline constexpr std::uint8_t emergency_flags =
    frame_flag_segment_start | frame_flag_critical | frame_flag_sink;

/// @brief Metadata of one appended frame.
struct frame_meta {
  /// Logical position; strictly increasing across appends. Never renumbered (RoPE is in K).
  std::int32_t pos = 0;
  /// Speaker id in [0, num_speakers).
  std::int32_t speaker = 0;
  /// Voice activity in [0, 1]: 1 voiced, 0 silence.
  float voice = 1.0f;
  /// Bitwise OR of frame_flag values.
  std::uint8_t flags = frame_flag_none;
  /// Prior; neutral at 0 (added, or multiplied in as 1 + prior, by the policy's prior mode).
  float prior = 0.0f;
};

}  // namespace audiokv::types

namespace audiokv {
using types::emergency_flags;
using types::frame_flag;
using types::frame_flag_critical;
using types::frame_flag_none;
using types::frame_flag_phoneme_boundary;
using types::frame_flag_segment_start;
using types::frame_flag_sink;
using types::frame_flag_text;
using types::frame_meta;
}  // namespace audiokv
