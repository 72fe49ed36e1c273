// SPDX-License-Identifier: Apache-2.0
/// @file
/// Decode attention: the per-cell steps of one-pass (online-softmax) decode attention, shared by
/// the CPU reference (cpu/reference.hpp) and the CUDA kernel (cuda/kernels/attention_kernel.cuh).
///   logit x_j = (q . k_j) * scale + b_j, scale = 1 / sqrt(head_dim), b_j an optional bias
///   state (m, s) over cells seen so far; acc = sum_j exp(x_j - m) v_j
/// Adding cell j rescales the old sum and accumulator by exp(m - m') and weights v_j by
/// exp(x_j - m'); two partial results over disjoint cells merge with the factors of
/// merge_factor(). out = acc / s, p_j = exp(x_j - m) / s.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "math.hpp"
#include "online_softmax.hpp"

namespace audiokv::core {

/// 1 / sqrt(head_dim): the logit scale of scaled dot-product attention.
AUDIOKV_HOST_DEVICE float attention_scale(std::int32_t head_dim) {
  return 1.0f / sqrt_of(static_cast<float>(head_dim));
}

/// Logit of one cell: (q . k) * scale plus an additive bias (shared rows: ln m for a row standing
/// for m cells, see core/shared_rows.hpp; 0 otherwise).
AUDIOKV_HOST_DEVICE float cell_logit(float dot, float scale, float bias) {
  return dot * scale + bias;
}

/// Factors of one online step: multiply the old sum and accumulator by `rescale`, then add
/// `weight` (and weight * v_j).
struct online_weights {
  /// Factor applied to the running sum and accumulator: exp(old max - new max).
  float rescale = 1.0f;
  /// Weight of the new cell: exp(logit - new max).
  float weight = 0.0f;
};

/// Folds logit x into `state` exactly as softmax_state::add does and returns the factors the
/// caller applies to its value accumulator.
AUDIOKV_HOST_DEVICE online_weights online_step(softmax_state& state, float x) {
  const float m = max_of(state.max, x);
  const online_weights w{exp_of(state.max - m), exp_of(x - m)};
  state.sum = state.sum * w.rescale + w.weight;
  state.max = m;
  return w;
}

/// Weight of a partial result whose running max is `part_max` in a merge whose final max is
/// `global_max` (0 for an empty partial, whose max is -FLT_MAX).
AUDIOKV_HOST_DEVICE float merge_factor(float part_max, float global_max) {
  return exp_of(part_max - global_max);
}

/// out_d = acc_d / sum; 0 when no cell contributed (sum == 0).
AUDIOKV_HOST_DEVICE float attention_output(float acc, const softmax_state& state) {
  return state.sum > 0.0f ? acc / state.sum : 0.0f;
}

}  // namespace audiokv::core
