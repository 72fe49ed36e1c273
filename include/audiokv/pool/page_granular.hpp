// SPDX-License-Identifier: Apache-2.0
/// @file
/// Page-granular eviction for paged K/V (vLLM / SGLang / TensorRT-LLM blocks, FlashInfer
/// pages): a cell-granular plan is rewritten so that it evicts whole pages only. Freed pages
/// then leave the page table with no row copy (rule 2 of core/paged.hpp: every surviving page
/// stays aligned), and no spare page is needed.
///
/// Rule, for a sequence whose cell i lives in page i / P (the page list in time order):
///  - candidates: every page but the last (the one appends fill) that holds no protected cell;
///  - page score: the mean or the max (page_score_rule) of plan.scores over its P cells (0 when
///    the plan ranked nothing, so the oldest pages go first);
///  - the plan's evicted cell count e becomes ceil(e / P) pages, the lowest (score, page index)
///    candidates (fewer when there are fewer candidates); a plan that evicts nothing is left
///    as it is;
///  - the rewritten plan evicts exactly the cells of those pages (time order kept, move_to
///    stable), and keeps only the promotions and demotions of kept cells.
///
/// With page_protection::cells (protection is per cell, not per page), the rule above runs
/// first over the pages without a protected cell; when they give fewer than e cells, the pages
/// that hold both protected and unprotected cells follow, lowest (score over their unprotected
/// cells, page index) first, each giving up its unprotected cells and keeping its protected
/// ones, until e cells are evicted or no such page is left. A protected cell is never evicted
/// in either mode. Whole pages are freed with no row copy whenever they cover e; a partial
/// page leaves its protected cells to compaction (a few rows), which packs them together, so
/// later evictions find whole pages again. This keeps occupancy at the trigger level where
/// page_protection::page cannot: scattered emergency-pool cells (segment starts, critical
/// frames) and young boundaries put a protected cell in nearly every page once P >= 16.
#pragma once

#include <algorithm>
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
  page,   ///< a page with a protected cell is never a candidate (whole pages only)
  cells,  ///< only the protected cells stay; their page's other cells may go after whole pages
};

/// @brief Working memory of make_page_granular; reserve once for the cache's capacity.
struct page_eviction_workspace {
  std::vector<float> page_score;      ///< [pages]
  std::vector<std::int32_t> order;    ///< [pages] candidate pages
  std::vector<std::uint8_t> chosen;   ///< [pages] 1 = evict the page (its unprotected cells)
  std::vector<std::int32_t> partial;  ///< [pages] pages with protected and unprotected cells
  std::vector<std::uint8_t> locked;   ///< [capacity] 1 = protected cell (page_protection::cells)

  /// Reserves for `capacity` cells in pages of `page_size`.
  void reserve(std::int32_t capacity, std::int32_t page_size) {
    const std::int32_t pages = page_size >= 1 ? core::pages_for(capacity, page_size) : 0;
    page_score.reserve(static_cast<std::size_t>(pages));
    order.reserve(static_cast<std::size_t>(pages));
    chosen.reserve(static_cast<std::size_t>(pages));
    partial.reserve(static_cast<std::size_t>(pages));
    locked.reserve(static_cast<std::size_t>(capacity > 0 ? capacity : 0));
  }
};

/// @brief Rewrites a cell-granular plan (as made by a cache's plan()) into a page-granular one,
/// by the rule of this file.
/// @param plan          the plan; keeps its cache_id and generation, so the cache that made it
///                      still applies it
/// @param page_size     cells per page (P >= 1)
/// @param is_protected  callable(int32_t cell) -> bool (e.g. tiered_cache::is_protected): a
///                      protected cell is never evicted
/// @param ws            scratch; reserved for the cache's capacity it does not allocate
/// @param protection    page_protection::page: a page with a protected cell stays whole;
///                      page_protection::cells: only its protected cells stay (after the pages
///                      without one, see the file's rule)
/// @return pages evicted whole, plus (page_protection::cells) pages that gave up their
///         unprotected cells
/// @throws audiokv::error naming "page_size", "plan.move_to.size()" or "plan.scores.size()";
///         the plan is then unchanged.
template <class IsProtected>
std::int32_t make_page_granular(eviction_plan& plan, std::int32_t page_size, page_score_rule rule,
                                IsProtected&& is_protected, page_eviction_workspace& ws,
                                page_protection protection = page_protection::page) {
  constexpr const char* where = "make_page_granular";
  const std::int32_t n = plan.n_kv_before;
  AUDIOKV_REQUIRE(page_size >= 1, where, "page_size", page_size, "must be >= 1");
  AUDIOKV_REQUIRE(n >= 0 && static_cast<std::int32_t>(plan.move_to.size()) == n, where,
                  "plan.move_to.size()", plan.move_to.size(),
                  ::audiokv::detail::describe("must equal plan.n_kv_before = ", n).c_str());
  AUDIOKV_REQUIRE(plan.scores.empty() || static_cast<std::int32_t>(plan.scores.size()) == n, where,
                  "plan.scores.size()", plan.scores.size(),
                  ::audiokv::detail::describe("must be 0 or plan.n_kv_before = ", n).c_str());
  const auto evicted = static_cast<std::int32_t>(plan.evict.size());
  if (evicted == 0) return 0;
  const bool by_cell = protection == page_protection::cells;
  const std::int32_t pages = core::pages_for(n, page_size);
  ws.page_score.resize(static_cast<std::size_t>(pages));
  ws.chosen.assign(static_cast<std::size_t>(pages), 0);
  ws.order.clear();
  ws.partial.clear();
  if (by_cell) ws.locked.assign(static_cast<std::size_t>(n), 0);
  for (std::int32_t p = 0; p + 1 < pages; ++p) {
    // Score over the page's unprotected cells: all P of them when none is protected.
    std::int32_t locked = 0;
    float sum = 0.0f, best = 0.0f;
    bool scored = false;
    for (std::int32_t c = p * page_size; c < (p + 1) * page_size; ++c) {
      if (is_protected(c)) {
        ++locked;
        if (!by_cell) break;
        ws.locked[c] = 1;
        continue;
      }
      const float s = plan.scores.empty() ? 0.0f : plan.scores[c];
      sum += s;
      best = scored ? std::max(best, s) : s;
      scored = true;
    }
    if (locked == page_size || (locked > 0 && !by_cell)) continue;
    ws.page_score[p] =
        rule == page_score_rule::max ? best : sum / static_cast<float>(page_size - locked);
    (locked > 0 ? ws.partial : ws.order).push_back(p);
  }
  const std::int32_t want =
      std::min(core::pages_for(evicted, page_size), static_cast<std::int32_t>(ws.order.size()));
  const auto lower = [&](std::int32_t a, std::int32_t b) {
    return ws.page_score[a] < ws.page_score[b] || (ws.page_score[a] == ws.page_score[b] && a < b);
  };
  if (want < static_cast<std::int32_t>(ws.order.size()))
    std::nth_element(ws.order.begin(), ws.order.begin() + want, ws.order.end(), lower);
  for (std::int32_t r = 0; r < want; ++r) ws.chosen[ws.order[r]] = 1;
  std::int32_t chosen_pages = want;
  // page_protection::cells: partial pages make up what whole pages could not give.
  std::int64_t freed = static_cast<std::int64_t>(want) * page_size;
  if (freed < evicted && !ws.partial.empty()) {
    std::sort(ws.partial.begin(), ws.partial.end(), lower);
    for (const std::int32_t p : ws.partial) {
      if (freed >= evicted) break;
      ws.chosen[p] = 1;
      ++chosen_pages;
      for (std::int32_t c = p * page_size; c < (p + 1) * page_size; ++c) freed += 1 - ws.locked[c];
    }
  }
  // Rewrite the plan: evict the chosen pages' unprotected cells, stable move_to.
  plan.evict.clear();
  std::int32_t kept = 0;
  for (std::int32_t c = 0; c < n; ++c) {
    if (ws.chosen[c / page_size] && !(by_cell && ws.locked[c])) {
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
  plan.protections_released = 0;
  return chosen_pages;
}

}  // namespace audiokv::pool

namespace audiokv {
using pool::make_page_granular;
using pool::page_eviction_workspace;
using pool::page_protection;
using pool::page_score_rule;
}  // namespace audiokv
