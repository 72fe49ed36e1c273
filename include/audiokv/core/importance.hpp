// SPDX-License-Identifier: Apache-2.0
/// @file
/// The temporal stage: importance as an exponential moving average of attention.
#pragma once

#include "../config.hpp"

namespace audiokv::core {

/// I = alpha * a + (1 - alpha) * I_prev, with a the attention probability this step.
AUDIOKV_HOST_DEVICE float importance_update(float previous, float attention, float alpha) {
  return alpha * attention + (1.0f - alpha) * previous;
}

}  // namespace audiokv::core
