// SPDX-License-Identifier: Apache-2.0
/// @file
/// Launcher of LSE scoring (core/lse.hpp): per-cell probabilities of a batch of decode queries
/// from the log-sum-exp the engine's flash kernel returned, against contiguous or FlashInfer-paged
/// K, GQA-reduced per KV head. The CPU oracle is cpu/lse_scores.hpp. Launcher contract (stream,
/// graph capture, errors): cuda/launch.cuh; no workspace.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../../error.hpp"
#include "../../types/lse_scoring.hpp"
#include "../check.cuh"
#include "../dispatch.cuh"
#include "../kernels/lse_kernel.cuh"
#include "workspace.cuh"

namespace audiokv::cuda {

/// @brief Scores (and optionally per-query-head probabilities) of one decode step from the LSE.
/// @param s       the call (types::lse_scoring): q, lse and the table of s.kv (indptr, indices,
///                last_page_len or seq_lens) in device memory; s.shape.num_cells fixes the grid
///                (the capacity: no sequence may hold more cells), so a captured graph replays
///                with new counts and tables
/// @param k_type  element type of K (f32, f16, bf16); head_dim 64 or 128
/// @param k       K pool or tensor, rows addressed by s.kv with unit dim stride, 16-byte aligned
/// @param scores  [batch, num_kv_heads, s.stride()] fp32, or nullptr
/// @param probs   [batch, num_q_heads, s.stride()] fp32, or nullptr (at least one of the two)
/// Cells at and beyond a sequence's count are not written. Returns cudaErrorInvalidValue,
/// before enqueuing anything, when s fails lse_scoring::validate, both outputs are null, k is
/// null or misaligned, a stride is not a multiple of the 16-byte load, or batch * num_kv_heads
/// exceeds 65535; the table's contents
/// (device memory) are the caller's to keep valid (cpu::lse_scores checks them on the host).
inline cudaError_t lse_scores(const lse_scoring& s, dtype k_type, const void* k, float* scores,
                              float* probs, cudaStream_t stream) {
  try {
    s.validate("cuda::lse_scores");
  } catch (const ::audiokv::error&) {
    return cudaErrorInvalidValue;
  }
  if (scores == nullptr && probs == nullptr) return cudaErrorInvalidValue;
  if (s.batch == 0 || s.shape.num_cells == 0) return cudaSuccess;
  if (k == nullptr || !detail::aligned16(k)) return cudaErrorInvalidValue;
  if (static_cast<std::int64_t>(s.batch) * s.shape.num_kv_heads > 65535)
    return cudaErrorInvalidValue;  // grid.y holds one block row per (sequence, KV head)
  const std::int64_t vec = 16 / dtype_bytes(k_type);
  const core::kv_batch_addressing& kv = s.kv;
  if (kv.entry_stride % vec != 0 || kv.head_stride % vec != 0 ||
      (kv.paged() ? kv.page_stride % vec != 0 : kv.seq_stride % vec != 0))
    return cudaErrorInvalidValue;
  AUDIOKV_DISPATCH_DTYPE(k_type, T, {AUDIOKV_DISPATCH_HEAD_DIM(s.shape.head_dim, D, {
                           using geo = kernels::attention_geometry<T, D>;
                           lse_params<T> p;
                           p.q = s.q;
                           p.lse = s.lse;
                           p.k = static_cast<const T*>(k);
                           p.kv = kv;
                           p.scores = scores;
                           p.probs = probs;
                           p.row_stride = s.stride();
                           p.num_q_heads = s.shape.num_q_heads;
                           p.num_kv_heads = s.shape.num_kv_heads;
                           p.group_size = s.shape.group_size();
                           p.scale = s.scale;
                           p.base = s.base;
                           p.mode = s.mode;
                           const dim3 grid(
                               detail::blocks_for(s.shape.num_cells, geo::rows_per_block),
                               static_cast<unsigned>(s.batch * s.shape.num_kv_heads));
                           kernels::lse_scores_kernel<T, D><<<grid, geo::threads, 0, stream>>>(p);
                           AUDIOKV_CUDA_TRY(cudaGetLastError());
                         })})
  return cudaSuccess;
}

}  // namespace audiokv::cuda
