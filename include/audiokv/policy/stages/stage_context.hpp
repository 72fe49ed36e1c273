// SPDX-License-Identifier: Apache-2.0
/// @file
/// What a sequence or group smoothing stage may read besides the scores themselves.
#pragma once

#include <cstdint>

namespace audiokv::policy::stages {

/// @brief Per-evaluation context handed to every smoothing stage.
struct stage_context {
  const std::int32_t* speaker = nullptr;    // [n] speaker id of each cell
  const float* speaker_baseline = nullptr;  // [num_speakers] running mean importance
  std::int32_t num_speakers = 0;
  const std::int32_t* pos = nullptr;  // [n] logical positions, ascending
};

}  // namespace audiokv::policy::stages

namespace audiokv {
using policy::stages::stage_context;
}  // namespace audiokv
