// SPDX-License-Identifier: Apache-2.0
/// @file
/// The eviction step's kernels after the plan: move the K/V rows (hole filling or stable
/// compaction in place) and finish the row's counts and statistics (CPU reference:
/// cpu/eviction_step.hpp). Rows with k = 0 return early.
#pragma once

#include <cstdint>

#include "../../core/compaction.hpp"
#include "../../core/row_copy.hpp"
#include "eviction_step_params.cuh"

namespace audiokv::cuda::kernels {

// Kernels are static (internal linkage): every translation unit that includes this header
// compiles and registers its own copy, so any number of them link into one program.

/// Grid (move blocks, rows), grid-stride over the moves m < num_moves[r], core::row_copy_lanes
/// threads per move: row (dst[m]) = row (src[m]) of K and V in place by core::copy_row in words
/// of `width` bytes, and lane 0 copies the slot's importance and position. No source is a
/// destination, so the copies are independent.
static __global__ void step_hole_fill_rows_kernel(eviction_step_params p, unsigned char* k,
                                                  unsigned char* v, int width) {
  const std::int32_t r = blockIdx.y;
  if (p.evict_count[r] == 0) return;
  const std::int64_t b = p.base(r);
  const std::int64_t lanes = core::row_copy_lanes(p.row_bytes / width);
  const core::row_lane_assignment a =
      core::assign_row_lanes(static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                             static_cast<std::int64_t>(gridDim.x) * blockDim.x, lanes);
  const std::int64_t moves = p.num_moves[r];
  for (std::int64_t m = a.first; m < moves; m += a.step) {
    const std::int32_t from = p.src[b + m];
    const std::int32_t to = p.dst[b + m];
    if (k != nullptr) {
      core::copy_row(k + (b + to) * p.row_bytes, k + (b + from) * p.row_bytes, p.row_bytes, width,
                     a.lane, lanes);
    }
    if (v != nullptr) {
      core::copy_row(v + (b + to) * p.row_bytes, v + (b + from) * p.row_bytes, p.row_bytes, width,
                     a.lane, lanes);
    }
    if (a.lane == 0) {
      p.importance[b + to] = p.importance[b + from];
      p.position[b + to] = p.position[b + from];
    }
  }
}

/// Block per row, stable compaction in place: tiles of `tile` cells in time order (= slot
/// order) are staged in shared memory, then written to move_logical, core::row_copy_lanes
/// threads per row by core::copy_row in words of `width` bytes. A tile's targets are <= its
/// last cell, below every later tile, and every read of the tile precedes its writes, so no
/// row is overwritten before it is read. Writes the row's copy count to num_moves.
static __global__ void step_stable_rows_kernel(eviction_step_params p, unsigned char* k,
                                               unsigned char* v, std::int32_t tile, int width) {
  extern __shared__ core::row_word16 stable_shared[];
  const std::int32_t r = blockIdx.x;
  const std::int32_t n_evict = p.evict_count[r];
  if (n_evict == 0) {
    if (threadIdx.x == 0) p.num_moves[r] = 0;
    return;
  }
  __shared__ float tile_importance[32];
  __shared__ std::int32_t tile_position[32];
  __shared__ std::int32_t moved;
  if (threadIdx.x == 0) moved = 0;
  const std::int64_t b = p.base(r);
  const std::int32_t live = p.live[r];
  const std::int64_t rb = p.row_bytes;
  unsigned char* stage_k = reinterpret_cast<unsigned char*>(stable_shared);
  unsigned char* stage_v = stage_k + tile * rb;
  const std::int64_t lanes = core::row_copy_lanes(rb / width);
  const core::row_lane_assignment a = core::assign_row_lanes(threadIdx.x, blockDim.x, lanes);
  __syncthreads();
  for (std::int32_t t0 = 0; t0 < live; t0 += tile) {
    const std::int32_t n = live - t0 < tile ? live - t0 : tile;
    for (std::int64_t c = a.first; c < n; c += a.step) {
      const std::int32_t i = t0 + static_cast<std::int32_t>(c);
      const std::int32_t to = p.move_logical[b + i];
      if (to == core::evicted_slot || to == i) continue;
      if (k != nullptr)
        core::copy_row(stage_k + c * rb, k + (b + i) * rb, rb, width, a.lane, lanes);
      if (v != nullptr)
        core::copy_row(stage_v + c * rb, v + (b + i) * rb, rb, width, a.lane, lanes);
      if (a.lane == 0) {
        tile_importance[c] = p.importance[b + i];
        tile_position[c] = p.position[b + i];
      }
    }
    __syncthreads();
    for (std::int64_t c = a.first; c < n; c += a.step) {
      const std::int32_t i = t0 + static_cast<std::int32_t>(c);
      const std::int32_t to = p.move_logical[b + i];
      if (to == core::evicted_slot || to == i) continue;
      if (k != nullptr)
        core::copy_row(k + (b + to) * rb, stage_k + c * rb, rb, width, a.lane, lanes);
      if (v != nullptr)
        core::copy_row(v + (b + to) * rb, stage_v + c * rb, rb, width, a.lane, lanes);
      if (a.lane == 0) {
        p.importance[b + to] = tile_importance[c];
        p.position[b + to] = tile_position[c];
        atomicAdd(&moved, 1);
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) p.num_moves[r] = moved;
}

/// Thread per row: live -= k and the counters.
static __global__ void step_finish_kernel(eviction_step_params p) {
  const std::int32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= p.rows) return;
  const std::int32_t k = p.evict_count[r];
  long long* s = p.stats + 4 * static_cast<std::int64_t>(r);
  s[0] += 1;
  if (k == 0) return;
  p.live[r] -= k;
  s[1] += 1;
  s[2] += k;
  s[3] += p.num_moves[r];
}

}  // namespace audiokv::cuda::kernels
