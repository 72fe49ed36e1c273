// SPDX-License-Identifier: Apache-2.0
/// @file
/// The eviction step's selection and compaction-plan kernels: mark the k lowest-scored
/// candidates of each row (radix select and a block scan), then build the row's move map and
/// hole-filling moves (CPU reference: cpu/eviction_step.hpp). Rows with k = 0 return early.
#pragma once

#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "../../core/compaction.hpp"
#include "../../core/eviction_step.hpp"
#include "../../core/hole_filling.hpp"
#include "../../core/selection_key.hpp"
#include "eviction_step_params.cuh"

namespace audiokv::cuda::kernels {

// Kernels are static (internal linkage): every translation unit that includes this header
// compiles and registers its own copy, so any number of them link into one program.

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

}  // namespace audiokv::cuda::kernels
