// SPDX-License-Identifier: Apache-2.0
/// @file
/// F12: symmetric int8 row quantisation with one float scale per row.
///   scale = max_i |x_i| / 127 (1 when the row is all zeros), q_i = round(x_i / scale) in
///   [-127, 127], x'_i = q_i * scale, so |x_i - x'_i| <= scale / 2.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "math.hpp"

namespace audiokv::core {

/// Scale from the row's largest magnitude.
AUDIOKV_HOST_DEVICE float int8_scale(float max_abs) {
  return max_abs > 0.0f ? max_abs / 127.0f : 1.0f;
}

/// Round-half-away-from-zero quantisation of one value.
AUDIOKV_HOST_DEVICE std::int8_t quantize_int8(float x, float scale) {
  const float y = clamp_to(x / scale, -127.0f, 127.0f);
  return static_cast<std::int8_t>(y >= 0.0f ? y + 0.5f : y - 0.5f);
}

AUDIOKV_HOST_DEVICE float dequantize_int8(std::int8_t q, float scale) {
  return static_cast<float>(q) * scale;
}

}  // namespace audiokv::core
