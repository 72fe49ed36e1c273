// SPDX-License-Identifier: Apache-2.0
/// @file
/// Kernels of the whole eviction step on the device (launcher: cuda/launch/eviction_step.cuh;
/// CPU reference: cpu/eviction_step.hpp). Every kernel reads the live and eviction counts from
/// device memory and returns early in a row with nothing to do, so the grids stay fixed.
/// Rows are (sequence, KV head) pairs; row r's per-cell arrays start at r * capacity.
#pragma once

#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "../../core/compaction.hpp"
#include "../../core/entropy.hpp"
#include "../../core/eviction_step.hpp"
#include "../../core/gqa.hpp"
#include "../../core/hole_filling.hpp"
#include "../../core/importance.hpp"
#include "../../core/row_copy.hpp"
#include "../../core/selection_key.hpp"
#include "../../policy/stages/cell_stage.hpp"
#include "../../policy/stages/smoothing_pipeline.hpp"
#include "../../policy/stages/stage_context.hpp"
#include "pipeline_kernel.cuh"

namespace audiokv::cuda::kernels {

// Kernels are static (internal linkage): every translation unit that includes this header
// compiles and registers its own copy, so any number of them link into one program.

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

/// Block per row: the engine's cells_per_step new rows at slots [live, live + a) get the next
/// positions, the newest older cell's importance and the next time indices; then live += a.
static __global__ void step_append_kernel(eviction_step_params p) {
  const std::int32_t r = blockIdx.x;
  const std::int64_t b = p.base(r);
  const std::int32_t live0 = p.live[r];
  const float entry = live0 > 0 ? p.importance[b + p.order[b + live0 - 1]] : 0.0f;
  for (std::int32_t t = threadIdx.x; t < p.cells_per_step; t += blockDim.x) {
    p.importance[b + live0 + t] = entry;
    p.position[b + live0 + t] = p.next_position[r] + t;
    p.order[b + live0 + t] = live0 + t;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    p.live[r] = live0 + p.cells_per_step;
    p.next_position[r] += p.cells_per_step;
  }
}

/// Thread per (slot, row): I = importance_update(I, reduce_group(probs of the row's group)).
static __global__ void step_importance_kernel(eviction_step_params p, const float* probs,
                                              std::int64_t probs_stride) {
  const std::int32_t s = blockIdx.x * blockDim.x + threadIdx.x;
  const std::int32_t r = blockIdx.y;
  if (s >= p.live[r]) return;
  const float* group = probs + static_cast<std::int64_t>(r) * p.group * probs_stride;
  float& imp = p.importance[p.base(r) + s];
  imp = core::importance_update(imp, core::reduce_group(group, p.group, probs_stride, s, p.reduce),
                                p.alpha);
}

/// Block per row (core::step_entropy_lanes threads): below the trigger k = 0; else the
/// importance in time order through the pipeline into scores, the entropy of the candidates'
/// scores in the lane order of core/eviction_step.hpp, and k.
template <class Pipeline>
static __global__ void __launch_bounds__(core::step_entropy_lanes)
    step_plan_kernel(Pipeline pipeline, eviction_step_params p) {
  static_assert(Pipeline::runs_on_device,
                "audiokv::cuda::step_plan_kernel: every stage must be a cell stage");
  const std::int32_t r = blockIdx.x;
  const std::int64_t b = p.base(r);
  const std::int32_t live = p.live[r];
  if (!core::step_triggered(live, p.trigger_cells)) {
    if (threadIdx.x == 0) p.evict_count[r] = 0;
    return;
  }
  float* in = p.in_order + b;
  for (std::int32_t i = threadIdx.x; i < live; i += blockDim.x) {
    in[i] = p.importance[b + p.order[b + i]];
  }
  __syncthreads();
  const stage_context ctx{};
  float* scores = p.scores + b;
  if constexpr (Pipeline::num_stages == 0) {
    for (std::int32_t i = threadIdx.x; i < live; i += blockDim.x) scores[i] = in[i];
    __syncthreads();
  } else {
    float* const buffers[2] = {Pipeline::num_stages % 2 == 1 ? scores : p.scratch + b,
                               Pipeline::num_stages % 2 == 1 ? p.scratch + b : scores};
    run_pipeline_stages<0>(pipeline, in, buffers, live, ctx);  // ends with __syncthreads
  }
  const std::int32_t first = core::step_first_candidate(live, p.sink_cells);
  const std::int32_t n_cand = core::step_candidates(live, p.sink_cells, p.recent_cells);
  // Lane t sums candidates t, t + lanes, ... in ascending order, then the fixed tree.
  __shared__ alignas(
      8) unsigned char lane_bytes[core::step_entropy_lanes * sizeof(core::entropy_accumulator)];
  auto* lanes = reinterpret_cast<core::entropy_accumulator*>(lane_bytes);
  core::entropy_accumulator acc;
  for (std::int32_t c = threadIdx.x; c < n_cand; c += core::step_entropy_lanes) {
    acc.add(scores[first + c]);
  }
  lanes[threadIdx.x] = acc;
  __syncthreads();
  for (std::int32_t half = core::step_entropy_lanes / 2; half >= 1; half /= 2) {
    core::step_entropy_merge_round(lanes, half, static_cast<std::int32_t>(threadIdx.x));
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float ratio =
        core::entropy_eviction_ratio(lanes[0].normalized_entropy(), p.base_rate, p.lambda);
    p.evict_count[r] = core::step_evict_count(live, n_cand, p.trigger_cells, p.target_cells, ratio);
  }
}

/// Exclusive prefix sums over a row in chunks of Threads values: next(x, carry) returns carry
/// plus the sum of x over the lower threads of this chunk, and adds the chunk's total to every
/// thread's carry. Every thread of the block must call it the same number of times.
template <int Threads>
struct row_scan {
  /// CUB's block scan of int32.
  using block_scan = cub::BlockScan<std::int32_t, Threads>;
  /// Shared storage of the scan.
  typename block_scan::TempStorage& storage;

  /// carry + exclusive prefix of x in this chunk; carry += the chunk's total.
  __device__ std::int32_t next(std::int32_t x, std::int32_t& carry) {
    std::int32_t before = 0, total = 0;
    block_scan(storage).ExclusiveSum(x, before, total);
    __syncthreads();  // the storage is reused by the next call
    const std::int32_t out = carry + before;
    carry += total;
    return out;
  }
};

/// Block per evicting row: marks the k candidates first in (score, time index) order, i.e. the
/// k lowest keys core::ordered_score_bits with ties to the older cell (core::evicts_before).
/// Radix select on the 32-bit keys, 8 bits per pass (histogram in shared memory), gives the
/// k-th key T and how many keys equal to T are taken; a block scan in time order then takes
/// the oldest of those. evicted is written for the cells [0, live); rows with k = 0 are left.
template <int Threads>
static __global__ void __launch_bounds__(Threads) step_select_kernel(eviction_step_params p) {
  const std::int32_t r = blockIdx.x;
  const std::int32_t k = p.evict_count[r];
  if (k == 0) return;
  const std::int64_t b = p.base(r);
  const std::int32_t live = p.live[r];
  const std::int32_t first = core::step_first_candidate(live, p.sink_cells);
  const std::int32_t n = core::step_candidates(live, p.sink_cells, p.recent_cells);
  const float* scores = p.scores + b + first;
  __shared__ std::int32_t histogram[256];
  __shared__ std::uint32_t shared_prefix;
  __shared__ std::int32_t shared_remaining;
  __shared__ typename row_scan<Threads>::block_scan::TempStorage storage;
  std::uint32_t prefix = 0, mask = 0;
  std::int32_t remaining = k;  // keys still to take among those matching prefix under mask
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (std::int32_t d = threadIdx.x; d < 256; d += Threads) histogram[d] = 0;
    __syncthreads();
    for (std::int32_t c = threadIdx.x; c < n; c += Threads) {
      const std::uint32_t u = core::ordered_score_bits(scores[c]);
      if ((u & mask) == prefix) atomicAdd(&histogram[(u >> shift) & 255u], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      std::int32_t rank = remaining;
      shared_prefix = prefix | (core::radix_select_digit(histogram, rank) << shift);
      shared_remaining = rank;
    }
    __syncthreads();
    prefix = shared_prefix;
    remaining = shared_remaining;
    mask |= 255u << shift;
  }
  // prefix is the k-th key; the `remaining` oldest cells with that key complete the k.
  row_scan<Threads> scan{storage};
  std::int32_t carry = 0;
  for (std::int32_t base = 0; base < n; base += Threads) {
    const std::int32_t c = base + static_cast<std::int32_t>(threadIdx.x);
    const std::uint32_t u = c < n ? core::ordered_score_bits(scores[c]) : 0u;
    const std::int32_t equal = c < n && u == prefix ? 1 : 0;
    const std::int32_t rank = scan.next(equal, carry);
    if (c < n) {
      p.evicted[b + first + c] = u < prefix || (equal != 0 && rank < remaining) ? 1 : 0;
    }
  }
  for (std::int32_t i = threadIdx.x; i < first; i += Threads) p.evicted[b + i] = 0;
  for (std::int32_t i = first + n + static_cast<std::int32_t>(threadIdx.x); i < live;
       i += Threads) {
    p.evicted[b + i] = 0;
  }
}

/// Block per evicting row: the compaction plan. Time order: move_logical[i] =
/// core::compaction_target(kept, kept cells before i). Hole-filling (physical): keep_physical
/// of each slot through order; the holes below n_after = live - k by core::hole_rank; the kept
/// slots in [n_after, live) to the hole of their core::mover_rank (src / dst, move_physical);
/// num_moves; then order[move_logical[i]] = move_physical[order[i]]. Rows with k = 0 only get
/// num_moves = 0; in stable mode the row copy kernel writes num_moves.
template <int Threads>
static __global__ void __launch_bounds__(Threads)
    step_compact_plan_kernel(eviction_step_params p, bool physical) {
  const std::int32_t r = blockIdx.x;
  const std::int32_t k = p.evict_count[r];
  if (k == 0) {
    if (threadIdx.x == 0) p.num_moves[r] = 0;
    return;
  }
  const std::int64_t b = p.base(r);
  const std::int32_t live = p.live[r];
  const std::int32_t n_after = live - k;
  __shared__ typename row_scan<Threads>::block_scan::TempStorage storage;
  row_scan<Threads> scan{storage};
  std::int32_t carry = 0;
  for (std::int32_t base = 0; base < live; base += Threads) {
    const std::int32_t i = base + static_cast<std::int32_t>(threadIdx.x);
    const std::int32_t keep = i < live && p.evicted[b + i] == 0 ? 1 : 0;
    const std::int32_t before = scan.next(keep, carry);
    if (i < live) {
      p.move_logical[b + i] = core::compaction_target(keep != 0, before);
      if (physical) p.keep_physical[b + p.order[b + i]] = keep;
    }
  }
  if (!physical) return;
  __syncthreads();  // keep_physical complete
  carry = 0;
  for (std::int32_t base = 0; base < n_after; base += Threads) {
    const std::int32_t s = base + static_cast<std::int32_t>(threadIdx.x);
    const std::int32_t kept = s < n_after ? p.keep_physical[b + s] : 0;
    const std::int32_t before = scan.next(kept, carry);
    if (s < n_after) {
      p.move_physical[b + s] = kept != 0 ? s : core::evicted_slot;
      if (kept == 0) p.hole_of_rank[b + core::hole_rank(s, before)] = s;
    }
  }
  const std::int32_t kept_before_end = carry;
  __syncthreads();  // hole_of_rank complete
  carry = kept_before_end;
  for (std::int32_t base = n_after; base < live; base += Threads) {
    const std::int32_t s = base + static_cast<std::int32_t>(threadIdx.x);
    const std::int32_t kept = s < live ? p.keep_physical[b + s] : 0;
    const std::int32_t before = scan.next(kept, carry);
    if (s < live) {
      std::int32_t to = core::evicted_slot;
      if (kept != 0) {
        const std::int32_t rank = core::mover_rank(before, kept_before_end);
        to = p.hole_of_rank[b + rank];
        p.src[b + rank] = s;
        p.dst[b + rank] = to;
      }
      p.move_physical[b + s] = to;
    }
  }
  if (threadIdx.x == 0) p.num_moves[r] = n_after - kept_before_end;
  __syncthreads();  // move_physical complete
  for (std::int32_t i = threadIdx.x; i < live; i += Threads) {
    const std::int32_t to = p.move_logical[b + i];
    if (to != core::evicted_slot) p.new_order[b + to] = p.move_physical[b + p.order[b + i]];
  }
  __syncthreads();
  for (std::int32_t i = threadIdx.x; i < n_after; i += Threads) p.order[b + i] = p.new_order[b + i];
}

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
