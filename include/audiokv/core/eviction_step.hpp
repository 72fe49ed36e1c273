// SPDX-License-Identifier: Apache-2.0
/// @file
/// Per-row rules of the whole eviction step (types/eviction_step_config.hpp), shared by the CPU
/// reference (cpu/eviction_step.hpp) and the device step (cuda/launch/eviction_step.cuh): the
/// trigger, the protected cells, the eviction count, and the fixed order in which a row's
/// candidate scores are summed for the entropy, so both backends add the same numbers in the
/// same order.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "entropy.hpp"
#include "math.hpp"
#include "selection.hpp"

namespace audiokv::core {

/// Lanes of the entropy sum: candidate c (0-based in time order) is added by lane
/// c % step_entropy_lanes in ascending c; the lanes are then merged by step_entropy_merge_round
/// for half = lanes / 2, lanes / 4, ..., 1. This is the order of a 1024-thread block reduction.
inline constexpr std::int32_t step_entropy_lanes = 1024;

/// True when a row holding `live` cells evicts this step: live >= trigger_cells.
AUDIOKV_HOST_DEVICE bool step_triggered(std::int32_t live, std::int32_t trigger_cells) {
  return live >= trigger_cells;
}

/// First candidate of a row in time order: the sinks before it are protected.
AUDIOKV_HOST_DEVICE std::int32_t step_first_candidate(std::int32_t live, std::int32_t sink_cells) {
  return min_of(sink_cells, live);
}

/// Candidates of a row: its live cells except the first sink_cells and the last recent_cells,
/// max(0, live - sink_cells - recent_cells). They are the cells
/// [step_first_candidate, step_first_candidate + step_candidates) in time order.
AUDIOKV_HOST_DEVICE std::int32_t step_candidates(std::int32_t live, std::int32_t sink_cells,
                                                 std::int32_t recent_cells) {
  const std::int64_t n = static_cast<std::int64_t>(live) - sink_cells - recent_cells;
  return n > 0 ? static_cast<std::int32_t>(n) : 0;
}

/// True when cell i (time order) of a row of `live` cells may be evicted: i is live and neither
/// among the first sink_cells nor among the last recent_cells.
AUDIOKV_HOST_DEVICE bool step_is_candidate(std::int32_t i, std::int32_t live,
                                           std::int32_t sink_cells, std::int32_t recent_cells) {
  const std::int32_t first = step_first_candidate(live, sink_cells);
  return i >= first && i < first + step_candidates(live, sink_cells, recent_cells);
}

/// Cells to evict from a row of `live` cells with `candidates` candidates at ratio `ratio`:
/// 0 below the trigger, else max(ratio_count(ratio, candidates), live - target_cells) capped
/// at candidates.
AUDIOKV_HOST_DEVICE std::int32_t step_evict_count(std::int32_t live, std::int32_t candidates,
                                                  std::int32_t trigger_cells,
                                                  std::int32_t target_cells, float ratio) {
  if (!step_triggered(live, trigger_cells)) return 0;
  const std::int32_t by_ratio = ratio_count(ratio, candidates);
  const std::int32_t to_target = live - target_cells;
  return min_of(max_of(by_ratio, to_target), candidates);
}

/// Merges lane b into lane a (sums and counts), the combine step of the entropy lanes.
AUDIOKV_HOST_DEVICE void step_entropy_merge(entropy_accumulator& a, const entropy_accumulator& b) {
  a.sum += b.sum;
  a.sum_s_log_s += b.sum_s_log_s;
  a.count += b.count;
}

/// One round of the lane tree: lane t < half absorbs lane t + half.
AUDIOKV_HOST_DEVICE void step_entropy_merge_round(entropy_accumulator* lanes, std::int32_t half,
                                                  std::int32_t t) {
  if (t < half) step_entropy_merge(lanes[t], lanes[t + half]);
}

/// One pass of a radix select of the k-th smallest 32-bit key, 8 bits at a time from the top:
/// `histogram` counts the 256 values of the current digit among the keys that match the digits
/// chosen so far, and `remaining` (>= 1) is the rank sought among those keys. Returns the digit
/// that holds it and lowers `remaining` by the keys of smaller digits. After the four passes
/// the chosen digits form the k-th key, and `remaining` is how many keys equal to it complete
/// the k smallest.
AUDIOKV_HOST_DEVICE std::uint32_t radix_select_digit(const std::int32_t* histogram,
                                                     std::int32_t& remaining) {
  std::int32_t below = 0;
  std::uint32_t d = 0;
  for (; d < 255u && below + histogram[d] < remaining; ++d) below += histogram[d];
  remaining -= below;
  return d;
}

}  // namespace audiokv::core
