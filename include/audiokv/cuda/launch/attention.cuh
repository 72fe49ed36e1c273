// SPDX-License-Identifier: Apache-2.0
/// @file
/// Launchers of decode attention with per-cell probabilities, and of the scoring kernel.
/// Launcher contract (stream, workspace, graph capture, errors): cuda/launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../check.cuh"
#include "../dispatch.cuh"
#include "../kernels/attention_kernel.cuh"
#include "../params.cuh"
#include "workspace.cuh"

namespace audiokv::cuda {

namespace detail {

/// Split-K plan of the attention kernel: a pure function of the shape.
struct attention_split {
  std::int32_t cells_per_split = 0;
  std::int32_t num_splits = 0;
};
inline attention_split plan_attention_split(std::int32_t num_cells) {
  std::int32_t per = (num_cells + 1023) / 1024;
  per = per < 256 ? 256 : (per + 31) / 32 * 32;
  const std::int32_t n = num_cells > 0 ? num_cells : 1;
  return {per, (n + per - 1) / per};
}

}  // namespace detail

/// @brief Workspace of decode_attention / attention_scores for `shape`.
inline std::size_t decode_attention_workspace_bytes(const attention_shape& shape) {
  const auto split = detail::plan_attention_split(shape.num_cells);
  detail::workspace_carver w(nullptr);
  w.take<core::softmax_state>(static_cast<std::size_t>(split.num_splits) * shape.num_q_heads);
  w.take<float>(static_cast<std::size_t>(split.num_splits) * shape.num_q_heads * shape.head_dim);
  w.take<core::softmax_state>(static_cast<std::size_t>(shape.num_q_heads));
  return w.used();
}

/// @brief One decode step of one layer: out = softmax(q K^T / sqrt(d)) V and the per-cell
/// probabilities, in one pass over K/V (online softmax, split over blocks, merged in a fixed
/// order: deterministic), GQA without repeating K/V.
/// @param q           [num_q_heads, head_dim] fp32
/// @param k, v        K/V of element type `kv_type`, rows addressed by `addr` (element offsets,
///                    unit dim stride, 16-byte aligned rows); v == nullptr computes scores only
/// @param out         [num_q_heads, head_dim] fp32, or nullptr
/// @param probs       [num_q_heads, row_stride] fp32 probabilities (a KV head's cells at and
///                    beyond its live count are left untouched)
/// @param scores      [num_kv_heads, row_stride] group-reduced probabilities, or nullptr
/// @param live_cells  device live counts (each clamped to shape.num_cells), or nullptr (every
///                    head attends shape.num_cells cells): KV head h attends its first
///                    live_cells[h * live_stride] cells
/// @param logit_bias  [num_kv_heads, row_stride] fp32 added to each logit (shared rows: ln m
///                    of a shared row, core::multiplicity_bias), or nullptr
/// @param live_stride 0: one count for every KV head; 1: one count per KV head
/// @param row_stride  floats between rows of probs, scores and logit_bias; 0 means
///                    shape.num_cells (otherwise >= shape.num_cells)
/// Launches 3 kernels on `stream`; never allocates or synchronises; graph-capturable. Returns
/// cudaErrorInvalidValue for a bad shape, pointer, alignment, live_stride or row_stride.
inline cudaError_t decode_attention(const attention_shape& shape, dtype kv_type, const float* q,
                                    const void* k, const void* v, const core::kv_addressing& addr,
                                    float* out, float* probs, float* scores, gqa_reduce mode,
                                    const std::int32_t* live_cells, void* workspace,
                                    std::size_t workspace_bytes, cudaStream_t stream,
                                    const float* logit_bias = nullptr, std::int32_t live_stride = 0,
                                    std::int64_t row_stride = 0) {
  if (row_stride == 0) row_stride = shape.num_cells;
  if (live_stride < 0 || live_stride > 1 || row_stride < shape.num_cells)
    return cudaErrorInvalidValue;
  if (shape.num_kv_heads < 1 || shape.num_q_heads % shape.num_kv_heads != 0 ||
      shape.num_cells < 0 || q == nullptr || k == nullptr || probs == nullptr ||
      workspace_bytes < decode_attention_workspace_bytes(shape) || workspace == nullptr)
    return cudaErrorInvalidValue;
  if (shape.num_cells == 0) return cudaSuccess;
  const std::int64_t vec = 16 / dtype_bytes(kv_type);
  if (!detail::aligned16(k) || (v != nullptr && !detail::aligned16(v)) ||
      addr.entry_stride % vec != 0 || addr.head_stride % vec != 0 || addr.page_stride % vec != 0)
    return cudaErrorInvalidValue;
  const auto split = detail::plan_attention_split(shape.num_cells);
  AUDIOKV_DISPATCH_DTYPE(
      kv_type, T, {AUDIOKV_DISPATCH_HEAD_DIM(shape.head_dim, D, {
        using geo = kernels::attention_geometry<T, D>;
        attention_params<T> p;
        detail::workspace_carver w(workspace);
        p.partial_state = w.take<core::softmax_state>(static_cast<std::size_t>(split.num_splits) *
                                                      shape.num_q_heads);
        p.partial_acc =
            w.take<float>(static_cast<std::size_t>(split.num_splits) * shape.num_q_heads * D);
        p.final_state = w.take<core::softmax_state>(static_cast<std::size_t>(shape.num_q_heads));
        p.q = q;
        p.k = static_cast<const T*>(k);
        p.v = static_cast<const T*>(v);
        p.addr = addr;
        p.out = out;
        p.probs = probs;
        p.scores = scores;
        p.live_cells = live_cells;
        p.live_stride = live_stride;
        p.row_stride = row_stride;
        p.logit_bias = logit_bias;
        p.num_q_heads = shape.num_q_heads;
        p.num_kv_heads = shape.num_kv_heads;
        p.group_size = shape.num_q_heads / shape.num_kv_heads;
        p.num_cells = shape.num_cells;
        p.num_splits = split.num_splits;
        p.cells_per_split = split.cells_per_split;
        p.scale = core::attention_scale(D);
        p.mode = mode;
        const int q_chunks = (p.group_size + geo::max_group - 1) / geo::max_group;
        const dim3 grid(static_cast<unsigned>(split.num_splits),
                        static_cast<unsigned>(shape.num_kv_heads * q_chunks));
        if (v != nullptr) {
          kernels::attention_partial_kernel<T, D, true><<<grid, geo::threads, 0, stream>>>(p);
          kernels::attention_combine_kernel<T, D, true><<<shape.num_q_heads, D, 0, stream>>>(p);
        } else {
          kernels::attention_partial_kernel<T, D, false><<<grid, geo::threads, 0, stream>>>(p);
          kernels::attention_combine_kernel<T, D, false><<<shape.num_q_heads, 32, 0, stream>>>(p);
        }
        AUDIOKV_CUDA_TRY(cudaGetLastError());
        const dim3 pgrid(detail::blocks_for(shape.num_cells, 256),
                         static_cast<unsigned>(shape.num_kv_heads));
        kernels::attention_probs_kernel<T><<<pgrid, 256, 0, stream>>>(p);
        AUDIOKV_CUDA_TRY(cudaGetLastError());
      })})
  return cudaSuccess;
}

/// @brief The standalone scoring kernel: probabilities (and group scores) from q and K only.
/// Same contract as decode_attention with v == nullptr and out == nullptr.
inline cudaError_t attention_scores(const attention_shape& shape, dtype kv_type, const float* q,
                                    const void* k, const core::kv_addressing& addr, float* probs,
                                    float* scores, gqa_reduce mode, const std::int32_t* live_cells,
                                    void* workspace, std::size_t workspace_bytes,
                                    cudaStream_t stream) {
  return decode_attention(shape, kv_type, q, k, nullptr, addr, nullptr, probs, scores, mode,
                          live_cells, workspace, workspace_bytes, stream);
}

}  // namespace audiokv::cuda
