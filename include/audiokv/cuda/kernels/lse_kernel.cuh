// SPDX-License-Identifier: Apache-2.0
/// @file
/// LSE scoring on the device: per-cell probabilities from the log-sum-exp a flash kernel returned
/// (core/lse.hpp), GQA-reduced per KV head in the same pass. Geometry of the attention kernel
/// (attention_geometry). Block (cell tile, sequence x KV head): `threads_per_row` lanes read one
/// cell's K row with 16-byte loads, once for every query head of the group (no repeat_kv), reduce
/// each dot product with warp shuffles and apply core::lse_probability and core::group_fold /
/// group_finish, the CPU driver's functions (cpu/lse_scores.hpp). Cell -> row addressing is
/// core::kv_batch_addressing, read from device memory (contiguous counts or a FlashInfer CSR page
/// table).
#pragma once

#include <cstdint>

#include "../../core/attention.hpp"
#include "../../core/gqa.hpp"
#include "../../core/lse.hpp"
#include "../../core/paged.hpp"
#include "../dtype.cuh"
#include "../params.cuh"
#include "attention_kernel.cuh"

namespace audiokv::cuda::kernels {

// Static (internal linkage): every translation unit that includes this header registers its own
// copy, so any number of them link into one program.
template <class T, int D>
static __global__ void __launch_bounds__(attention_geometry<T, D>::threads)
    lse_scores_kernel(const lse_params<T> p) {
  using geo = attention_geometry<T, D>;
  constexpr int vec = geo::vec;
  constexpr int tpr = geo::threads_per_row;
  const std::int32_t b = static_cast<std::int32_t>(blockIdx.y) / p.num_kv_heads;
  const std::int32_t h = static_cast<std::int32_t>(blockIdx.y) % p.num_kv_heads;
  const std::int32_t n = p.kv.num_cells(b);
  const std::int32_t first = static_cast<std::int32_t>(blockIdx.x) * geo::rows_per_block;
  if (first >= n) return;  // block-uniform: the tile holds no cell of this sequence
  const int lane = threadIdx.x % 32;
  const int sub = lane % tpr;
  const std::int32_t cell = first + (threadIdx.x / 32) * geo::rows_per_warp + lane / tpr;
  const bool valid = cell < n;

  float kf[vec] = {};
  if (valid) {
    const core::kv_addressing addr = p.kv.sequence(b);
    const std::int64_t off = p.kv.sequence_offset(b) + addr.row_offset(cell, h) + sub * vec;
    ::audiokv::cuda::detail::load16_as_float(p.k + off, kf);
  }
  const std::int64_t q_row0 = static_cast<std::int64_t>(b) * p.num_q_heads + h * p.group_size;
  float acc = 0.0f;
  for (std::int32_t g = 0; g < p.group_size; ++g) {  // uniform across the block
    const float* qg = p.q + (q_row0 + g) * D + sub * vec;
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < vec; ++e) dot += qg[e] * kf[e];
#pragma unroll
    for (int offset = tpr / 2; offset > 0; offset /= 2)
      dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    if (!valid) continue;
    const float prob =
        core::lse_probability(core::cell_logit(dot, p.scale, 0.0f), p.lse[q_row0 + g], p.base);
    if (sub == 0 && p.probs != nullptr) p.probs[(q_row0 + g) * p.row_stride + cell] = prob;
    acc = core::group_fold(acc, prob, g, p.mode);
  }
  if (valid && sub == 0 && p.scores != nullptr) {
    p.scores[(static_cast<std::int64_t>(b) * p.num_kv_heads + h) * p.row_stride + cell] =
        core::group_finish(acc, p.group_size, p.mode);
  }
}

}  // namespace audiokv::cuda::kernels
