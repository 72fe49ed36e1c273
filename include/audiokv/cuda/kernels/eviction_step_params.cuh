// SPDX-License-Identifier: Apache-2.0
/// @file
/// The device arrays and constants one eviction step's kernels share (cuda/launch/eviction_step.cuh
/// fills them). Rows are (sequence, KV head) pairs; row r's per-cell arrays start at r * capacity.
#pragma once

#include <cstdint>

#include "../../core/gqa.hpp"

namespace audiokv::cuda::kernels {

/// @brief Device arrays and constants of one eviction step (plain data, a kernel argument).
struct eviction_step_params {
  std::int32_t* live = nullptr;           ///< [rows]
  std::int32_t* next_position = nullptr;  ///< [rows]
  std::int32_t* evict_count = nullptr;    ///< [rows]
  std::int32_t* num_moves = nullptr;      ///< [rows]
  long long* stats = nullptr;             ///< [rows][4] steps, evictions, cells, rows moved
  std::int32_t* order = nullptr;          ///< [rows, capacity]
  std::int32_t* new_order = nullptr;      ///< [rows, capacity]
  std::int32_t* position = nullptr;       ///< [rows, capacity]
  float* importance = nullptr;            ///< [rows, capacity]
  float* in_order = nullptr;              ///< [rows, capacity]
  float* scores = nullptr;                ///< [rows, capacity]
  float* scratch = nullptr;               ///< [rows, capacity]
  std::uint8_t* evicted = nullptr;        ///< [rows, capacity]
  std::int32_t* keep_physical = nullptr;  ///< [rows, capacity]
  std::int32_t* move_logical = nullptr;   ///< [rows, capacity]
  std::int32_t* move_physical = nullptr;  ///< [rows, capacity]
  std::int32_t* hole_of_rank = nullptr;   ///< [rows, capacity]
  std::int32_t* src = nullptr;            ///< [rows, capacity]
  std::int32_t* dst = nullptr;            ///< [rows, capacity]
  std::int32_t rows = 0;                  ///< rows of the step
  std::int32_t capacity = 0;              ///< slots per row
  std::int32_t group = 1;                 ///< query heads per row
  std::int32_t cells_per_step = 0;        ///< cells appended per step
  std::int32_t trigger_cells = 0;         ///< live count that triggers
  std::int32_t target_cells = 0;          ///< live count an eviction gets down to
  std::int32_t sink_cells = 0;            ///< protected oldest cells
  std::int32_t recent_cells = 0;          ///< protected newest cells
  float alpha = 0.0f;                     ///< importance EMA weight
  float base_rate = 0.0f;                 ///< ratio at maximal entropy
  float lambda = 0.0f;                    ///< ratio gain
  gqa_reduce reduce = gqa_reduce::mean;   ///< group reduction
  std::int64_t row_bytes = 0;             ///< bytes of one K or V row

  /// First element of row r in the per-cell arrays.
  __device__ std::int64_t base(std::int32_t r) const {
    return static_cast<std::int64_t>(r) * capacity;
  }
};

}  // namespace audiokv::cuda::kernels
