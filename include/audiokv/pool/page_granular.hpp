// SPDX-License-Identifier: Apache-2.0
/// @file
/// Page-granular eviction for paged K/V (vLLM / SGLang / TensorRT-LLM blocks, FlashInfer
/// pages): a cell-granular plan is rewritten so that it evicts whole pages only, except for the
/// protected cells the plan itself evicts (below). Freed pages then leave the page table with
/// no row copy (rule 2 of core/paged.hpp: every surviving page stays aligned), and no spare
/// page is needed.
///
/// Cells, for a sequence whose cell i lives in page i / P (the page list in time order):
///  - *due*: protected (is_protected) and evicted by the cell-granular plan. The plan's own
///    rules licensed it: the emergency pool's overflow, oldest first, or a boundary
///    protection released because the target could not be met otherwise (counted in
///    plan.protections_released). A due cell is always evicted, so the emergency pool is held
///    at its nominal size exactly as without pages, and protections_released stays exact;
///  - *locked*: protected and kept by the plan. Never evicted;
///  - *free*: every other cell.
/// Rule (e = the plan's evicted cells, d = its due cells):
///  - candidates: every page but the last (the one appends fill) that holds a free cell and no
///    locked cell;
///  - page score: the mean or the max (page_score_rule) of plan.scores over the page's free
///    cells (0 when the plan ranked nothing, so the oldest pages go first);
///  - candidates are taken lowest (score, page index) first until the due cells and the taken
///    pages' free cells reach e (fewer when the candidates run out). Without due cells this is
///    ceil(e / P) pages, the lowest; a plan that evicts nothing is left as it is;
///  - the rewritten plan evicts exactly the due cells and the taken pages' free cells (time
///    order kept, move_to stable), and keeps only the promotions and demotions of kept cells.
///
/// With page_protection::cells (protection is per cell, not per page), the rule above runs
/// first; when it gives fewer than e cells, the pages that hold both locked and free cells
/// follow, lowest (score over their free cells, page index) first, each giving up its free
/// cells and keeping its locked ones, until e cells are evicted or no such page is left. A
/// locked cell is never evicted in either mode. Whole pages are freed with no row copy
/// whenever they cover e; a partial page (or a due cell in a page that stays) leaves its kept
/// cells to compaction (a few rows), which packs them together, so later evictions find whole
/// pages again. This keeps occupancy at the trigger level where page_protection::page cannot:
/// scattered emergency-pool cells (segment starts, critical frames) and young boundaries put a
/// locked cell in nearly every page once P >= 16.
///
/// A due cell in a page that stays leaves a hole even with page_protection::page: an engine
/// that compacts with cpu::plan_paged_compaction and no spare pages should then compact inside
/// the sequence's own pages (cpu::plan_paged_in_place) or offer spares. It happens only when
/// the plan evicts a protected cell (emergency-pool overflow, released boundary protection).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../core/compaction.hpp"
#include "../core/paged.hpp"
#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../types/eviction_plan.hpp"

namespace audiokv::pool {

/// How a page's score aggregates its cells' scores (lower is evicted first).
enum class page_score_rule : std::uint8_t {
  mean,  ///< arithmetic mean of the page's cells
  max,   ///< the page's best cell: a page goes only when all its cells are weak
};

/// What a protected cell locks (make_page_granular).
enum class page_protection : std::uint8_t {
  page,   ///< a page with a locked cell is never a candidate (whole pages, due cells aside)
  cells,  ///< only the locked cells stay; their page's other cells may go after whole pages
};

/// @brief Working memory of make_page_granular; reserve once for the cache's capacity.
struct page_eviction_workspace {
  std::vector<float> page_score;      ///< [pages]
  std::vector<std::int32_t> gain;     ///< [pages] free cells of a page (what taking it evicts)
  std::vector<std::int32_t> order;    ///< [pages] candidate pages
  std::vector<std::uint8_t> chosen;   ///< [pages] 1 = evict the page (its free cells)
  std::vector<std::int32_t> partial;  ///< [pages] pages with locked and free cells
  std::vector<std::uint8_t> state;    ///< [capacity] per cell: free, locked or due

  /// Reserves for `capacity` cells in pages of `page_size`.
  void reserve(std::int32_t capacity, std::int32_t page_size) {
    const std::int32_t cells = capacity > 0 ? capacity : 0;
    const std::int32_t pages = page_size >= 1 ? core::pages_for(cells, page_size) : 0;
    page_score.reserve(static_cast<std::size_t>(pages));
    gain.reserve(static_cast<std::size_t>(pages));
    order.reserve(static_cast<std::size_t>(pages));
    chosen.reserve(static_cast<std::size_t>(pages));
    partial.reserve(static_cast<std::size_t>(pages));
    state.reserve(static_cast<std::size_t>(cells));
  }
};

namespace detail {

/// Cell states of make_page_granular (page_eviction_workspace::state).
enum page_cell_state : std::uint8_t { cell_free = 0, cell_locked = 1, cell_due = 2 };

}  // namespace detail

/// @brief Rewrites a cell-granular plan (as made by a cache's plan()) into a page-granular one,
/// by the rule of this file.
/// @param plan          the plan; keeps its cache_id, generation and protections_released, so
///                      the cache that made it still applies it
/// @param page_size     cells per page: 1 <= P, and P < plan.n_kv_before when the plan evicts
///                      a cell (a single page is the last one, which is never evicted)
/// @param is_protected  callable(int32_t cell) -> bool (e.g. tiered_cache::is_protected): a
///                      protected cell is evicted only when the plan evicts it (a due cell)
/// @param ws            scratch; reserved for the cache's capacity it does not allocate
/// @param protection    page_protection::page: a page with a locked cell stays whole;
///                      page_protection::cells: only its locked cells stay (after the pages
///                      without one, see the file's rule)
/// @return pages taken whole, plus (page_protection::cells) pages that gave up their free
///         cells; due cells outside them are not counted
/// @throws audiokv::error naming "page_size", "plan.move_to.size()", "plan.scores.size()",
///         "plan.scores[i]" (not finite), "plan.promote[i]" or "plan.demote[i]" (not a cell);
///         the plan is then unchanged.
template <class IsProtected>
std::int32_t make_page_granular(eviction_plan& plan, std::int32_t page_size, page_score_rule rule,
                                IsProtected&& is_protected, page_eviction_workspace& ws,
                                page_protection protection = page_protection::page) {
  constexpr const char* where = "make_page_granular";
  const std::int32_t n = plan.n_kv_before;
  AUDIOKV_REQUIRE(page_size >= 1, where, "page_size", page_size, "must be >= 1");
  AUDIOKV_REQUIRE(n >= 0 && static_cast<std::int64_t>(plan.move_to.size()) == n, where,
                  "plan.move_to.size()", plan.move_to.size(),
                  ::audiokv::detail::describe("must equal plan.n_kv_before = ", n).c_str());
  AUDIOKV_REQUIRE(plan.scores.empty() || static_cast<std::int64_t>(plan.scores.size()) == n, where,
                  "plan.scores.size()", plan.scores.size(),
                  ::audiokv::detail::describe("must be 0 or plan.n_kv_before = ", n).c_str());
  for (std::size_t i = 0; i < plan.scores.size(); ++i) {
    // Page scores are sums and maxima of these: finite inputs never give NaN, so the order
    // below is a strict weak order.
    AUDIOKV_REQUIRE(std::isfinite(plan.scores[i]), where,
                    ::audiokv::detail::indexed("plan.scores", static_cast<long long>(i)),
                    plan.scores[i], "must be finite");
  }
  for (const auto* list : {&plan.promote, &plan.demote}) {
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::int32_t slot = (*list)[i];
      AUDIOKV_REQUIRE(
          slot >= 0 && slot < n, where,
          ::audiokv::detail::indexed(list == &plan.promote ? "plan.promote" : "plan.demote",
                                     static_cast<long long>(i)),
          slot, ::audiokv::detail::describe("must be a cell in [0, ", n, ")").c_str());
    }
  }
  std::int32_t evicted = 0;
  for (std::int32_t c = 0; c < n; ++c) evicted += plan.move_to[c] == core::evicted_slot ? 1 : 0;
  if (evicted == 0) return 0;
  AUDIOKV_REQUIRE(page_size < n, where, "page_size", page_size,
                  ::audiokv::detail::describe(
                      "must be < plan.n_kv_before = ", n,
                      " when the plan evicts: the last page, which appends fill, is never "
                      "evicted, so a single page frees nothing")
                      .c_str());
  // Valid from here on: 1 <= P < n, so pages >= 2 and (p + 1) * P <= (pages - 1) * P < n for
  // every candidate page p (no overflow).
  const bool by_cell = protection == page_protection::cells;
  const std::int32_t pages = core::pages_for(n, page_size);
  ws.page_score.resize(static_cast<std::size_t>(pages));
  ws.gain.resize(static_cast<std::size_t>(pages));
  ws.chosen.assign(static_cast<std::size_t>(pages), 0);
  ws.state.assign(static_cast<std::size_t>(n), detail::cell_free);
  ws.order.clear();
  ws.partial.clear();
  // Due cells first: protected cells the plan's own rules evict (emergency overflow, released
  // boundary protections). is_protected runs only on the plan's evicted cells here.
  std::int64_t freed = 0;
  for (std::int32_t c = 0; c < n; ++c) {
    if (plan.move_to[c] == core::evicted_slot && is_protected(c)) {
      ws.state[c] = detail::cell_due;
      ++freed;
    }
  }
  for (std::int32_t p = 0; p + 1 < pages; ++p) {
    // Score over the page's free cells: all P of them when none is locked or due.
    std::int32_t locked = 0, free = 0;
    float sum = 0.0f, best = 0.0f;
    for (std::int32_t c = p * page_size; c < (p + 1) * page_size; ++c) {
      if (ws.state[c] == detail::cell_due) continue;
      if (is_protected(c)) {
        ++locked;
        if (!by_cell) break;
        ws.state[c] = detail::cell_locked;
        continue;
      }
      const float s = plan.scores.empty() ? 0.0f : plan.scores[c];
      sum += s;
      best = free > 0 ? std::max(best, s) : s;
      ++free;
    }
    if (free == 0 || (locked > 0 && !by_cell)) continue;
    ws.page_score[p] = rule == page_score_rule::max ? best : sum / static_cast<float>(free);
    ws.gain[p] = free;
    (locked > 0 ? ws.partial : ws.order).push_back(p);
  }
  const auto lower = [&](std::int32_t a, std::int32_t b) {
    return ws.page_score[a] < ws.page_score[b] || (ws.page_score[a] == ws.page_score[b] && a < b);
  };
  // Whole pages (no locked cell), lowest first, then (page_protection::cells) partial pages,
  // until the due cells and the taken pages' free cells reach the plan's count.
  std::int32_t chosen_pages = 0;
  for (std::vector<std::int32_t>* list : {&ws.order, &ws.partial}) {
    if (freed >= evicted || list->empty()) continue;
    std::sort(list->begin(), list->end(), lower);
    for (const std::int32_t p : *list) {
      if (freed >= evicted) break;
      ws.chosen[p] = 1;
      ++chosen_pages;
      freed += ws.gain[p];
    }
  }
  // Rewrite the plan: evict the due cells and the chosen pages' free cells, stable move_to.
  plan.evict.clear();
  std::int32_t kept = 0;
  for (std::int32_t c = 0; c < n; ++c) {
    // A chosen page holds no locked cell with page_protection::page (its scan never broke),
    // and its locked cells are marked with page_protection::cells.
    const std::uint8_t state = ws.state[c];
    if (state == detail::cell_due || (ws.chosen[c / page_size] && state != detail::cell_locked)) {
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
  return chosen_pages;
}

}  // namespace audiokv::pool

namespace audiokv {
using pool::make_page_granular;
using pool::page_eviction_workspace;
using pool::page_protection;
using pool::page_score_rule;
}  // namespace audiokv
