// SPDX-License-Identifier: Apache-2.0
/// @file
/// Compaction: an eviction computed as data, applied later by the engine and by the cache itself.
#pragma once

#include <cstdint>
#include <vector>

#include "pool_split.hpp"

namespace audiokv::types {

namespace detail {

/// @brief Working memory of the plan builders. It lives in the plan, not in the policy, so a
/// const planning call writes nothing in the cache: several threads may plan on one cache at
/// once, each into its own plan, while others read it.
///
/// Not part of a plan's value: a copy starts empty and an assignment keeps the target's own
/// buffers (so copying a plan into a reserved one still does not allocate); moves transfer.
class plan_scratch {
 public:
  plan_scratch() = default;
  plan_scratch(const plan_scratch&) noexcept {}
  plan_scratch& operator=(const plan_scratch&) noexcept { return *this; }
  plan_scratch(plan_scratch&&) noexcept = default;
  plan_scratch& operator=(plan_scratch&&) noexcept = default;
  ~plan_scratch() = default;

  /// Reserves every buffer for `capacity` cells.
  void reserve(std::int32_t capacity) {
    mask.reserve(capacity);
    protection.reserve(capacity);
    tier_after.reserve(capacity);
    smoothed.reserve(capacity);
    pipeline.reserve(capacity);
    order.reserve(capacity);
    order_b.reserve(capacity);
    boundary_pos.reserve(capacity);
    key_bits.reserve(capacity);
  }

  /// Grows `v` to at least n elements (never shrinks, so a reserved buffer reaches its working
  /// size once and later plans neither allocate nor re-initialise it).
  template <class T>
  static T* at_least(std::vector<T>& v, std::int32_t n) {
    if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
    return v.data();
  }

  std::vector<std::uint8_t> mask;          // [n] 1 = evict
  std::vector<std::uint8_t> protection;    // [n] protection level of each cell
  std::vector<pool_tier> tier_after;       // [n] tiers once the plan applies
  std::vector<float> smoothed;             // [n] smoothing pipeline output
  std::vector<float> pipeline;             // [n] pipeline ping-pong buffer
  std::vector<std::int32_t> order;         // [n] candidate indices
  std::vector<std::int32_t> order_b;       // [n] second index list
  std::vector<std::int32_t> boundary_pos;  // [n] positions of active boundaries
  std::vector<std::uint32_t> key_bits;     // [n] ordered score bits of the radix select
};

}  // namespace detail

/// @brief The plan of one eviction, in llama.cpp's defrag vocabulary.
///
/// Invariants: `move_to.size() == n_kv_before`; `move_to[i]` is the new slot of cell i, or -1
/// when cell i is evicted; kept cells keep their time order, so move_to[i] <= i and the kept
/// cells occupy [0, n_kv_after). `evict` lists the evicted slots in ascending order. Slots in
/// `promote` (buffer -> base) and `demote` (base -> buffer) are old slots of kept cells.
/// Positions are never renumbered. A plan is valid only for the cache that made it
/// (`cache_id`) in the state it was made for (`generation`).
struct eviction_plan {
  std::vector<std::int32_t> evict;    ///< [n_evicted], ascending old slots
  std::vector<std::int32_t> move_to;  ///< [n_kv_before]
  std::vector<std::int32_t> promote;  ///< old slots, buffer pool -> base pool
  std::vector<std::int32_t> demote;   ///< old slots, base pool -> buffer pool
  /// [n_kv_before] the final score of each cell that ranked it (tiered_cache: after smoothing,
  /// voice weight and prior; lower goes first), or empty when the plan ranked nothing (an
  /// empty plan, or a baseline policy).
  std::vector<float> scores;
  /// Cells before the eviction (the cache's num_cells() when planned).
  std::int32_t n_kv_before = 0;
  /// Cells kept: the new num_cells(); kept cells occupy slots [0, n_kv_after).
  std::int32_t n_kv_after = 0;
  /// Eviction ratio r that was used; 0 for plans with an explicit target.
  float ratio = 0.0f;
  /// Normalised entropy H / H_max of the candidates' scores.
  float normalized_entropy = 1.0f;
  /// Protected cells (phoneme-boundary neighbourhoods) the plan had to release to meet its
  /// target because every unprotected candidate was already evicted.
  std::int32_t protections_released = 0;
  /// Identifies the cache state the plan was made for; apply() rejects a stale plan.
  std::uint64_t generation = 0;
  /// id() of the cache that made the plan (0: none); apply() rejects another cache's plan.
  std::uint64_t cache_id = 0;
  /// Working memory of the planning call (see detail::plan_scratch); not part of the value.
  detail::plan_scratch scratch;

  /// Reserves every array, the planning scratch included, for `capacity` cells, so later
  /// plans of a cache with at most that capacity never allocate.
  void reserve(std::int32_t capacity) {
    evict.reserve(capacity);
    move_to.reserve(capacity);
    promote.reserve(capacity);
    demote.reserve(capacity);
    scores.reserve(capacity);
    scratch.reserve(capacity);
  }
  /// True when nothing moves and nothing is evicted.
  bool empty() const noexcept { return evict.empty() && promote.empty() && demote.empty(); }
  /// True when cell `slot` is kept in place.
  bool stays(std::int32_t slot) const noexcept { return move_to[slot] == slot; }
};

}  // namespace audiokv::types

namespace audiokv {
using types::eviction_plan;
}  // namespace audiokv
