// SPDX-License-Identifier: Apache-2.0
/// @file
/// F9: an eviction computed as data, applied later by the engine and by the cache itself.
#pragma once

#include <cstdint>
#include <vector>

namespace audiokv {

/// @brief The plan of one eviction, in llama.cpp's defrag vocabulary.
///
/// Invariants: `move_to.size() == n_kv_before`; `move_to[i]` is the new slot of cell i, or -1
/// when cell i is evicted; kept cells keep their time order, so move_to[i] <= i and the kept
/// cells occupy [0, n_kv_after). `evict` lists the evicted slots in ascending order. Slots in
/// `promote` (buffer -> base) and `demote` (base -> buffer) are old slots of kept cells.
/// Positions are never renumbered.
struct eviction_plan {
  std::vector<std::int32_t> evict;    // [n_evicted], ascending old slots
  std::vector<std::int32_t> move_to;  // [n_kv_before]
  std::vector<std::int32_t> promote;  // old slots, buffer pool -> base pool
  std::vector<std::int32_t> demote;   // old slots, base pool -> buffer pool
  std::int32_t n_kv_before = 0;
  std::int32_t n_kv_after = 0;
  /// Eviction ratio r that was used (F7); 0 for plans with an explicit target.
  float ratio = 0.0f;
  /// Normalised entropy H / H_max of the candidates' scores.
  float normalized_entropy = 1.0f;
  /// Protected cells (phoneme-boundary neighbourhoods) the plan had to release to meet its
  /// target because every unprotected candidate was already evicted.
  std::int32_t protections_released = 0;
  /// Identifies the cache state the plan was made for; apply() rejects a stale plan.
  std::uint64_t generation = 0;

  /// Reserves every array for `capacity` cells so later plans never allocate.
  void reserve(std::int32_t capacity) {
    evict.reserve(capacity);
    move_to.reserve(capacity);
    promote.reserve(capacity);
    demote.reserve(capacity);
  }
  /// True when nothing moves and nothing is evicted.
  bool empty() const noexcept { return evict.empty() && promote.empty() && demote.empty(); }
  /// True when cell `slot` is kept in place.
  bool stays(std::int32_t slot) const noexcept { return move_to[slot] == slot; }
};

}  // namespace audiokv
