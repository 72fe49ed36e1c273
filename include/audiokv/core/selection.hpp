// SPDX-License-Identifier: Apache-2.0
/// @file
/// The one ordering every backend uses to pick cells: ascending score, ties broken by ascending
/// position, so equal scores evict the older cell first and CPU and GPU pick the same set.
///
/// It is a total order on every float, so a sort or a select never meets an inconsistent
/// comparison (std::nth_element with a comparator that is not a strict weak order is undefined
/// behaviour): NaN comes first (a NaN score is evicted before any number, every NaN is equal to
/// every other, so NaN cells go in position order), -0 and +0 are equal, -inf and +inf sit at the
/// ends of the numbers. The host entry points reject NaN and negative probabilities; this order
/// is what the device step, which cannot throw, applies to whatever it is given, and
/// core/selection_key.hpp encodes the same order as an integer key.
#pragma once

#include <cstdint>

#include "../config.hpp"

namespace audiokv::core {

/// True when (score_a, key_a) is evicted before (score_b, key_b) in the order of this file: a
/// lower score first, NaN lowest, equal scores (every NaN equal) by ascending key. For any
/// Score with IEEE comparisons (float, double) and any Key with a strict order (positions).
template <class Score, class Key>
AUDIOKV_HOST_DEVICE constexpr bool evicts_before_by(Score score_a, Key key_a, Score score_b,
                                                    Key key_b) {
  if (score_a < score_b) return true;                     // two numbers, a lower
  if (score_a == score_b) return key_a < key_b;           // two equal numbers (-0 == +0)
  const bool a_nan = !(score_a == score_a);               // a greater, or a NaN among them
  return a_nan && (score_b == score_b || key_a < key_b);  // NaN before numbers, NaNs by key
}

/// True when (score_a, pos_a) is evicted before (score_b, pos_b): evicts_before_by on floats.
AUDIOKV_HOST_DEVICE bool evicts_before(float score_a, std::int32_t pos_a, float score_b,
                                       std::int32_t pos_b) {
  return evicts_before_by(score_a, pos_a, score_b, pos_b);
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
