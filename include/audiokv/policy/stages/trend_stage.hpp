// SPDX-License-Identifier: Apache-2.0
/// @file
/// Trend smoothing as a stage: Holt's level/slope smoother (formula in core/trend.hpp), output
/// clamped at 0 so later weights and the entropy see non-negative mass.
#pragma once

#include <cstdint>

#include "../../core/math.hpp"
#include "../../core/trend.hpp"
#include "stage_context.hpp"

namespace audiokv::policy::stages {

/// @brief s[j] = w m[j] + (1 - w)(s[j-1] + d[j-1]); d[j] = g (s[j] - s[j-1]) + (1 - g) d[j-1].
///
/// A row stage, host only: s[j] depends on every earlier cell through the recurrence, so no
/// cell can be computed from a bounded neighbourhood. (A parallel scan of the linear
/// recurrence exists, but it reassociates the float operations and would change the scores.)
struct trend_stage {
  float level_weight = 0.6f;  ///< w: weight of the current median value
  float slope_gain = 0.3f;    ///< g: how fast the slope estimate follows the level

  /// out[j] = max(s[j], 0) for every cell j < n (core::trend_row; in != out).
  void apply(const float* in, float* out, std::int32_t n, const stage_context&) const {
    core::trend_row(in, out, n, level_weight, slope_gain);
  }

  /// apply() of `rows` rows with this stage's parameters (in[r] -> out[r], n[r] cells, each
  /// in[r] != out[r] and no row aliasing another), bit-identical to apply() row by row; the
  /// rows' recurrences run side by side (core::trend_rows).
  void apply_rows(const float* const* in, float* const* out, const std::int32_t* n,
                  std::int32_t rows) const {
    core::trend_rows(in, out, n, rows, level_weight, slope_gain);
  }
};

}  // namespace audiokv::policy::stages

namespace audiokv {
using policy::stages::trend_stage;
}  // namespace audiokv
