// SPDX-License-Identifier: Apache-2.0
/// @file
/// Host-only plumbing of cuda::eviction_step (cuda/launch/eviction_step.cuh): the byte layout of
/// its workspace and its launch grids, pure functions of the configuration (plain C++, so the
/// CPU tests check them without a device).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../types/eviction_step_config.hpp"

namespace audiokv::cuda {

/// @brief Byte offsets, from the workspace base, of every array of a device eviction step. Each
/// offset is a multiple of `alignment`; arrays do not overlap; `total` is the workspace size.
/// Arrays of rows() entries: live, next_position, evict_count, num_moves; stats holds 4 int64
/// per row (steps, evictions, cells evicted, rows moved). Arrays of rows() * capacity entries
/// (row r at r * capacity): order, new_order, position, keep_physical, move_logical,
/// move_physical, hole_of_rank, src, dst (int32); importance, in_order, scores, scratch (float);
/// evicted (uint8): 53 bytes per cell.
struct eviction_step_layout {
  /// Alignment of every array (bytes).
  static constexpr std::size_t alignment = 256;
  std::size_t live = 0;           ///< int32 [rows] live cells of each row
  std::size_t next_position = 0;  ///< int32 [rows] position of the next appended cell
  std::size_t evict_count = 0;    ///< int32 [rows] cells evicted by the last step
  std::size_t num_moves = 0;      ///< int32 [rows] row copies of the last step
  std::size_t stats = 0;          ///< int64 [rows][4] counters
  std::size_t order = 0;          ///< int32 [rows, capacity] slot of the i-th oldest cell
  std::size_t new_order = 0;      ///< int32 [rows, capacity] order after compaction
  std::size_t position = 0;       ///< int32 [rows, capacity] position of each slot's cell
  std::size_t importance = 0;     ///< float [rows, capacity] importance of each slot
  std::size_t in_order = 0;       ///< float [rows, capacity] importance in time order
  std::size_t scores = 0;         ///< float [rows, capacity] smoothed scores, time order
  std::size_t scratch = 0;        ///< float [rows, capacity] ping-pong of the pipeline
  std::size_t evicted = 0;        ///< uint8 [rows, capacity] 1 = evicted (time order)
  std::size_t keep_physical = 0;  ///< int32 [rows, capacity] 1 = the slot's row is kept
  std::size_t move_logical = 0;   ///< int32 [rows, capacity] new time index or -1
  std::size_t move_physical = 0;  ///< int32 [rows, capacity] new slot or -1
  std::size_t hole_of_rank = 0;   ///< int32 [rows, capacity] r-th hole of each row
  std::size_t src = 0;            ///< int32 [rows, capacity] hole-filling sources
  std::size_t dst = 0;            ///< int32 [rows, capacity] hole-filling destinations
  std::size_t total = 0;          ///< bytes of the whole workspace
};

/// @brief The layout of `config` (validated by the caller). Pure; never allocates or throws.
inline eviction_step_layout make_eviction_step_layout(const eviction_step_config& config) {
  constexpr std::size_t a = eviction_step_layout::alignment;
  const auto rows = static_cast<std::size_t>(config.rows());
  const std::size_t cells = rows * static_cast<std::size_t>(config.capacity);
  std::size_t used = 0;
  const auto take = [&used](std::size_t bytes) {
    const std::size_t at = used;
    used += (bytes + a - 1) / a * a;
    return at;
  };
  eviction_step_layout l;
  l.live = take(rows * sizeof(std::int32_t));
  l.next_position = take(rows * sizeof(std::int32_t));
  l.evict_count = take(rows * sizeof(std::int32_t));
  l.num_moves = take(rows * sizeof(std::int32_t));
  l.stats = take(rows * 4 * sizeof(std::int64_t));
  l.order = take(cells * sizeof(std::int32_t));
  l.new_order = take(cells * sizeof(std::int32_t));
  l.position = take(cells * sizeof(std::int32_t));
  l.importance = take(cells * sizeof(float));
  l.in_order = take(cells * sizeof(float));
  l.scores = take(cells * sizeof(float));
  l.scratch = take(cells * sizeof(float));
  l.evicted = take(cells);
  l.keep_physical = take(cells * sizeof(std::int32_t));
  l.move_logical = take(cells * sizeof(std::int32_t));
  l.move_physical = take(cells * sizeof(std::int32_t));
  l.hole_of_rank = take(cells * sizeof(std::int32_t));
  l.src = take(cells * sizeof(std::int32_t));
  l.dst = take(cells * sizeof(std::int32_t));
  l.total = used;
  return l;
}

/// @brief Launch grids of a device eviction step: every kernel's grid is fixed by the
/// configuration, so the same launch sequence replays in a CUDA graph whatever the live counts.
struct eviction_step_grid {
  /// Threads per block of the per-cell, append, copy and finishing kernels.
  static constexpr std::int32_t threads = 256;
  /// Threads per block of the block-per-row kernels: smoothing and ratio (one thread per
  /// entropy lane, core::step_entropy_lanes), selection and compaction plan.
  static constexpr std::int32_t row_threads = 1024;
  std::int32_t rows = 0;         ///< grid.y of the per-cell kernels; blocks of the row kernels
  std::int32_t cell_blocks = 0;  ///< grid.x of the per-cell kernels: ceil(capacity / threads)
  /// grid.x of the hole-filling row copies: min(ceil(capacity * 16-byte chunks / threads), 64)
  std::int32_t move_blocks = 0;
  std::int32_t finish_blocks = 0;  ///< blocks of the per-row finishing kernel
  /// Cells per tile of the stable in-place copy (its rows staged in shared memory):
  /// clamp(16384 / row_bytes, 1, 32).
  std::int32_t stable_tile = 0;
  /// Dynamic shared memory of the stable copy: stable_tile K rows and V rows.
  std::int64_t stable_shared_bytes = 0;
};

/// @brief Grids of `config` (validated by the caller). Pure; never allocates or throws.
inline eviction_step_grid make_eviction_step_grid(const eviction_step_config& config) {
  constexpr std::int64_t t = eviction_step_grid::threads;
  eviction_step_grid g;
  g.rows = config.rows();
  g.cell_blocks = static_cast<std::int32_t>((config.capacity + t - 1) / t);
  const std::int64_t chunks = (config.row_bytes() + 15) / 16;
  const std::int64_t move = (static_cast<std::int64_t>(config.capacity) * chunks + t - 1) / t;
  g.move_blocks = static_cast<std::int32_t>(move < 64 ? move : 64);
  g.finish_blocks = static_cast<std::int32_t>((g.rows + t - 1) / t);
  const std::int64_t tile = 16384 / config.row_bytes();
  g.stable_tile = static_cast<std::int32_t>(tile < 1 ? 1 : (tile > 32 ? 32 : tile));
  g.stable_shared_bytes = 2 * g.stable_tile * config.row_bytes();
  return g;
}

}  // namespace audiokv::cuda
