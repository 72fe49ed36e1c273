// SPDX-License-Identifier: Apache-2.0
/// @file
/// A plan's stable move map: built from an evict mask (with the evict list, sizes and stamps),
/// and applied to a policy's own per-cell arrays.
#pragma once

#include <cstdint>
#include <vector>

#include "../../core/compaction.hpp"
#include "../../types/eviction_plan.hpp"

namespace audiokv::policy::detail {

/// Compacts one per-cell array by a plan's move map (kept entries keep their order).
/// @pre the map is stable (validate_plan): a kept entry's target is the count of kept entries
/// before it, so each entry is copied to that count without a branch (an evicted one is
/// overwritten by the next kept entry, or lands past the kept cells). The count, the map and
/// the data are locals: a store through a byte-typed array could alias them.
template <class T>
void compact_array(std::vector<T>& values, const eviction_plan& plan) {
  T* data = values.data();
  const std::int32_t* move_to = plan.move_to.data();
  const std::int32_t n = plan.n_kv_before;
  std::int32_t kept = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    data[kept] = data[i];
    kept += move_to[i] != core::evicted_slot ? 1 : 0;
  }
}

/// The evict mask in `out`'s scratch, [size] cleared to 0.
inline std::uint8_t* clear_evict_mask(eviction_plan& out, std::int32_t size) {
  std::uint8_t* mask = types::detail::plan_scratch::at_least(out.scratch.mask, size);
  // The count in a local: byte stores may alias the count, which would be reloaded per byte.
  const std::int32_t n = size;
  for (std::int32_t i = 0; i < n; ++i) mask[i] = 0;
  return mask;
}

/// Fills `out` (evict list, move map, sizes, generation, cache id) for a cache of `size`
/// cells at `generation` with id `cache_id`, from the evict mask in its scratch
/// (clear_evict_mask()).
inline void build_plan(eviction_plan& out, std::int32_t size, std::uint64_t generation,
                       std::uint64_t cache_id) {
  const std::uint8_t* mask = out.scratch.mask.data();
  out.promote.clear();
  out.demote.clear();
  out.move_to.resize(size);
  // Evicted slots interleave unpredictably with kept ones: each slot is written at the
  // running evicted count in scratch without a branch, and the list copied after. The kept
  // count before slot i is i minus the evicted count (one counter to advance).
  std::int32_t* evicted = types::detail::plan_scratch::at_least(out.scratch.order_b, size);
  std::int32_t* move_to = out.move_to.data();
  const std::int32_t n = size;
  std::int32_t evicted_count = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    const bool keep = mask[i] == 0;
    move_to[i] = core::compaction_target(keep, i - evicted_count);
    evicted[evicted_count] = i;
    evicted_count += static_cast<std::int32_t>(!keep);
  }
  out.evict.assign(evicted, evicted + evicted_count);
  out.n_kv_before = size;
  out.n_kv_after = size - evicted_count;
  out.generation = generation;
  out.cache_id = cache_id;
  out.protections_released = 0;
}

}  // namespace audiokv::policy::detail
