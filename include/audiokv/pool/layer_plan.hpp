// SPDX-License-Identifier: Apache-2.0
/// @file
/// Plan granularity per layer: one keep-set for all KV heads of a layer, so that a layer's K/V
/// (one row per cell holding every head, as in vLLM's, SGLang's and TensorRT-LLM's blocks and
/// llama.cpp's cells) moves once per eviction (cpu::compact_all_heads) and a page holds the same
/// cells in every head. Per sequence is the same call over every head of every layer (one
/// keep-set for the whole sequence, so one page table serves all layers).
///
/// Rule, over the plans the heads' caches made for the same cells (same frames appended to each
/// head, so cell c is the same position in every head):
///  - cell score s(c) = max or mean over heads of plans[h].scores[c] (head_reduce); a plan that
///    ranked nothing contributes 0;
///  - protected in any head => kept (is_protected(h, c) for any h);
///  - only a cell that some head's own plan evicted may go, so every evicted cell passed all of
///    that head's rules (pools, protection, the speech rules' floors) when it was planned;
///  - evict count e = the largest count any head's plan evicted (so every head's trigger is
///    relieved), at most the number of candidates (cells evicted by some head, protected in
///    none);
///  - the e candidates of lowest (s(c), c) are evicted; every head's plan is rewritten to
///    that keep-set (stable move_to, each keeping its own cache_id and generation, and only the
///    promotions and demotions of kept cells), so each head's cache applies it as its own.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../core/compaction.hpp"
#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../span.hpp"
#include "../types/eviction_plan.hpp"

namespace audiokv::pool {

/// How a layer reduces its heads' cell scores to one (lower is evicted first).
enum class head_reduce : std::uint8_t {
  max,   ///< a cell goes only when every head ranks it low
  mean,  ///< arithmetic mean over the heads
};

/// @brief Working memory of share_layer_plan; reserve once for the caches' capacity.
struct layer_plan_workspace {
  std::vector<float> score;          ///< [n] reduced score
  std::vector<std::int32_t> order;   ///< [n] candidates: evicted by some head, protected in none
  std::vector<std::uint8_t> chosen;  ///< [n] 1 = evict

  /// Reserves every buffer for `capacity` cells.
  void reserve(std::int32_t capacity) {
    score.reserve(static_cast<std::size_t>(capacity));
    order.reserve(static_cast<std::size_t>(capacity));
    chosen.reserve(static_cast<std::size_t>(capacity));
  }
};

/// @brief Rewrites the plans of one layer's heads (by the rule of this file) into one shared
/// keep-set.
/// @param plans         one plan per KV head, each made by its head's cache for the same cells
/// @param rule          head_reduce::max or ::mean
/// @param is_protected  callable(int32_t head, int32_t cell) -> bool, e.g.
///                      `caches[h].is_protected(c)`
/// @param ws            scratch; reserved for the capacity it does not allocate
/// @return cells evicted in every head
/// @throws audiokv::error naming "plans.size()", "plans[h].n_kv_before", "plans[h].move_to.size()"
///         or "plans[h].scores.size()"; no plan changes then.
template <class IsProtected>
std::int32_t share_layer_plan(span<eviction_plan> plans, head_reduce rule,
                              IsProtected&& is_protected, layer_plan_workspace& ws) {
  constexpr const char* where = "share_layer_plan";
  AUDIOKV_REQUIRE(!plans.empty(), where, "plans.size()", 0, "must be >= 1 (one plan per head)");
  const std::int32_t n = plans[0].n_kv_before;
  const auto heads = static_cast<std::int32_t>(plans.size());
  std::int32_t want = 0;
  for (std::int32_t h = 0; h < heads; ++h) {
    const eviction_plan& p = plans[h];
    AUDIOKV_REQUIRE(p.n_kv_before == n, where,
                    ::audiokv::detail::indexed("plans", h) + ".n_kv_before", p.n_kv_before,
                    ::audiokv::detail::describe("must equal plans[0].n_kv_before = ", n,
                                                " (the heads of a layer hold the same cells)")
                        .c_str());
    AUDIOKV_REQUIRE(static_cast<std::int32_t>(p.move_to.size()) == n, where,
                    ::audiokv::detail::indexed("plans", h) + ".move_to.size()", p.move_to.size(),
                    ::audiokv::detail::describe("must equal n_kv_before = ", n).c_str());
    AUDIOKV_REQUIRE(p.scores.empty() || static_cast<std::int32_t>(p.scores.size()) == n, where,
                    ::audiokv::detail::indexed("plans", h) + ".scores.size()", p.scores.size(),
                    ::audiokv::detail::describe("must be 0 or n_kv_before = ", n).c_str());
    want = std::max(want, static_cast<std::int32_t>(p.evict.size()));
  }
  if (want == 0) return 0;
  ws.score.assign(static_cast<std::size_t>(n), 0.0f);
  ws.chosen.assign(static_cast<std::size_t>(n), 0);
  ws.order.clear();
  // chosen[c] = 1 marks the union of the heads' evict sets until the selection below.
  for (std::int32_t h = 0; h < heads; ++h)
    for (const std::int32_t c : plans[h].evict)
      if (c >= 0 && c < n) ws.chosen[c] = 1;
  for (std::int32_t c = 0; c < n; ++c) {
    if (ws.chosen[c] == 0) continue;
    ws.chosen[c] = 0;
    bool locked = false;
    float acc = 0.0f;
    for (std::int32_t h = 0; h < heads && !locked; ++h) {
      locked = is_protected(h, c);
      const float s = plans[h].scores.empty() ? 0.0f : plans[h].scores[c];
      acc = rule == head_reduce::max ? (h == 0 ? s : std::max(acc, s)) : acc + s;
    }
    if (locked) continue;
    ws.score[c] = rule == head_reduce::max ? acc : acc / static_cast<float>(heads);
    ws.order.push_back(c);
  }
  want = std::min(want, static_cast<std::int32_t>(ws.order.size()));
  const auto lower = [&](std::int32_t a, std::int32_t b) {
    return ws.score[a] < ws.score[b] || (ws.score[a] == ws.score[b] && a < b);
  };
  if (want < static_cast<std::int32_t>(ws.order.size()))
    std::nth_element(ws.order.begin(), ws.order.begin() + want, ws.order.end(), lower);
  for (std::int32_t r = 0; r < want; ++r) ws.chosen[ws.order[r]] = 1;
  const auto dropped = [&](std::int32_t slot) { return ws.chosen[slot] != 0; };
  for (std::int32_t h = 0; h < heads; ++h) {
    eviction_plan& p = plans[h];
    p.evict.clear();
    std::int32_t kept = 0;
    for (std::int32_t c = 0; c < n; ++c) {
      if (ws.chosen[c]) {
        p.move_to[c] = core::evicted_slot;
        p.evict.push_back(c);
      } else {
        p.move_to[c] = core::compaction_target(true, kept++);
      }
    }
    p.n_kv_after = kept;
    p.promote.erase(std::remove_if(p.promote.begin(), p.promote.end(), dropped), p.promote.end());
    p.demote.erase(std::remove_if(p.demote.begin(), p.demote.end(), dropped), p.demote.end());
    p.protections_released = 0;
  }
  return want;
}

}  // namespace audiokv::pool

namespace audiokv {
using pool::head_reduce;
using pool::layer_plan_workspace;
using pool::share_layer_plan;
}  // namespace audiokv
