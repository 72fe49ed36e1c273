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
///  - each head gives cell c a duty from its own plan and protection (core/cell_duty.hpp): *due*
///    (protected in the head and evicted by its plan: the head's emergency-pool overflow,
///    oldest first, or a boundary protection it released), *locked* (protected and kept by its
///    plan) or *free* (unprotected in the head). The layer's duty is the highest over the
///    heads, free < due < locked;
///  - only a cell that some head's own plan evicted may go, so every evicted cell passed all of
///    that head's rules (pools, protection, the speech rules' floors) when it was planned;
///  - a cell locked in any head is kept: a protected cell that its head keeps is never evicted;
///  - a cell due in some head and locked in none is always evicted. The heads' emergency pools
///    hold the same cells (a cell's pool follows its frame's flags, and the heads keep the same
///    cells), so each head's plan evicts the same overflow, due in every head: every head's
///    emergency pool stays at its nominal size, as with per-head plans;
///  - evict count e = the largest count any head's plan evicted (so every head's trigger is
///    relieved). The due cells count towards it; the free candidates (evicted by some head,
///    unprotected in every head) of lowest (s(c), c) make up the rest, as far as they go. The
///    layer evicts more than e only when the heads' due cells together exceed it (heads that
///    released different boundary protections);
///  - every head's plan is rewritten to that keep-set (stable move_to, each keeping its own
///    cache_id and generation, and only the promotions and demotions of kept cells), so each
///    head's cache applies it as its own. A head's protections_released drops by its due cells
///    that the layer keeps (locked in another head: released boundary protections, since an
///    overflow cell is due in every head), so each cache's count stays that of the protections
///    it lost.
///
/// Paged K/V holding every head of a layer (vLLM and TensorRT-LLM blocks):
/// make_layer_page_granular rewrites the shared keep-set into pages (pool/page_granular.hpp)
/// with a cell protected when any head protects it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../core/cell_duty.hpp"
#include "../core/compaction.hpp"
#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../span.hpp"
#include "../types/eviction_plan.hpp"
#include "page_granular.hpp"
#include "plan_rewrite.hpp"

namespace audiokv::pool {

/// How a layer reduces its heads' cell scores to one (lower is evicted first).
enum class head_reduce : std::uint8_t {
  max,   ///< a cell goes only when every head ranks it low
  mean,  ///< arithmetic mean over the heads
};

/// @brief Working memory of share_layer_plan and make_layer_page_granular; reserve once for
/// the caches' capacity.
struct layer_plan_workspace {
  std::vector<float> score;           ///< [n] reduced score
  std::vector<std::int32_t> order;    ///< [n] free candidates: evicted by some head
  std::vector<core::cell_duty> duty;  ///< [n] the layer's duty of a cell some head evicted
  std::vector<std::uint8_t> chosen;   ///< [n] 1 = evict
  page_eviction_workspace pages;      ///< make_layer_page_granular's page scratch

  /// Reserves every buffer for `capacity` cells; make_layer_page_granular needs
  /// reserve_pages as well.
  void reserve(std::int32_t capacity) {
    const std::size_t cells = static_cast<std::size_t>(capacity > 0 ? capacity : 0);
    score.reserve(cells);
    order.reserve(cells);
    duty.reserve(cells);
    chosen.reserve(cells);
  }
  /// Reserves reserve(capacity) and the page scratch for pages of `page_size` cells.
  void reserve_pages(std::int32_t capacity, std::int32_t page_size) {
    reserve(capacity);
    pages.reserve(capacity, page_size);
  }
};

namespace detail {

/// Checks what share_layer_plan and make_layer_page_granular need of every plan: at least one,
/// the same n_kv_before, move_to of n entries, scores of 0 or n finite entries, promote and
/// demote slots in [0, n). Returns n.
inline std::int32_t validate_layer_plans(const char* where, span<eviction_plan> plans) {
  AUDIOKV_REQUIRE(!plans.empty(), where, "plans.size()", 0, "must be >= 1 (one plan per head)");
  const std::int32_t n = plans[0].n_kv_before;
  AUDIOKV_REQUIRE(n >= 0, where, "plans[0].n_kv_before", n, "must be >= 0");
  const auto heads = static_cast<std::int32_t>(plans.size());
  // Names are built only on failure (AUDIOKV_REQUIRE evaluates them then), so a valid call
  // allocates nothing.
  const auto name = [](std::int32_t h, const char* field) {
    return ::audiokv::detail::indexed("plans", h) + field;
  };
  const auto entry = [&](std::int32_t h, const char* field, std::size_t i) {
    return ::audiokv::detail::indexed(name(h, field).c_str(), static_cast<long long>(i));
  };
  for (std::int32_t h = 0; h < heads; ++h) {
    const eviction_plan& p = plans[h];
    AUDIOKV_REQUIRE(p.n_kv_before == n, where, name(h, ".n_kv_before"), p.n_kv_before,
                    ::audiokv::detail::describe("must equal plans[0].n_kv_before = ", n,
                                                " (the heads of a layer hold the same cells)")
                        .c_str());
    AUDIOKV_REQUIRE(static_cast<std::int64_t>(p.move_to.size()) == n, where,
                    name(h, ".move_to.size()"), p.move_to.size(),
                    ::audiokv::detail::describe("must equal n_kv_before = ", n).c_str());
    AUDIOKV_REQUIRE(p.scores.empty() || static_cast<std::int64_t>(p.scores.size()) == n, where,
                    name(h, ".scores.size()"), p.scores.size(),
                    ::audiokv::detail::describe("must be 0 or n_kv_before = ", n).c_str());
    for (std::size_t i = 0; i < p.scores.size(); ++i) {
      // The reduced scores are maxima and means of these: finite inputs give a strict weak
      // order.
      AUDIOKV_REQUIRE(std::isfinite(p.scores[i]), where, entry(h, ".scores", i), p.scores[i],
                      "must be finite");
    }
    for (const auto* list : {&p.promote, &p.demote}) {
      for (std::size_t i = 0; i < list->size(); ++i) {
        const std::int32_t slot = (*list)[i];
        AUDIOKV_REQUIRE(slot >= 0 && slot < n, where,
                        entry(h, list == &p.promote ? ".promote" : ".demote", i), slot,
                        ::audiokv::detail::describe("must be a cell in [0, ", n, ")").c_str());
      }
    }
  }
  return n;
}

/// s(c) of the file's rule: the max or mean over the heads of plans[h].scores[c] (0 for a plan
/// that ranked nothing). The mean sums in double, so finite scores give a finite mean.
inline float reduced_score(span<eviction_plan> plans, head_reduce rule, std::int32_t c) {
  double acc = 0.0;
  for (std::size_t h = 0; h < plans.size(); ++h) {
    const double s = plans[h].scores.empty() ? 0.0 : plans[h].scores[c];
    acc = rule == head_reduce::max ? (h == 0 ? s : std::max(acc, s)) : acc + s;
  }
  return static_cast<float>(rule == head_reduce::max ? acc
                                                     : acc / static_cast<double>(plans.size()));
}

}  // namespace detail

/// @brief Rewrites the plans of one layer's heads (by the rule of this file) into one shared
/// keep-set.
/// @param plans         one plan per KV head, each made by its head's cache for the same cells
/// @param rule          head_reduce::max or ::mean
/// @param is_protected  callable(int32_t head, int32_t cell) -> bool, e.g.
///                      `caches[h].is_protected(c)`
/// @param ws            scratch; reserved for the capacity it does not allocate
/// @return cells evicted in every head
/// @throws audiokv::error naming "plans.size()", "plans[h].n_kv_before",
///         "plans[h].move_to.size()", "plans[h].scores.size()", "plans[h].scores[i]" (not
///         finite), "plans[h].promote[i]" or "plans[h].demote[i]" (not a cell); no plan changes
///         then.
template <class IsProtected>
std::int32_t share_layer_plan(span<eviction_plan> plans, head_reduce rule,
                              IsProtected&& is_protected, layer_plan_workspace& ws) {
  const std::int32_t n = detail::validate_layer_plans("share_layer_plan", plans);
  const auto heads = static_cast<std::int32_t>(plans.size());
  std::int32_t want = 0;
  for (std::int32_t h = 0; h < heads; ++h) {
    std::int32_t evicted = 0;
    for (std::int32_t c = 0; c < n; ++c)
      evicted += plans[h].move_to[c] == core::evicted_slot ? 1 : 0;
    want = std::max(want, evicted);
  }
  if (want == 0) return 0;
  ws.score.resize(static_cast<std::size_t>(n));
  ws.duty.resize(static_cast<std::size_t>(n));
  ws.chosen.assign(static_cast<std::size_t>(n), 0);
  ws.order.clear();
  // The layer's duty of every cell some head evicted: due cells are chosen now, free ones
  // become candidates, locked ones stay. is_protected runs only on those cells.
  std::int32_t due = 0;
  for (std::int32_t c = 0; c < n; ++c) {
    bool evicted_by_some = false;
    for (std::int32_t h = 0; h < heads && !evicted_by_some; ++h)
      evicted_by_some = plans[h].move_to[c] == core::evicted_slot;
    if (!evicted_by_some) continue;
    core::cell_duty duty = core::cell_duty::free;
    for (std::int32_t h = 0; h < heads && duty != core::cell_duty::locked; ++h) {
      duty = core::merge_duty(
          duty, core::duty_of(is_protected(h, c), plans[h].move_to[c] == core::evicted_slot));
    }
    ws.duty[c] = duty;
    if (duty == core::cell_duty::due) {
      ws.chosen[c] = 1;
      ++due;
    } else if (duty == core::cell_duty::free) {
      ws.score[c] = detail::reduced_score(plans, rule, c);
      ws.order.push_back(c);
    }
  }
  const std::int32_t take =
      std::min(std::max(want - due, 0), static_cast<std::int32_t>(ws.order.size()));
  const auto lower = [&](std::int32_t a, std::int32_t b) {
    return ws.score[a] < ws.score[b] || (ws.score[a] == ws.score[b] && a < b);
  };
  if (take < static_cast<std::int32_t>(ws.order.size()))
    std::nth_element(ws.order.begin(), ws.order.begin() + take, ws.order.end(), lower);
  for (std::int32_t r = 0; r < take; ++r) ws.chosen[ws.order[r]] = 1;
  for (std::int32_t h = 0; h < heads; ++h) {
    eviction_plan& p = plans[h];
    // Its due cells that the layer keeps (locked in another head) are released protections
    // it no longer releases.
    std::int32_t kept_due = 0;
    for (std::int32_t c = 0; c < n; ++c) {
      kept_due += p.move_to[c] == core::evicted_slot && ws.chosen[c] == 0 &&
                          ws.duty[c] == core::cell_duty::locked && is_protected(h, c)
                      ? 1
                      : 0;
    }
    p.protections_released = std::max(p.protections_released - kept_due, 0);
    detail::rewrite_keep_set(p, [&](std::int32_t c) { return ws.chosen[c] != 0; });
  }
  return due + take;
}

/// @brief Page-granular eviction of a layer's shared keep-set, for paged K/V whose blocks hold
/// every head of a layer (vLLM, TensorRT-LLM): after share_layer_plan, rewrites plans[0] by
/// make_page_granular's rule (pool/page_granular.hpp) with page scores from the heads' scores
/// reduced by `reduce` (s(c) of this file's rule) and a cell protected when any head protects
/// it, then gives every plan that keep-set. So a cell locked in any head is never evicted, the
/// shared plan's due cells (protected in some head, locked in none) are always evicted, and
/// every head frees the same pages. Each plan keeps its cache_id, generation and
/// protections_released (the rewrite adds no protected cell and drops no due one).
/// @param plans         the heads' plans, one keep-set (as share_layer_plan leaves them)
/// @param reduce        head_reduce of the page scores' cell scores
/// @param page_size     cells per page (make_page_granular's bounds)
/// @param rule          page_score_rule::mean or ::max
/// @param is_protected  callable(int32_t head, int32_t cell) -> bool, as for share_layer_plan
/// @param ws            scratch; reserve_pages(capacity, page_size) once, then it does not
///                      allocate
/// @param protection    page_protection::page or ::cells, as for make_page_granular
/// @return make_page_granular's count of pages
/// @throws audiokv::error naming what share_layer_plan names, "plans[h].move_to" (a keep-set
///         other than plans[0]'s) or what make_page_granular names; no plan changes then.
template <class IsProtected>
std::int32_t make_layer_page_granular(span<eviction_plan> plans, head_reduce reduce,
                                      std::int32_t page_size, page_score_rule rule,
                                      IsProtected&& is_protected, layer_plan_workspace& ws,
                                      page_protection protection = page_protection::page) {
  constexpr const char* where = "make_layer_page_granular";
  const std::int32_t n = detail::validate_layer_plans(where, plans);
  const auto heads = static_cast<std::int32_t>(plans.size());
  for (std::int32_t h = 1; h < heads; ++h) {
    for (std::int32_t c = 0; c < n; ++c) {
      const bool same = (plans[h].move_to[c] == core::evicted_slot) ==
                        (plans[0].move_to[c] == core::evicted_slot);
      AUDIOKV_REQUIRE(
          same, where,
          ::audiokv::detail::indexed((::audiokv::detail::indexed("plans", h) + ".move_to").c_str(),
                                     c),
          plans[h].move_to[c],
          "must evict the cells plans[0] evicts (one keep-set: share_layer_plan first)");
    }
  }
  ws.score.resize(static_cast<std::size_t>(n));
  for (std::int32_t c = 0; c < n; ++c) ws.score[c] = detail::reduced_score(plans, reduce, c);
  const auto any_head = [&](std::int32_t c) {
    for (std::int32_t h = 0; h < heads; ++h)
      if (is_protected(h, c)) return true;
    return false;
  };
  const std::int32_t pages = detail::page_granular(plans[0], span<const float>(ws.score), page_size,
                                                   rule, any_head, ws.pages, protection);
  const eviction_plan& shared = plans[0];
  for (std::int32_t h = 1; h < heads; ++h) {
    detail::rewrite_keep_set(
        plans[h], [&](std::int32_t c) { return shared.move_to[c] == core::evicted_slot; });
  }
  return pages;
}

}  // namespace audiokv::pool

namespace audiokv {
using pool::head_reduce;
using pool::layer_plan_workspace;
using pool::make_layer_page_granular;
using pool::share_layer_plan;
}  // namespace audiokv
