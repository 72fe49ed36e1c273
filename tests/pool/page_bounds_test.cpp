// SPDX-License-Identifier: Apache-2.0
// Page arithmetic at the edges of int32: core/paged.hpp's formulas for any accepted input
// (page sizes up to INT32_MAX, cell counts up to INT32_MAX), and the entry points that take a
// page size or a page table rejecting what they cannot address, with an audiokv::error naming
// the argument and the state unchanged: make_page_granular (a page size at or above the cell
// count, INT32_MAX, non-finite scores, promotions that name no cell), cpu::plan_paged_compaction
// and cpu::plan_paged_in_place (tables beyond core::max_table_cells cells, indptr that would
// overflow the subtraction).
#include <gtest/gtest.h>

#include <audiokv/core/paged.hpp>
#include <audiokv/cpu/paged.hpp>
#include <audiokv/error.hpp>
#include <audiokv/pool/page_granular.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace audiokv;

constexpr std::int32_t kMax = std::numeric_limits<std::int32_t>::max();

/// The value unknown to the optimiser, so no formula below is folded at compile time.
std::int32_t opaque(std::int32_t v) {
  volatile std::int32_t x = v;
  return x;
}

TEST(PageBounds, CoreFormulasHoldUpToInt32Max) {
  // Every small case against the plain formulas (ceil, and the remainder of the last page).
  for (std::int32_t n = 0; n <= 200; ++n) {
    for (std::int32_t p = 1; p <= 40; ++p) {
      const std::int32_t pages = (n + p - 1) / p;
      ASSERT_EQ(core::pages_for(n, p), pages) << n << " " << p;
      ASSERT_EQ(core::last_page_len_for(n, p), n > 0 ? n - (pages - 1) * p : 0) << n << " " << p;
      for (std::int32_t k = 0; k < pages; ++k)
        ASSERT_EQ(core::page_fill(n, p, k), std::min(p, n - k * p)) << n << " " << p << " " << k;
    }
  }
  // n + page_size - 1 overflowed here: 300 cells in pages of INT32_MAX gave 0 pages.
  EXPECT_EQ(core::pages_for(opaque(300), opaque(kMax)), 1);
  EXPECT_EQ(core::pages_for(opaque(kMax), opaque(kMax)), 1);
  EXPECT_EQ(core::pages_for(opaque(kMax), opaque(kMax - 1)), 2);
  EXPECT_EQ(core::pages_for(opaque(kMax), opaque(1)), kMax);
  EXPECT_EQ(core::pages_for(opaque(kMax), opaque(2)), 1 << 30);
  EXPECT_EQ(core::pages_for(opaque(0), opaque(kMax)), 0);
  EXPECT_EQ(core::last_page_len_for(opaque(300), opaque(kMax)), 300);
  EXPECT_EQ(core::last_page_len_for(opaque(kMax), opaque(kMax)), kMax);
  EXPECT_EQ(core::last_page_len_for(opaque(kMax), opaque(kMax - 1)), 1);
  EXPECT_EQ(core::last_page_len_for(opaque(kMax), opaque(2)), 1);
  EXPECT_EQ(core::last_page_len_for(opaque(0), opaque(kMax)), 0);
  // A whole page of INT32_MAX - 1 cells: its last cell ends where the sum first + P would not.
  const std::vector<std::int32_t> src_of{0, 1, 2, 3, 4};
  EXPECT_EQ(core::aligned_source_page(src_of.data(), 5, opaque(kMax), 0), 0);
  EXPECT_EQ(core::page_fill(5, opaque(kMax), 0), 5);
}

TEST(PageBounds, TableCellsFitDecidesWithoutTheProduct) {
  EXPECT_TRUE(core::table_cells_fit(0, kMax));
  EXPECT_TRUE(core::table_cells_fit(1, 1 << 30));
  EXPECT_TRUE(core::table_cells_fit(1 << 30, 1));
  EXPECT_TRUE(core::table_cells_fit(1 << 20, 1 << 10));
  EXPECT_FALSE(core::table_cells_fit(1, kMax));
  EXPECT_FALSE(core::table_cells_fit(2, 1 << 30));
  EXPECT_FALSE(core::table_cells_fit((1 << 20) + 1, 1 << 10));
  EXPECT_FALSE(core::table_cells_fit(std::int64_t{kMax} * 4, 1));
  EXPECT_FALSE(core::table_cells_fit(-1, 1));
  EXPECT_FALSE(core::table_cells_fit(1, 0));
  EXPECT_FALSE(core::table_cells_fit(1, -5));
}

/// A cell-granular plan of n cells evicting the cells in `evict` (scores c / n).
eviction_plan plan_evicting(std::int32_t n, const std::vector<std::int32_t>& evict) {
  eviction_plan p;
  p.n_kv_before = n;
  std::int32_t kept = 0;
  for (std::int32_t c = 0; c < n; ++c) {
    bool out = false;
    for (const std::int32_t e : evict) out = out || e == c;
    p.move_to.push_back(out ? -1 : kept++);
    if (out) p.evict.push_back(c);
    p.scores.push_back(static_cast<float>(c) / static_cast<float>(n));
  }
  p.n_kv_after = kept;
  p.promote = {n - 1};
  p.generation = 7;
  p.cache_id = 9;
  return p;
}

bool same_plan(const eviction_plan& a, const eviction_plan& b) {
  return a.evict == b.evict && a.move_to == b.move_to && a.promote == b.promote &&
         a.demote == b.demote && a.n_kv_before == b.n_kv_before && a.n_kv_after == b.n_kv_after &&
         a.protections_released == b.protections_released && a.generation == b.generation &&
         a.cache_id == b.cache_id && a.scores.size() == b.scores.size();
}

/// Calls make_page_granular and returns the argument its error names ("" when it returned).
std::string rejected(eviction_plan& plan, std::int32_t page_size, page_eviction_workspace& ws) {
  try {
    make_page_granular(
        plan, page_size, page_score_rule::mean, [](std::int32_t) { return false; }, ws,
        page_protection::cells);
  } catch (const error& e) {
    return e.argument();
  }
  return "";
}

TEST(PageBounds, MakePageGranularRejectsPageSizesItCannotUse) {
  page_eviction_workspace ws;
  ws.reserve(300, 16);
  const eviction_plan base = plan_evicting(300, {3, 50, 120, 121});
  // INT32_MAX overflowed the page count (UBSan "signed integer overflow", then a segfault);
  // 300 and 1000 made one page, the last, which is never evicted: an empty plan, silently.
  for (const std::int32_t page_size : {kMax, kMax - 1, 1 << 30, 1000, 301, 300}) {
    eviction_plan plan = base;
    EXPECT_EQ(rejected(plan, page_size, ws), "page_size") << page_size;
    EXPECT_TRUE(same_plan(plan, base)) << page_size;
  }
  try {
    eviction_plan plan = base;
    make_page_granular(
        plan, kMax, page_score_rule::max, [](std::int32_t) { return false; }, ws);
    FAIL() << "accepted";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("must be < plan.n_kv_before = 300"), std::string::npos)
        << e.what();
  }
  // The largest usable page size: two pages, the first (299 cells) evicted whole.
  eviction_plan plan = base;
  EXPECT_EQ(rejected(plan, 299, ws), "");
  EXPECT_EQ(plan.n_kv_after, 1);
  EXPECT_EQ(plan.evict.size(), 299u);
  // A plan that evicts nothing is returned as it is, whatever the page size (nothing to free).
  const eviction_plan idle = plan_evicting(300, {});
  for (const std::int32_t page_size : {kMax, 300, 16}) {
    plan = idle;
    EXPECT_EQ(rejected(plan, page_size, ws), "") << page_size;
    EXPECT_TRUE(same_plan(plan, idle));
  }
  plan = base;
  EXPECT_EQ(rejected(plan, 0, ws), "page_size");
  EXPECT_EQ(rejected(plan, -7, ws), "page_size");
  EXPECT_TRUE(same_plan(plan, base));
}

TEST(PageBounds, MakePageGranularRejectsNonFiniteScoresAndForeignSlots) {
  page_eviction_workspace ws;
  ws.reserve(64, 8);
  const eviction_plan base = plan_evicting(64, {1, 2, 3});
  for (const float bad : {std::nanf(""), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
    eviction_plan plan = base;
    plan.scores[17] = bad;
    const eviction_plan before = plan;
    EXPECT_EQ(rejected(plan, 8, ws), "plan.scores[17]");
    EXPECT_TRUE(same_plan(plan, before));
  }
  eviction_plan plan = base;
  plan.promote = {5, 64};
  EXPECT_EQ(rejected(plan, 8, ws), "plan.promote[1]");
  plan = base;
  plan.demote = {-1};
  EXPECT_EQ(rejected(plan, 8, ws), "plan.demote[0]");
  EXPECT_TRUE(same_plan(plan, [&] {
    eviction_plan p = base;
    p.demote = {-1};
    return p;
  }()));
}

/// The argument named by the error of f(), or "" when it returned.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return e.argument();
  }
  return "";
}

TEST(PageBounds, PagedCompactionRejectsTablesBeyondTheCellLimit) {
  cpu::paged_compaction out;
  cpu::paged_compaction_workspace ws;
  out.new_indices = {42};  // a failed call leaves `out` as it was
  const std::vector<std::int32_t> indices{3, 4};
  const std::vector<std::uint8_t> keep(16, 1);
  const std::vector<eviction_plan> plans(1);
  const std::vector<hole_fill_plan> holes(1);
  // One page of INT32_MAX cells (5 used), two of 2^29 + 1: beyond 2^30 cells.
  struct table {
    std::vector<std::int32_t> indptr, last;
    std::int32_t page_size;
    const char* argument;
  };
  const table tables[] = {
      {{0, 1}, {5}, kMax, "indptr[1]"},
      {{0, 2}, {5}, (1 << 29) + 1, "indptr[1]"},
      {{0, 1, 2}, {3, 1}, 1 << 30, "indptr[2]"},
      // indptr[2] - indptr[1] overflowed int32 before it was checked.
      {{0, 5, std::numeric_limits<std::int32_t>::min()}, {2, 2}, 4, "indptr[2]"}};
  for (const table& t : tables) {
    const auto batch = static_cast<std::int32_t>(t.last.size());
    EXPECT_EQ(error_of([&] {
                cpu::plan_paged_compaction(indices.data(), t.indptr.data(), t.last.data(), batch,
                                           t.page_size, keep.data(), nullptr, 0, out, ws);
              }),
              t.argument)
        << t.page_size;
    EXPECT_EQ(error_of([&] {
                cpu::plan_paged_in_place(indices.data(), t.indptr.data(), t.last.data(), batch,
                                         t.page_size, span<const eviction_plan>(plans.data(), 1),
                                         out);
              }),
              t.argument)
        << t.page_size;
    EXPECT_EQ(error_of([&] {
                cpu::plan_paged_in_place(indices.data(), t.indptr.data(), t.last.data(), batch,
                                         t.page_size, span<const hole_fill_plan>(holes.data(), 1),
                                         out);
              }),
              t.argument)
        << t.page_size;
    EXPECT_EQ(out.new_indices, (std::vector<std::int32_t>{42}));
  }
  // At the limit: 2^30 cells in one page is accepted (5 used, all kept: nothing changes).
  const std::vector<std::int32_t> indptr{0, 1}, last{5};
  const cpu::paged_compaction r = cpu::plan_paged_compaction(
      indices.data(), indptr.data(), last.data(), 1, 1 << 30, keep.data(), nullptr, 0);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.new_indices, (std::vector<std::int32_t>{3}));
  EXPECT_EQ(r.new_last_page_len, (std::vector<std::int32_t>{5}));
  EXPECT_TRUE(r.moves.empty());
}

}  // namespace
