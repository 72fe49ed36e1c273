// SPDX-License-Identifier: Apache-2.0
/// @file
/// Decode attention: the running (max, sum) pair of a one-pass softmax. After all logits x_j are
/// added, p_j = exp(x_j - max) / sum. Two partial states over disjoint cells merge exactly, which
/// lets a kernel split the cells across threads and still return exact probabilities.
#pragma once

#include "../config.hpp"
#include "math.hpp"

namespace audiokv::core {

/// @brief Running maximum and rescaled sum of exponentials of an online softmax; two states
/// /// over disjoint cells merge exactly (split-K attention).
struct softmax_state {
  /// Largest logit folded in so far.
  float max = -3.402823466e38f;  // -FLT_MAX: the identity of the merge
  /// sum of exp(logit - max) over the logits folded in.
  float sum = 0.0f;

  /// Folds logit x into the state: sum' = sum * exp(max - max') + exp(x - max').
  AUDIOKV_HOST_DEVICE void add(float x) {
    const float m = max_of(max, x);
    sum = sum * exp_of(max - m) + exp_of(x - m);
    max = m;
  }

  /// Merges a state over other cells into this one.
  AUDIOKV_HOST_DEVICE void merge(const softmax_state& other) {
    const float m = max_of(max, other.max);
    sum = sum * exp_of(max - m) + other.sum * exp_of(other.max - m);
    max = m;
  }

  /// Probability of a cell whose logit is x.
  AUDIOKV_HOST_DEVICE float probability(float x) const { return exp_of(x - max) / sum; }
};

}  // namespace audiokv::core
