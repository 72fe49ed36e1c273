// SPDX-License-Identifier: Apache-2.0
/// @file
/// The one ordering every backend uses to pick cells: ascending score, ties broken by ascending
/// position, so equal scores evict the older cell first and CPU and GPU pick the same set.
#pragma once

#include <cstdint>

#include "../config.hpp"

namespace audiokv::core {

/// True when (score_a, pos_a) is evicted before (score_b, pos_b).
AUDIOKV_HOST_DEVICE bool evicts_before(float score_a, std::int32_t pos_a, float score_b,
                                       std::int32_t pos_b) {
  return score_a < score_b || (score_a == score_b && pos_a < pos_b);
}

/// Number of cells to evict for a ratio over n candidates: ceil(ratio * n) without float drift
/// (a ratio within 1e-6 of k/n counts as exactly k/n).
AUDIOKV_HOST_DEVICE std::int32_t ratio_count(float ratio, std::int32_t n) {
  if (!(ratio > 0.0f) || n <= 0) return 0;  // also NaN
  if (ratio >= 1.0f) return n;
  const double exact = static_cast<double>(ratio) * static_cast<double>(n);
  std::int32_t k = static_cast<std::int32_t>(exact);
  if (exact - static_cast<double>(k) > 1e-6 * static_cast<double>(n > 0 ? n : 1)) ++k;
  return k > n ? n : k;
}

}  // namespace audiokv::core
