// SPDX-License-Identifier: Apache-2.0
/// @file
/// Kernel parameter structs: plain data passed by value to every kernel (trivially copyable).
#pragma once

#include <cstdint>
#include <type_traits>

#include "../core/gqa.hpp"
#include "../core/lse.hpp"
#include "../core/online_softmax.hpp"
#include "../core/paged.hpp"
#include "../types/attention_shape.hpp"

namespace audiokv::cuda {

/// The shape of one decode-attention call (one definition for the CPU and CUDA backends).
using attention_shape = ::audiokv::attention_shape;

/// @brief Parameters of the decode-attention kernels (see cuda/launch.cuh decode_attention).
template <class T>
struct attention_params {
  const float* q = nullptr;                  ///< [num_q_heads, head_dim]
  const T* k = nullptr;                      ///< rows addressed by addr (unit dim stride)
  const T* v = nullptr;                      ///< like k; nullptr: scores only
  core::kv_addressing addr{};                ///< element offsets of (cell, kv head) rows
  float* out = nullptr;                      ///< [num_q_heads, head_dim] or nullptr
  float* probs = nullptr;                    ///< [num_q_heads, row_stride]
  float* scores = nullptr;                   ///< [num_kv_heads, row_stride] or nullptr
  const std::int32_t* live_cells = nullptr;  ///< live counts (see live_stride), or nullptr
  const float* logit_bias = nullptr;         ///< [num_kv_heads, row_stride] or nullptr
  /// KV head h reads live_cells[h * live_stride]: 0 one count for all heads, 1 one per head.
  std::int32_t live_stride = 0;
  /// Floats between the rows of probs, scores and logit_bias (>= num_cells).
  std::int64_t row_stride = 0;
  core::softmax_state* partial_state = nullptr;  ///< [num_splits, num_q_heads]
  float* partial_acc = nullptr;                  ///< [num_splits, num_q_heads, head_dim]
  core::softmax_state* final_state = nullptr;    ///< [num_q_heads]
  /// Query heads.
  std::int32_t num_q_heads = 0;
  /// KV heads.
  std::int32_t num_kv_heads = 0;
  /// Query heads per KV head.
  std::int32_t group_size = 0;
  /// Cell capacity.
  std::int32_t num_cells = 0;
  /// Blocks the cells are split over (split-K).
  std::int32_t num_splits = 0;
  /// Cells per split.
  std::int32_t cells_per_split = 0;
  /// Logit scale, 1 / sqrt(head_dim).
  float scale = 0.0f;
  /// How a group's query-head probabilities reduce to one score per cell.
  gqa_reduce mode = gqa_reduce::mean;
};

/// @brief Parameters of lse_scores_kernel (see cuda/launch/lse.cuh lse_scores).
template <class T>
struct lse_params {
  const float* q = nullptr;                        ///< [batch, num_q_heads, head_dim]
  const float* lse = nullptr;                      ///< [batch, num_q_heads]
  const T* k = nullptr;                            ///< K rows addressed by kv (unit dim stride)
  core::kv_batch_addressing kv{};                  ///< sequence -> rows (device pointers)
  float* scores = nullptr;                         ///< [batch, num_kv_heads, row_stride] or nullptr
  float* probs = nullptr;                          ///< [batch, num_q_heads, row_stride] or nullptr
  std::int64_t row_stride = 0;                     ///< floats between output rows
  std::int32_t num_q_heads = 0;                    ///< query heads
  std::int32_t num_kv_heads = 0;                   ///< KV heads
  std::int32_t group_size = 0;                     ///< query heads per KV head
  float scale = 0.0f;                              ///< logit scale
  core::lse_base base{};                           ///< base of lse
  core::gqa_reduce mode = core::gqa_reduce::mean;  ///< group reduction
};

/// @brief Byte layout of a K or V tensor for row moves: row (cell, head) starts at
/// page(cell) * page_stride + entry(cell) * entry_stride + head * head_stride (bytes) and is
/// row_bytes long. Contiguous tensors use page_stride 0 and the cell index as entry.
struct row_layout {
  std::int64_t page_stride = 0;   ///< bytes
  std::int64_t entry_stride = 0;  ///< bytes
  std::int64_t head_stride = 0;   ///< bytes
  /// Bytes of one (cell, head) row.
  std::int64_t row_bytes = 0;
  /// Heads per cell.
  std::int32_t num_heads = 0;
};

static_assert(std::is_trivially_copyable_v<attention_params<float>>,
              "audiokv::cuda::attention_params must be trivially copyable to pass to a kernel.");
static_assert(std::is_trivially_copyable_v<lse_params<float>>,
              "audiokv::cuda::lse_params must be trivially copyable to pass to a kernel.");
static_assert(std::is_trivially_copyable_v<row_layout>,
              "audiokv::cuda::row_layout must be trivially copyable to pass to a kernel.");
static_assert(std::is_trivially_copyable_v<core::kv_addressing>,
              "audiokv::core::kv_addressing must be trivially copyable to pass to a kernel.");
static_assert(std::is_trivially_copyable_v<core::softmax_state>,
              "audiokv::core::softmax_state must be trivially copyable to live in a workspace.");

}  // namespace audiokv::cuda
