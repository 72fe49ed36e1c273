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

/// Rows trend_rows() steps side by side.
inline constexpr std::int32_t trend_lanes = 8;

namespace detail {

/// trend_row() of L rows of n[l] >= 1 cells: one cell of every row per step over their common
/// length, then each row's remaining cells alone. Each row's operations and their order are
/// trend_row()'s; the rows' recurrences are independent, so their dependent chains overlap.
template <std::int32_t L>
void trend_lane_block(const float* const* in, float* const* out, const std::int32_t* n,
                      float level_weight, float slope_gain) {
  std::int32_t common = n[0];
  for (std::int32_t l = 1; l < L; ++l) common = n[l] < common ? n[l] : common;
  trend_state state[L];
  for (std::int32_t l = 0; l < L; ++l) {
    state[l] = trend_start(in[l][0]);
    out[l][0] = max_of(state[l].level, 0.0f);
  }
  for (std::int32_t j = 1; j < common; ++j) {
    for (std::int32_t l = 0; l < L; ++l) {
      state[l] = trend_step(state[l], in[l][j], level_weight, slope_gain);
      out[l][j] = max_of(state[l].level, 0.0f);
    }
  }
  for (std::int32_t l = 0; l < L; ++l) {
    for (std::int32_t j = common; j < n[l]; ++j) {
      state[l] = trend_step(state[l], in[l][j], level_weight, slope_gain);
      out[l][j] = max_of(state[l].level, 0.0f);
    }
  }
}

}  // namespace detail

/// @brief trend_row() of `rows` rows: out[r][j] for j < n[r] is bit-identical to
/// trend_row(in[r], out[r], n[r], level_weight, slope_gain).
///
/// One row is latency-bound (six dependent float operations per cell); up to trend_lanes rows
/// are stepped side by side over their common length, so that their independent recurrences
/// overlap. Host only. Each out[r] may alias in[r] but no other row.
/// @param in [rows] time-ordered input rows.
/// @param out [rows] output rows.
/// @param n [rows] cell counts (a row with n[r] <= 0 is left untouched).
/// @param rows number of rows.
/// @param level_weight w of trend_step().
/// @param slope_gain g of trend_step().
inline void trend_rows(const float* const* in, float* const* out, const std::int32_t* n,
                       std::int32_t rows, float level_weight, float slope_gain) {
  for (std::int32_t first = 0; first < rows;) {
    const std::int32_t left = rows - first;
    const std::int32_t lanes = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    bool all_nonempty = true;
    for (std::int32_t l = 0; l < lanes; ++l) all_nonempty = all_nonempty && n[first + l] > 0;
    if (lanes == 8 && all_nonempty) {
      detail::trend_lane_block<8>(in + first, out + first, n + first, level_weight, slope_gain);
    } else if (lanes == 4 && all_nonempty) {
      detail::trend_lane_block<4>(in + first, out + first, n + first, level_weight, slope_gain);
    } else if (lanes == 2 && all_nonempty) {
      detail::trend_lane_block<2>(in + first, out + first, n + first, level_weight, slope_gain);
    } else {
      for (std::int32_t l = 0; l < lanes; ++l) {
        trend_row(in[first + l], out[first + l], n[first + l], level_weight, slope_gain);
      }
    }
    first += lanes;
  }
}

}  // namespace audiokv::core
