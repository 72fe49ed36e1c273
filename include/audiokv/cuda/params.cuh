// SPDX-License-Identifier: Apache-2.0
/// @file
/// Kernel parameter structs: plain data passed by value to every kernel (trivially copyable).
#pragma once

#include <cstdint>
#include <type_traits>

#include "../core/gqa.hpp"
#include "../core/online_softmax.hpp"
#include "../core/paged.hpp"

namespace audiokv::cuda {

/// @brief Shape of one decode-attention call (one layer, one sequence).
struct attention_shape {
  std::int32_t num_q_heads = 0;
  std::int32_t num_kv_heads = 0;
  std::int32_t head_dim = 0;   // 64 or 128
  std::int32_t num_cells = 0;  // capacity: fixes the grid and the probs row stride
};

/// @brief Parameters of the decode-attention kernels (see cuda/launch.cuh decode_attention).
template <class T>
struct attention_params {
  const float* q = nullptr;                      // [num_q_heads, head_dim]
  const T* k = nullptr;                          // rows addressed by addr (unit dim stride)
  const T* v = nullptr;                          // like k; nullptr: scores only
  core::kv_addressing addr{};                    // element offsets of (cell, kv head) rows
  float* out = nullptr;                          // [num_q_heads, head_dim] or nullptr
  float* probs = nullptr;                        // [num_q_heads, num_cells]
  float* scores = nullptr;                       // [num_kv_heads, num_cells] or nullptr
  const std::int32_t* live_cells = nullptr;      // [1] live count <= num_cells, or nullptr
  const float* logit_bias = nullptr;             // [num_kv_heads, num_cells] or nullptr
  core::softmax_state* partial_state = nullptr;  // [num_splits, num_q_heads]
  float* partial_acc = nullptr;                  // [num_splits, num_q_heads, head_dim]
  core::softmax_state* final_state = nullptr;    // [num_q_heads]
  std::int32_t num_q_heads = 0;
  std::int32_t num_kv_heads = 0;
  std::int32_t group_size = 0;
  std::int32_t num_cells = 0;
  std::int32_t num_splits = 0;
  std::int32_t cells_per_split = 0;
  float scale = 0.0f;
  gqa_reduce mode = gqa_reduce::mean;
};

/// @brief Byte layout of a K or V tensor for row moves: row (cell, head) starts at
/// page(cell) * page_stride + entry(cell) * entry_stride + head * head_stride (bytes) and is
/// row_bytes long. Contiguous tensors use page_stride 0 and the cell index as entry.
struct row_layout {
  std::int64_t page_stride = 0;   // bytes
  std::int64_t entry_stride = 0;  // bytes
  std::int64_t head_stride = 0;   // bytes
  std::int64_t row_bytes = 0;
  std::int32_t num_heads = 0;
};

static_assert(std::is_trivially_copyable_v<attention_params<float>>,
              "audiokv::cuda::attention_params must be trivially copyable to pass to a kernel.");
static_assert(std::is_trivially_copyable_v<row_layout>,
              "audiokv::cuda::row_layout must be trivially copyable to pass to a kernel.");
static_assert(std::is_trivially_copyable_v<core::kv_addressing>,
              "audiokv::core::kv_addressing must be trivially copyable to pass to a kernel.");
static_assert(std::is_trivially_copyable_v<core::softmax_state>,
              "audiokv::core::softmax_state must be trivially copyable to live in a workspace.");

}  // namespace audiokv::cuda
