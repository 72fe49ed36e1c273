// SPDX-License-Identifier: Apache-2.0
/// @file
/// int8 rows: symmetric int8 row quantisation with one float scale per row.
///   scale = max_i |x_i| / 127 (1 when the row is all zeros; see int8_scale for tiny rows),
///   q_i = round(x_i / scale) in [-127, 127], x'_i = q_i * scale, so |x_i - x'_i| <= scale / 2.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "math.hpp"

namespace audiokv::core {

/// Scale from the row's largest magnitude. A row so small that max / 127 would be subnormal
/// (max < 127 * FLT_MIN, about 1.5e-36) uses scale = max instead, so codes are -1, 0, 1: a
/// subnormal scale has too few bits to keep |x - x'| <= scale / 2 (and may underflow to 0).
AUDIOKV_HOST_DEVICE float int8_scale(float max_abs) {
  constexpr float smallest_normal = 1.17549435e-38f;  // FLT_MIN
  if (!(max_abs > 0.0f)) return 1.0f;
  const float scale = max_abs / 127.0f;
  return scale >= smallest_normal ? scale : max_abs;
}

/// Round-half-away-from-zero quantisation of one value; NaN gives 0 (a NaN cast is undefined).
AUDIOKV_HOST_DEVICE std::int8_t quantize_int8(float x, float scale) {
  const float ratio = x / scale;
  const float y = ratio == ratio ? clamp_to(ratio, -127.0f, 127.0f) : 0.0f;
  return static_cast<std::int8_t>(y >= 0.0f ? y + 0.5f : y - 0.5f);
}

/// The value q * scale that an int8 code stands for.
AUDIOKV_HOST_DEVICE float dequantize_int8(std::int8_t q, float scale) {
  return static_cast<float>(q) * scale;
}

}  // namespace audiokv::core
