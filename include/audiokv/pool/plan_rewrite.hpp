// SPDX-License-Identifier: Apache-2.0
/// @file
/// The last step of every plan rewrite (pool/page_granular.hpp, pool/layer_plan.hpp): a plan
/// given a new keep-set, in the plan's own form.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../core/compaction.hpp"
#include "../types/eviction_plan.hpp"

namespace audiokv::pool::detail {

/// Rewrites `plan` (n = plan.n_kv_before cells, move_to.size() == n, promote and demote slots
/// in [0, n)) to evict exactly the cells c with evicts(c): evict ascending, stable move_to
/// (kept cells keep their time order, core/compaction.hpp), n_kv_after, and only the
/// promotions and demotions of kept cells. cache_id, generation, scores and
/// protections_released are left to the caller. Allocates nothing once plan is reserved for n.
template <class Evicts>
void rewrite_keep_set(eviction_plan& plan, Evicts&& evicts) {
  const std::int32_t n = plan.n_kv_before;
  plan.evict.clear();
  std::int32_t kept = 0;
  for (std::int32_t c = 0; c < n; ++c) {
    if (evicts(c)) {
      plan.move_to[c] = core::evicted_slot;
      plan.evict.push_back(c);
    } else {
      plan.move_to[c] = core::compaction_target(true, kept++);
    }
  }
  plan.n_kv_after = kept;
  const auto dropped = [&](std::int32_t slot) { return plan.move_to[slot] == core::evicted_slot; };
  plan.promote.erase(std::remove_if(plan.promote.begin(), plan.promote.end(), dropped),
                     plan.promote.end());
  plan.demote.erase(std::remove_if(plan.demote.begin(), plan.demote.end(), dropped),
                    plan.demote.end());
}

}  // namespace audiokv::pool::detail
