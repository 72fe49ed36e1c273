// SPDX-License-Identifier: Apache-2.0
/// @file
/// F9 on the device: keep mask -> move_to through a device-wide exclusive prefix sum
/// (core::compaction_target), and the byte-exact out-of-place row gather. Also the row mover of
/// the paged rule.
#pragma once

#include <cstdint>

#include "../../core/compaction.hpp"
#include "../params.cuh"

namespace audiokv::cuda::kernels {

// Kernels are static (internal linkage): every translation unit that includes this header
// compiles and registers its own copy, so any number of them link into one program.

/// Thread per (cell, row): counts[h * num_cells + j] = keep[h, j] ? 1 : 0.
static __global__ void keep_counts_kernel(const std::uint8_t* keep, std::int32_t num_cells,
                                          std::int32_t stride, std::int32_t* counts) {
  const std::int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= num_cells) return;
  counts[static_cast<std::int64_t>(blockIdx.y) * num_cells + j] =
      keep[static_cast<std::int64_t>(blockIdx.y) * stride + j] != 0 ? 1 : 0;
}

/// Thread per (cell, row): move_to from the exclusive prefix over all rows minus the row's
/// base; the last cell of a row writes n_kv_after.
static __global__ void move_to_kernel(const std::uint8_t* keep, const std::int32_t* prefix,
                                      std::int32_t num_cells, std::int32_t stride,
                                      std::int32_t* move_to, std::int32_t* n_kv_after) {
  const std::int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= num_cells) return;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * num_cells;
  const bool kept = keep[static_cast<std::int64_t>(blockIdx.y) * stride + j] != 0;
  const std::int32_t before = prefix[row + j] - prefix[row];
  move_to[static_cast<std::int64_t>(blockIdx.y) * stride + j] =
      core::compaction_target(kept, before);
  if (j == num_cells - 1 && n_kv_after != nullptr) n_kv_after[blockIdx.y] = before + (kept ? 1 : 0);
}

/// Grid-stride over (cell, head, Vec chunk): dst row (move_to[j], h) = src row (j, h).
/// Vec is uint4, unsigned or unsigned char; the launcher checks the alignment.
template <class Vec>
static __global__ void gather_rows_kernel(const unsigned char* src, unsigned char* dst,
                                          const row_layout layout, const std::int32_t* move_to,
                                          std::int32_t plan_rows, std::int32_t move_stride,
                                          std::int32_t num_cells) {
  const std::int64_t chunks = layout.row_bytes / static_cast<std::int64_t>(sizeof(Vec));
  const std::int64_t total = static_cast<std::int64_t>(num_cells) * layout.num_heads * chunks;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t c = i % chunks;
    const std::int64_t rh = i / chunks;
    const auto h = static_cast<std::int32_t>(rh % layout.num_heads);
    const auto j = static_cast<std::int32_t>(rh / layout.num_heads);
    const std::int32_t to =
        move_to[static_cast<std::int64_t>(plan_rows == 1 ? 0 : h) * move_stride + j];
    if (to == core::evicted_slot) continue;
    const std::int64_t col = h * layout.head_stride + c * static_cast<std::int64_t>(sizeof(Vec));
    *reinterpret_cast<Vec*>(dst + to * layout.entry_stride + col) =
        *reinterpret_cast<const Vec*>(src + j * layout.entry_stride + col);
  }
}

}  // namespace audiokv::cuda::kernels
