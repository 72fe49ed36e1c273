// SPDX-License-Identifier: Apache-2.0
/// @file
/// F3 as a stage: sliding median of width W with edge padding (W = 5 is ~50 ms of 10 ms frames).
#pragma once

#include <cstdint>

#include "../core/median.hpp"
#include "stage_context.hpp"

namespace audiokv {

/// @brief out[j] = median(in[j - W/2 .. j + W/2]) with the ends replicated. W odd.
template <int W = 5>
struct median_stage {
  static_assert(W % 2 == 1, "audiokv::median_stage: W must be odd so the window is centred.");
  static constexpr int width = W;

  void apply(const float* in, float* out, std::int32_t n, const stage_context&) const {
    for (std::int32_t j = 0; j < n; ++j) out[j] = core::median_at<W>(in, n, j);
  }
};

}  // namespace audiokv
