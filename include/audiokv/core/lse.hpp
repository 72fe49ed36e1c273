// SPDX-License-Identifier: Apache-2.0
/// @file
/// Per-cell attention probabilities from the log-sum-exp (LSE) a flash-style kernel returns
/// beside its output, so an engine keeps its own attention kernel and still feeds a policy:
///   logit s_j = scale * (q . k_j)
///   natural:  lse = ln  sum_j e^(s_j)            p_j = e^(s_j - lse)
///   two:      lse = log2 sum_j 2^(s_j * log2 e)  p_j = 2^(s_j * log2 e - lse)
/// Both give p_j = softmax_j(s). The base is the kernel's, never guessed: FlashInfer's
/// FlashAttention-2 style decode/prefill kernels keep their running max in the log2 domain
/// (logits pre-multiplied by sm_scale * log2 e, include/flashinfer/attention/variants.cuh
/// DefaultAttention::sm_scale_log2) and return state_t::get_lse() = m + log2(d)
/// (include/flashinfer/attention/state.cuh): base two. Its CUTLASS backend
/// (BatchPrefillWithRaggedKVCacheWrapper(backend="cutlass"),
/// tests/attention/test_blackwell_fmha.py) is checked against torch.logsumexp: natural. One
/// library, two bases. Shared by the CPU driver (cpu/lse_scores.hpp) and the CUDA kernel
/// (cuda/kernels/lse_kernel.cuh).
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "math.hpp"

namespace audiokv::core {

/// The base of a log-sum-exp. No enumerator is 0: a value-initialised lse_base{} is invalid and
/// refused by every entry point, so the base is always stated by the caller.
enum class lse_base : std::uint8_t {
  natural = 1,  ///< lse = ln sum_j exp(s_j) (FlashInfer's CUTLASS backend, torch.logsumexp)
  two = 2,      ///< lse = log2 sum_j 2^(s_j log2 e) (FlashInfer state_t::get_lse)
};

/// True for the two named bases.
AUDIOKV_HOST_DEVICE constexpr bool is_valid_base(lse_base base) {
  return base == lse_base::natural || base == lse_base::two;
}

/// log2(e), the factor between a natural logit and a base-2 one.
constexpr float log2_e = 1.4426950408889634f;

/// Probability of a cell whose scaled logit is `logit` (scale * q.k) in a row whose
/// log-sum-exp in `base` is `lse` (formulas in the file comment).
AUDIOKV_HOST_DEVICE float lse_probability(float logit, float lse, lse_base base) {
  return base == lse_base::two ? exp2_of(logit * log2_e - lse) : exp_of(logit - lse);
}

}  // namespace audiokv::core

namespace audiokv {
using core::lse_base;
}  // namespace audiokv
