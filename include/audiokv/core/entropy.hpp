// SPDX-License-Identifier: Apache-2.0
/// @file
/// Eviction ratio: the entropy-driven eviction ratio r = base_rate + lambda * (1 - H / H_max),
/// clamped to [0, 1], where H is the Shannon entropy of p_j = s_j / sum(s) over the n candidates
/// and H_max = ln(n). Peaky scores (low H) evict more; flat, information-dense scores evict less.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "math.hpp"

namespace audiokv::core {

/// Accumulates sum(s) and sum(s ln s) in one pass; H = ln(S) - (sum s ln s) / S.
struct entropy_accumulator {
  /// S = sum of the non-negative scores added so far.
  double sum = 0.0;
  /// sum of s ln s over the positive scores (0 ln 0 = 0).
  double sum_s_log_s = 0.0;
  /// Number of scores added (the support size for H_max = ln count).
  std::int32_t count = 0;

  /// Adds one score; negative scores count as zero mass.
  AUDIOKV_HOST_DEVICE void add(float s) {
    ++count;
    if (s > 0.0f) {
      sum += s;
      sum_s_log_s += static_cast<double>(s) * static_cast<double>(log_of(s));
    }
  }

  /// add(s) with log_s = log_of(s) computed by the caller (read only when s > 0), so that the
  /// logarithms of many scores can be taken apart from the two dependent sums.
  AUDIOKV_HOST_DEVICE void add(float s, float log_s) {
    ++count;
    if (s > 0.0f) {
      sum += s;
      sum_s_log_s += static_cast<double>(s) * static_cast<double>(log_s);
    }
  }

  /// H in nats, >= 0; 0 for zero total mass.
  AUDIOKV_HOST_DEVICE double entropy() const {
    if (sum <= 0.0) return 0.0;
    const double h = static_cast<double>(log_of(static_cast<float>(sum))) - sum_s_log_s / sum;
    return h > 0.0 ? h : 0.0;  // rounding can leave a one-cell distribution just below 0
  }

  /// H / H_max in [0, 1]; 1 (no information, evict least) for n <= 1 or zero total mass.
  AUDIOKV_HOST_DEVICE float normalized_entropy() const {
    if (count <= 1 || sum <= 0.0) return 1.0f;
    const double h_max = static_cast<double>(log_of(static_cast<float>(count)));
    return clamp_to(static_cast<float>(entropy() / h_max), 0.0f, 1.0f);
  }
};

/// r = clamp(base_rate + lambda * (1 - normalized_entropy), 0, 1).
AUDIOKV_HOST_DEVICE float entropy_eviction_ratio(float normalized_entropy, float base_rate,
                                                 float lambda) {
  const float r = base_rate + lambda * (1.0f - normalized_entropy);
  return r == r ? clamp_to(r, 0.0f, 1.0f) : base_rate;  // NaN entropy: no information
}

}  // namespace audiokv::core
