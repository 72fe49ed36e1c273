// SPDX-License-Identifier: Apache-2.0
/// @file
/// Trend smoothing: Holt's linear trend smoother over a time-ordered sequence m (the median's
/// output).
///   level  s[j] = w * m[j] + (1 - w) * (s[j-1] + d[j-1])
///   trend  d[j] = g * (s[j] - s[j-1]) + (1 - g) * d[j-1]
///   s[0] = m[0], d[0] = 0.
/// With d[j-1] replaced by the current difference m[j] - m[j-1] (the formula as first written),
/// s[j] - m[j] = (1 - w) * (s[j-1] - m[j-1]) and s[0] = m[0] make the stage the identity, so the
/// trend term is the previous smoothed slope instead. Sustained rises extrapolate upward; a lone
/// spike contributes one damped step.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "math.hpp"

namespace audiokv::core {

/// Level and slope carried from one cell to the next.
struct trend_state {
  /// Smoothed level s[j] (the stage output before the clamp).
  float level = 0.0f;
  /// Smoothed slope d[j].
  float slope = 0.0f;
};

/// State after the first cell: level m[0], no slope.
AUDIOKV_HOST_DEVICE trend_state trend_start(float m0) { return trend_state{m0, 0.0f}; }

/// One step of the recurrence for input m; returns the new state (its level is the output).
AUDIOKV_HOST_DEVICE trend_state trend_step(trend_state previous, float m, float level_weight,
                                           float slope_gain) {
  const float level = level_weight * m + (1.0f - level_weight) * (previous.level + previous.slope);
  const float slope = slope_gain * (level - previous.level) + (1.0f - slope_gain) * previous.slope;
  return trend_state{level, slope};
}

/// The smoother over one time-ordered row: out[j] = max(s[j], 0) for j < n (s from trend_start
/// and trend_step). The clamp keeps a falling extrapolation from producing a negative
/// importance. `out` may alias `in` (each input is read before its output is written).
AUDIOKV_HOST_DEVICE void trend_row(const float* in, float* out, std::int32_t n, float level_weight,
                                   float slope_gain) {
  if (n <= 0) return;
  trend_state state = trend_start(in[0]);
  out[0] = max_of(state.level, 0.0f);
  for (std::int32_t j = 1; j < n; ++j) {
    state = trend_step(state, in[j], level_weight, slope_gain);
    out[j] = max_of(state.level, 0.0f);
  }
}

}  // namespace audiokv::core
