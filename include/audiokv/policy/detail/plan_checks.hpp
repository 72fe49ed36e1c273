// SPDX-License-Identifier: Apache-2.0
/// @file
/// Checks that a plan fits the cache state it is applied to: its cache id and generation, a
/// stable move map, the evict list and the promoted and demoted cells, with fast agreement
/// tests and messages that name the first bad field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../../core/compaction.hpp"
#include "../../detail/describe.hpp"
#include "../../error.hpp"
#include "../../types/eviction_plan.hpp"
#include "../../types/move_map.hpp"
#include "../../types/pool_split.hpp"

namespace audiokv::policy::detail {

/// True when every slot of plan.promote names a kept buffer-pool cell and every slot of
/// plan.demote a kept base-pool cell (plan.move_to has `cells` entries): validate_plan()'s
/// checks of the moves, one pass per list without a branch per slot.
inline bool moved_cells_agree(const eviction_plan& plan, const pool_tier* tier,
                              std::int32_t cells) noexcept {
  const std::int32_t* move_to = plan.move_to.data();
  const auto n = static_cast<std::uint32_t>(cells);
  if (n == 0u) return plan.promote.empty() && plan.demote.empty();
  auto agree = [&](const std::vector<std::int32_t>& slots, pool_tier from) {
    bool ok = true;
    for (const std::int32_t slot : slots) {
      const bool inside = static_cast<std::uint32_t>(slot) < n;
      const std::int32_t at = inside ? slot : 0;  // slot 0 exists when a slot is inside
      ok = ok & inside & (move_to[at] != core::evicted_slot) & (tier[at] == from);
    }
    return ok;
  };
  return agree(plan.promote, pool_tier::buffer) & agree(plan.demote, pool_tier::base);
}

/// True when plan.move_to ([cells] entries) is stable (each entry -1 or the count of kept
/// entries before it), keeps plan.n_kv_after cells, and plan.evict lists exactly its -1 slots
/// in ascending order: validate_plan()'s move-map and evict-list checks.
///
/// Walked along the evict list: it must ascend strictly inside [0, cells), each listed slot
/// must map to -1, and every slot i between the k-th and the (k+1)-th listed one (and after
/// the last) to i - k >= 0, so no other slot maps to -1. That check of a run between two
/// listed slots has no dependence from entry to entry and vectorises; evicted slots are few.
inline bool move_map_agrees(const eviction_plan& plan, std::int32_t cells) noexcept {
  const auto listed = static_cast<std::int32_t>(plan.evict.size());
  const std::int32_t* evict = plan.evict.data();
  const std::int32_t* move_to = plan.move_to.data();
  const std::int32_t n = cells;
  if (listed > n || n - listed != plan.n_kv_after) return false;
  std::int32_t from = 0;  // the first slot after the previous listed one
  for (std::int32_t k = 0; k <= listed; ++k) {
    const std::int32_t until = k < listed ? evict[k] : n;
    if (until < from || until >= n + (k < listed ? 0 : 1)) return false;
    std::int32_t wrong = 0;
    for (std::int32_t i = from; i < until; ++i) {
      wrong |= static_cast<std::int32_t>(move_to[i] != i - k);
    }
    if (wrong != 0) return false;
    if (k < listed && move_to[until] != core::evicted_slot) return false;
    from = until + 1;
  }
  return true;
}

/// Throws unless `plan` was made by the cache `id` for its state (generation `generation`,
/// `cells` cells whose tiers are tier[0, cells)) and is well formed; names the first bad field.
inline void check_plan(const char* where, const eviction_plan& plan, std::uint64_t id,
                       std::uint64_t generation, std::int32_t cells, const pool_tier* tier) {
  AUDIOKV_REQUIRE(plan.cache_id == id, where, "plan.cache_id", plan.cache_id,
                  ::audiokv::detail::describe("foreign plan: it was made by cache ", plan.cache_id,
                                              ", not by this cache (id ", id,
                                              "); a plan applies only to the cache that made it")
                      .c_str());
  AUDIOKV_REQUIRE(plan.generation == generation && plan.n_kv_before == cells, where,
                  "plan.generation", plan.generation,
                  ::audiokv::detail::describe(
                      "stale plan: it was made for generation ", plan.generation, " with ",
                      plan.n_kv_before, " cells, but this cache is at generation ", generation,
                      " with ", cells, " cells (every append and apply starts a new generation)")
                      .c_str());
  AUDIOKV_REQUIRE(static_cast<std::int32_t>(plan.move_to.size()) == cells, where,
                  "plan.move_to.size()", plan.move_to.size(),
                  ::audiokv::detail::describe("must equal num_cells() = ", cells).c_str());
  if (!move_map_agrees(plan, cells)) {
    // The checks that name the first bad entry, in this order.
    const std::int32_t kept =
        types::detail::require_stable_move_map(where, "plan.move_to", plan.move_to.data(), cells);
    AUDIOKV_REQUIRE(
        kept == plan.n_kv_after, where, "plan.n_kv_after", plan.n_kv_after,
        ::audiokv::detail::describe("must equal the number of kept cells (", kept, ")").c_str());
    // evict must list exactly the slots with move_to == -1, ascending.
    std::size_t next = 0;
    for (std::int32_t i = 0; i < cells; ++i) {
      if (plan.move_to[i] != core::evicted_slot) continue;
      AUDIOKV_REQUIRE(next < plan.evict.size() && plan.evict[next] == i, where,
                      ::audiokv::detail::indexed("plan.evict", static_cast<long long>(next)),
                      next < plan.evict.size() ? plan.evict[next] : -1,
                      "must list the evicted slots (move_to == -1) in ascending order");
      ++next;
    }
    AUDIOKV_REQUIRE(next == plan.evict.size(), where, "plan.evict.size()", plan.evict.size(),
                    ::audiokv::detail::describe(
                        "must equal the number of cells with move_to == -1 (", next, ")")
                        .c_str());
  }
  if (!moved_cells_agree(plan, tier, cells)) {
    // The checks that name the first bad slot, in this order.
    for (const std::int32_t slot : plan.promote) {
      AUDIOKV_REQUIRE(slot >= 0 && slot < cells && plan.move_to[slot] != core::evicted_slot &&
                          tier[slot] == pool_tier::buffer,
                      where, "plan.promote", slot, "must name a kept buffer-pool cell");
    }
    for (const std::int32_t slot : plan.demote) {
      AUDIOKV_REQUIRE(slot >= 0 && slot < cells && plan.move_to[slot] != core::evicted_slot &&
                          tier[slot] == pool_tier::base,
                      where, "plan.demote", slot, "must name a kept base-pool cell");
    }
  }
}

}  // namespace audiokv::policy::detail
