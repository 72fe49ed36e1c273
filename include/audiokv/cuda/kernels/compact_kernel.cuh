// SPDX-License-Identifier: Apache-2.0
/// @file
/// Compaction on the device: keep mask -> move_to through a device-wide exclusive prefix sum
/// (core::compaction_target), and the byte-exact out-of-place row gather. Also the hole-filling
/// mode (core/hole_filling.hpp): keep mask -> move list, and the in-place row copies of that
/// list. Every row is copied by core::copy_row (core/row_copy.hpp).
#pragma once

#include <cstdint>

#include "../../core/compaction.hpp"
#include "../../core/hole_filling.hpp"
#include "../../core/row_copy.hpp"
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

/// Grid-stride over the (cell, head) rows, core::row_copy_lanes threads per row: dst row
/// (move_to[j], h) = src row (j, h) by core::copy_row in words of `width` bytes (the launch's
/// core::row_copy_width). Out of place.
static __global__ void gather_rows_kernel(const unsigned char* src, unsigned char* dst,
                                          const row_layout layout, int width,
                                          const std::int32_t* move_to, std::int32_t plan_rows,
                                          std::int32_t move_stride, std::int32_t num_cells) {
  const std::int64_t lanes = core::row_copy_lanes(layout.row_bytes / width);
  const core::row_lane_assignment a =
      core::assign_row_lanes(static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                             static_cast<std::int64_t>(gridDim.x) * blockDim.x, lanes);
  const std::int64_t rows = static_cast<std::int64_t>(num_cells) * layout.num_heads;
  for (std::int64_t rh = a.first; rh < rows; rh += a.step) {
    const auto h = static_cast<std::int32_t>(rh % layout.num_heads);
    const auto j = static_cast<std::int32_t>(rh / layout.num_heads);
    const std::int32_t to =
        move_to[static_cast<std::int64_t>(plan_rows == 1 ? 0 : h) * move_stride + j];
    if (to == core::evicted_slot) continue;
    const std::int64_t col = h * layout.head_stride;
    core::copy_row(dst + to * layout.entry_stride + col, src + j * layout.entry_stride + col,
                   layout.row_bytes, width, a.lane, lanes);
  }
}

/// Kept slots before the end, from the exclusive prefix of keep over n slots.
__device__ inline std::int32_t hole_fill_n_after(const std::uint8_t* keep,
                                                 const std::int32_t* prefix, std::int32_t n) {
  return n > 0 ? prefix[n - 1] + (keep[n - 1] != 0 ? 1 : 0) : 0;
}

/// Thread per slot: hole_of_rank[hole_rank(p)] = p for the holes p < n_after; thread 0 writes
/// the move count (= holes) to num_moves.
static __global__ void hole_fill_holes_kernel(const std::uint8_t* keep, const std::int32_t* prefix,
                                              std::int32_t n, std::int32_t* hole_of_rank,
                                              std::int32_t* num_moves, std::int32_t* n_after_out) {
  const std::int32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= n) return;
  const std::int32_t n_after = hole_fill_n_after(keep, prefix, n);
  if (p == 0) {
    const std::int32_t kept_before_end = n_after < n ? prefix[n_after] : n_after;
    *num_moves = n_after - kept_before_end;
    if (n_after_out != nullptr) *n_after_out = n_after;
  }
  if (p < n_after && keep[p] == 0) hole_of_rank[core::hole_rank(p, prefix[p])] = p;
}

/// Thread per slot: move_to[p] (p, -1 or its hole) and, for the movers, src/dst at their rank.
static __global__ void hole_fill_moves_kernel(const std::uint8_t* keep, const std::int32_t* prefix,
                                              std::int32_t n, const std::int32_t* hole_of_rank,
                                              std::int32_t* move_to, std::int32_t* src,
                                              std::int32_t* dst) {
  const std::int32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= n) return;
  const std::int32_t n_after = hole_fill_n_after(keep, prefix, n);
  if (keep[p] == 0) {
    move_to[p] = core::evicted_slot;
  } else if (p < n_after) {
    move_to[p] = p;
  } else {
    const std::int32_t r = core::mover_rank(prefix[p], prefix[n_after]);
    const std::int32_t hole = hole_of_rank[r];
    move_to[p] = hole;
    src[r] = p;
    dst[r] = hole;
  }
}

/// Grid-stride over the (move, head) rows, core::row_copy_lanes threads per row: row (dst[k], h)
/// = row (src[k], h) in place by core::copy_row in words of `width` bytes. The move count is
/// read from device memory (fixed grid). No source is a destination, so the rows are disjoint.
static __global__ void hole_fill_rows_kernel(unsigned char* kv, const row_layout layout, int width,
                                             const std::int32_t* src, const std::int32_t* dst,
                                             const std::int32_t* num_moves) {
  const std::int64_t lanes = core::row_copy_lanes(layout.row_bytes / width);
  const core::row_lane_assignment a =
      core::assign_row_lanes(static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                             static_cast<std::int64_t>(gridDim.x) * blockDim.x, lanes);
  const std::int64_t rows = static_cast<std::int64_t>(*num_moves) * layout.num_heads;
  for (std::int64_t mh = a.first; mh < rows; mh += a.step) {
    const auto h = static_cast<std::int32_t>(mh % layout.num_heads);
    const auto k = static_cast<std::int32_t>(mh / layout.num_heads);
    const std::int64_t col = h * layout.head_stride;
    core::copy_row(kv + dst[k] * layout.entry_stride + col, kv + src[k] * layout.entry_stride + col,
                   layout.row_bytes, width, a.lane, lanes);
  }
}

/// Paged form of hole_fill_rows_kernel: slot s of one sequence is entry s % page_size of page
/// pages[s / page_size] (its page list, in slot order).
static __global__ void hole_fill_paged_rows_kernel(unsigned char* pool, const row_layout layout,
                                                   int width, const std::int32_t* pages,
                                                   std::int32_t page_size, const std::int32_t* src,
                                                   const std::int32_t* dst,
                                                   const std::int32_t* num_moves) {
  const std::int64_t lanes = core::row_copy_lanes(layout.row_bytes / width);
  const core::row_lane_assignment a =
      core::assign_row_lanes(static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                             static_cast<std::int64_t>(gridDim.x) * blockDim.x, lanes);
  const std::int64_t rows = static_cast<std::int64_t>(*num_moves) * layout.num_heads;
  for (std::int64_t mh = a.first; mh < rows; mh += a.step) {
    const auto h = static_cast<std::int32_t>(mh % layout.num_heads);
    const auto k = static_cast<std::int32_t>(mh / layout.num_heads);
    const std::int64_t col = h * layout.head_stride;
    const std::int32_t s = src[k];
    const std::int32_t d = dst[k];
    const std::int64_t from = pages[s / page_size] * layout.page_stride +
                              static_cast<std::int64_t>(s % page_size) * layout.entry_stride;
    const std::int64_t to = pages[d / page_size] * layout.page_stride +
                            static_cast<std::int64_t>(d % page_size) * layout.entry_stride;
    core::copy_row(pool + to + col, pool + from + col, layout.row_bytes, width, a.lane, lanes);
  }
}

}  // namespace audiokv::cuda::kernels
