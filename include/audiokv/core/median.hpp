// SPDX-License-Identifier: Apache-2.0
/// @file
/// Median smoothing: sliding median over a time-ordered sequence with edge padding (the first and
/// last values are replicated), so the output has the input's length.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "math.hpp"

namespace audiokv::core {

/// Median of five values in seven compare-exchanges, branch-free.
AUDIOKV_HOST_DEVICE float median_of_5(float a, float b, float c, float d, float e) {
  // Sort (a,b) and (d,e); the minimum of the two minima and the maximum of the two maxima can be
  // neither the median nor needed, which leaves a median of three.
  const float lo1 = min_of(a, b), hi1 = max_of(a, b);
  const float lo2 = min_of(d, e), hi2 = max_of(d, e);
  const float x = max_of(lo1, lo2);  // drops the smallest of four
  const float y = min_of(hi1, hi2);  // drops the largest of four
  return max_of(min_of(x, y), min_of(max_of(x, y), c));
}

/// x[clamp(i, 0, n - 1)]: the edge padding of numpy.pad(mode="edge").
AUDIOKV_HOST_DEVICE float edge_padded(const float* x, std::int32_t n, std::int32_t i) {
  return x[clamp_to<std::int32_t>(i, 0, n - 1)];
}

/// Median of the window [i - W/2, i + W/2] of x[0..n) with edge padding. W is odd.
template <int W>
AUDIOKV_HOST_DEVICE float median_at(const float* x, std::int32_t n, std::int32_t i) {
  static_assert(W % 2 == 1 && W >= 1 && W <= 63, "audiokv::median_at: W must be odd, 1..63");
  constexpr int half = W / 2;
  if constexpr (W == 1) {
    return x[i];
  } else if constexpr (W == 5) {
    return median_of_5(edge_padded(x, n, i - 2), edge_padded(x, n, i - 1), x[i],
                       edge_padded(x, n, i + 1), edge_padded(x, n, i + 2));
  } else {
    float window[W];
    for (int k = 0; k < W; ++k) {
      const float v = edge_padded(x, n, i - half + k);
      int j = k;
      for (; j > 0 && window[j - 1] > v; --j) window[j] = window[j - 1];
      window[j] = v;
    }
    return window[half];
  }
}

}  // namespace audiokv::core
