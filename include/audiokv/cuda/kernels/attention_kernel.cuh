// SPDX-License-Identifier: Apache-2.0
/// @file
/// Decode attention with per-cell probabilities, split-K (flash-decoding) style:
///  1. attention_partial_kernel: block (split, kv head, q-head chunk) reads its cells' K (and V)
///     once for up to 8 query heads of the GQA group (no repeat_kv), writes the logits into
///     probs and an online-softmax partial (state, accumulator) per query head;
///  2. attention_combine_kernel: merges the partials of every split per query head;
///  3. attention_probs_kernel: rescales the stored logits by the final (max, sum) in place and
///     reduces each group to one score per KV head (core::reduce_group).
/// Per-cell math is core/attention.hpp; cell -> row addressing is core::kv_addressing.
#pragma once

#include <cstdint>

#include "../../core/attention.hpp"
#include "../../core/gqa.hpp"
#include "../dtype.cuh"
#include "../params.cuh"

namespace audiokv::cuda::kernels {

// Kernels are static (internal linkage): every translation unit that includes this header
// compiles and registers its own copy, so any number of them link into one program.

/// Thread geometry of the partial kernel for element type T and head_dim D.
template <class T, int D>
struct attention_geometry {
  static constexpr int vec = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte load
  static constexpr int threads_per_row = D / vec;
  static constexpr int rows_per_warp = 32 / threads_per_row;
  static constexpr int warps = 4;
  static constexpr int threads = warps * 32;
  static constexpr int rows_per_block = warps * rows_per_warp;
  static constexpr int max_group = 8;  // query heads per block; larger groups use more blocks
  static_assert(D % vec == 0 && threads_per_row <= 32 && 32 % threads_per_row == 0,
                "audiokv: head_dim must be 64 or 128 for the attention kernel.");
};

/// Live cell count of a KV head: its device counter when given (clamped to the capacity), else
/// the capacity.
template <class T>
AUDIOKV_DEVICE std::int32_t live_count(const attention_params<T>& p, int kv_head) {
  return p.live_cells != nullptr ? core::min_of(p.live_cells[kv_head * p.live_stride], p.num_cells)
                                 : p.num_cells;
}

template <class T, int D, bool WithValues>
static __global__ void __launch_bounds__(attention_geometry<T, D>::threads)
    attention_partial_kernel(const attention_params<T> p) {
  using geo = attention_geometry<T, D>;
  constexpr int vec = geo::vec;
  constexpr int tpr = geo::threads_per_row;
  constexpr int gmax = geo::max_group;
  __shared__ float s_max[geo::rows_per_block][gmax];
  __shared__ float s_sum[geo::rows_per_block][gmax];
  __shared__ float s_acc[WithValues ? geo::rows_per_block : 1][gmax][WithValues ? D : 1];

  const int q_chunks = (p.group_size + gmax - 1) / gmax;
  const int kv_head = blockIdx.y / q_chunks;
  const int chunk = blockIdx.y % q_chunks;
  const int q0 = kv_head * p.group_size + chunk * gmax;
  const int gcount = core::min_of(gmax, p.group_size - chunk * gmax);
  const std::int32_t n = live_count(p, kv_head);
  const std::int32_t begin = blockIdx.x * p.cells_per_split;
  const std::int32_t end = core::min_of(begin + p.cells_per_split, n);
  const int lane = threadIdx.x % 32;
  const int sub = lane % tpr;
  const int row_group = (threadIdx.x / 32) * geo::rows_per_warp + lane / tpr;

  float qv[gmax][vec];
#pragma unroll
  for (int g = 0; g < gmax; ++g)
#pragma unroll
    for (int e = 0; e < vec; ++e)
      qv[g][e] = g < gcount ? p.q[static_cast<std::int64_t>(q0 + g) * D + sub * vec + e] : 0.0f;

  core::softmax_state state[gmax];
  float acc[WithValues ? gmax : 1][vec] = {};

  for (std::int32_t base = begin; base < end; base += geo::rows_per_block) {
    const std::int32_t cell = base + row_group;
    const bool valid = cell < end;
    float kf[vec] = {};
    float vf[vec] = {};
    if (valid) {
      const std::int64_t off = p.addr.row_offset(cell, kv_head) + sub * vec;
      ::audiokv::cuda::detail::load16_as_float(p.k + off, kf);
      if constexpr (WithValues) ::audiokv::cuda::detail::load16_as_float(p.v + off, vf);
    }
#pragma unroll
    for (int g = 0; g < gmax; ++g) {
      if (g >= gcount) break;  // block-uniform
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < vec; ++e) dot += qv[g][e] * kf[e];
#pragma unroll
      for (int offset = tpr / 2; offset > 0; offset /= 2)
        dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      if (!valid) continue;
      const float bias =
          p.logit_bias != nullptr
              ? p.logit_bias[static_cast<std::int64_t>(kv_head) * p.row_stride + cell]
              : 0.0f;
      const float x = core::cell_logit(dot, p.scale, bias);
      if (sub == 0) p.probs[static_cast<std::int64_t>(q0 + g) * p.row_stride + cell] = x;
      const core::online_weights w = core::online_step(state[g], x);
      if constexpr (WithValues) {
#pragma unroll
        for (int e = 0; e < vec; ++e) acc[g][e] = acc[g][e] * w.rescale + w.weight * vf[e];
      }
    }
  }

#pragma unroll
  for (int g = 0; g < gmax; ++g) {
    if (sub == 0) {
      s_max[row_group][g] = state[g].max;
      s_sum[row_group][g] = state[g].sum;
    }
    if constexpr (WithValues) {
#pragma unroll
      for (int e = 0; e < vec; ++e) s_acc[row_group][g][sub * vec + e] = acc[g][e];
    }
  }
  __syncthreads();

  const std::int64_t split_base = static_cast<std::int64_t>(blockIdx.x) * p.num_q_heads;
  constexpr int items = WithValues ? gmax * D : gmax;
  for (int idx = threadIdx.x; idx < items; idx += blockDim.x) {
    const int g = WithValues ? idx / D : idx;
    const int d = WithValues ? idx % D : 0;
    if (g >= gcount) continue;
    core::softmax_state total;
    for (int r = 0; r < geo::rows_per_block; ++r) total.merge({s_max[r][g], s_sum[r][g]});
    if (d == 0) p.partial_state[split_base + q0 + g] = total;
    if constexpr (WithValues) {
      float a = 0.0f;
      for (int r = 0; r < geo::rows_per_block; ++r)
        a += s_acc[r][g][d] * core::merge_factor(s_max[r][g], total.max);
      p.partial_acc[(split_base + q0 + g) * D + d] = a;
    }
  }
}

/// Block per query head: merges the split partials in split order (deterministic).
template <class T, int D, bool WithValues>
static __global__ void attention_combine_kernel(const attention_params<T> p) {
  const int h = blockIdx.x;
  core::softmax_state total;
  for (int s = 0; s < p.num_splits; ++s)
    total.merge(p.partial_state[static_cast<std::int64_t>(s) * p.num_q_heads + h]);
  if (threadIdx.x == 0) p.final_state[h] = total;
  if constexpr (WithValues) {
    if (p.out == nullptr) return;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
      float a = 0.0f;
      for (int s = 0; s < p.num_splits; ++s) {
        const std::int64_t i = static_cast<std::int64_t>(s) * p.num_q_heads + h;
        a += p.partial_acc[i * D + d] * core::merge_factor(p.partial_state[i].max, total.max);
      }
      p.out[static_cast<std::int64_t>(h) * D + d] = core::attention_output(a, total);
    }
  }
}

/// Thread per (cell, kv head): logits -> probabilities in place, then the group reduction.
template <class T>
static __global__ void attention_probs_kernel(const attention_params<T> p) {
  const std::int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  const int kv_head = blockIdx.y;
  if (j >= live_count(p, kv_head)) return;
  float* group_probs = p.probs + static_cast<std::int64_t>(kv_head) * p.group_size * p.row_stride;
  for (int g = 0; g < p.group_size; ++g) {
    float& x = group_probs[static_cast<std::int64_t>(g) * p.row_stride + j];
    x = p.final_state[kv_head * p.group_size + g].probability(x);
  }
  if (p.scores != nullptr)
    p.scores[static_cast<std::int64_t>(kv_head) * p.row_stride + j] =
        core::reduce_group(group_probs, p.group_size, p.row_stride, j, p.mode);
}

}  // namespace audiokv::cuda::kernels
