// SPDX-License-Identifier: Apache-2.0
/// @file
/// The temporal stage: importance as an exponential moving average of attention, and what the
/// host entry points accept as an attention probability.
#pragma once

#include <cfloat>

#include "../config.hpp"

namespace audiokv::core {

/// I = alpha * a + (1 - alpha) * I_prev, with a the attention probability this step.
AUDIOKV_HOST_DEVICE float importance_update(float previous, float attention, float alpha) {
  return alpha * attention + (1.0f - alpha) * previous;
}

/// True when `a` is a valid attention score for the host entry points: finite and >= 0 (-0
/// included). Two compares without a branch, so a pass over a row that folds it in still
/// vectorises: NaN fails both, +inf the second, -inf and negative numbers the first.
AUDIOKV_HOST_DEVICE constexpr bool is_valid_attention(float a) {
  return static_cast<bool>(static_cast<int>(a >= 0.0f) & static_cast<int>(a <= FLT_MAX));
}

}  // namespace audiokv::core
