// SPDX-License-Identifier: Apache-2.0
// Exhaustive check of the paged compaction rule (core/paged.hpp) through its CPU driver: every
// keep mask of small sequences, page sizes 1..4, simulated on a page pool whose rows hold their
// cell id.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/cpu/paged.hpp>
#include <cstdint>
#include <numeric>
#include <set>
#include <vector>

namespace {

using audiokv::cpu::paged_compaction;
using audiokv::cpu::plan_paged_compaction;

constexpr std::int32_t kEmpty = -1;

struct batch_case {
  std::vector<std::int32_t> indices, indptr, last;
  std::vector<std::uint8_t> keep;
  std::int32_t page_size = 1;
  std::int32_t pool_pages = 0;
};

// Pool of pool_pages pages; row (page, entry) holds the global id b * 1000 + cell, or kEmpty.
std::vector<std::int32_t> make_pool(const batch_case& c) {
  std::vector<std::int32_t> pool(static_cast<std::size_t>(c.pool_pages) * c.page_size, kEmpty);
  for (std::size_t b = 0; b + 1 < c.indptr.size(); ++b) {
    const std::int32_t np = c.indptr[b + 1] - c.indptr[b];
    const std::int32_t n = audiokv::core::sequence_cells(np, c.last[b], c.page_size);
    for (std::int32_t cell = 0; cell < n; ++cell)
      pool[c.indices[c.indptr[b] + cell / c.page_size] * c.page_size + cell % c.page_size] =
          static_cast<std::int32_t>(b) * 1000 + cell;
  }
  return pool;
}

// Checks every property the rule promises; returns the number of moved rows.
std::size_t check(const batch_case& c, const std::vector<std::int32_t>& spares,
                  bool expect_ok = true) {
  const auto batch = static_cast<std::int32_t>(c.indptr.size()) - 1;
  const paged_compaction r =
      plan_paged_compaction(c.indices.data(), c.indptr.data(), c.last.data(), batch, c.page_size,
                            c.keep.data(), spares.data(), static_cast<std::int32_t>(spares.size()));
  EXPECT_EQ(r.ok, expect_ok);
  auto pool = make_pool(c);
  const auto before = pool;
  // No move writes a row that another move reads, and no row is written twice.
  std::set<std::int32_t> sources, dests;
  for (const auto& m : r.moves) {
    sources.insert(m.src_page * c.page_size + m.src_entry);
    EXPECT_TRUE(dests.insert(m.dst_page * c.page_size + m.dst_entry).second);
  }
  for (std::int32_t d : dests) EXPECT_EQ(sources.count(d), 0u) << "move hazard at row " << d;
  audiokv::cpu::apply_paged_moves(reinterpret_cast<unsigned char*>(pool.data()), c.page_size * 4, 4,
                                  0, 1, 4, r.moves);
  std::set<std::int32_t> live;
  for (std::int32_t b = 0; b < batch; ++b) {
    // The new table lists the kept cells in time order, densely.
    std::vector<std::int32_t> expected, got;
    const std::int32_t np = c.indptr[b + 1] - c.indptr[b];
    const std::int32_t n = audiokv::core::sequence_cells(np, c.last[b], c.page_size);
    for (std::int32_t cell = 0; cell < n; ++cell)
      if (!r.ok || c.keep[(c.indptr[b] + cell / c.page_size) * c.page_size + cell % c.page_size])
        expected.push_back(b * 1000 + cell);
    const std::int32_t new_np = r.new_indptr[b + 1] - r.new_indptr[b];
    const std::int32_t new_n =
        audiokv::core::sequence_cells(new_np, r.new_last_page_len[b], c.page_size);
    for (std::int32_t t = 0; t < new_n; ++t) {
      const std::int32_t page = r.new_indices[r.new_indptr[b] + t / c.page_size];
      got.push_back(pool[page * c.page_size + t % c.page_size]);
    }
    EXPECT_EQ(got, expected) << "sequence " << b;
    EXPECT_EQ(new_np,
              audiokv::core::pages_for(static_cast<std::int32_t>(expected.size()), c.page_size));
    for (std::int32_t k = r.new_indptr[b]; k < r.new_indptr[b + 1]; ++k)
      EXPECT_TRUE(live.insert(r.new_indices[k]).second) << "page listed twice";
  }
  // Freed pages are whole: old pages of the batch, not live, each listed once; old pages that
  // are not live anymore are all freed.
  std::set<std::int32_t> old_pages(c.indices.begin(), c.indices.end()), freed;
  for (std::int32_t p : r.freed_pages) {
    EXPECT_TRUE(old_pages.count(p));
    EXPECT_FALSE(live.count(p));
    EXPECT_TRUE(freed.insert(p).second);
  }
  for (std::int32_t p : old_pages) EXPECT_TRUE(live.count(p) || freed.count(p));
  // Kept bytes of aligned (reused) pages never move: rows not written keep their bytes.
  for (std::size_t row = 0; row < pool.size(); ++row)
    if (!dests.count(static_cast<std::int32_t>(row))) {
      EXPECT_EQ(pool[row], before[row]);
    }
  return r.moves.size();
}

TEST(PagedCompaction, ExhaustiveSingleSequence) {
  std::size_t cases = 0;
  for (std::int32_t P = 1; P <= 4; ++P) {
    for (std::int32_t n = 1; n <= 11; ++n) {
      const std::int32_t np = (n + P - 1) / P;
      for (std::uint32_t mask = 0; mask < (1u << n); ++mask) {
        batch_case c;
        c.page_size = P;
        c.pool_pages = 2 * np + 1;
        // Pages scattered in the pool in reverse order, so page id != list position.
        for (std::int32_t p = 0; p < np; ++p) c.indices.push_back(2 * (np - 1 - p) + 1);
        c.indptr = {0, np};
        c.last = {n - (np - 1) * P};
        c.keep.assign(static_cast<std::size_t>(np) * P, 0);
        for (std::int32_t cell = 0; cell < n; ++cell) c.keep[cell] = (mask >> cell) & 1u;
        std::vector<std::int32_t> spares;
        for (std::int32_t p = 0; p < np; ++p) spares.push_back(2 * p);  // free even pages
        const std::size_t moves = check(c, spares);
        if (P == 1) {
          EXPECT_EQ(moves, 0u) << "page_size 1 must never copy";
        }
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 4u * ((1u << 12) - 2));
}

TEST(PagedCompaction, WholePageEvictionNeverCopies) {
  for (std::int32_t P : {2, 4, 16}) {
    for (std::uint32_t pages_mask = 0; pages_mask < 64; ++pages_mask) {
      batch_case c;
      c.page_size = P;
      c.pool_pages = 6;
      c.indices = {5, 0, 3, 1, 4, 2};
      c.indptr = {0, 6};
      c.last = {P};
      c.keep.assign(6 * P, 0);
      for (std::int32_t p = 0; p < 6; ++p)
        for (std::int32_t e = 0; e < P; ++e) c.keep[p * P + e] = (pages_mask >> p) & 1u;
      EXPECT_EQ(check(c, {}), 0u);
    }
  }
}

TEST(PagedCompaction, BatchSharesSparesInOrderAndFailsWholeWhenShort) {
  batch_case c;
  c.page_size = 2;
  c.pool_pages = 10;
  c.indices = {0, 1, 2, 3, 4, 5};
  c.indptr = {0, 3, 6};
  c.last = {2, 1};
  // Sequence 0 drops cell 0: all three new pages are copy pages and no old page is fully
  // evicted (3 spares). Sequence 1 drops cells 1 and 4: two copy pages, the first written into
  // its fully evicted last page, the second into a spare.
  c.keep = {0, 1, 1, 1, 1, 1, /**/ 1, 0, 1, 1, 0, 0};
  const std::vector<std::int32_t> spares = {6, 7, 8, 9};
  check(c, spares);
  const auto r = plan_paged_compaction(c.indices.data(), c.indptr.data(), c.last.data(), 2, 2,
                                       c.keep.data(), spares.data(), 4);
  EXPECT_EQ(r.new_indices, (std::vector<std::int32_t>{6, 7, 8, 5, 9}));
  EXPECT_EQ(r.spare_pages_used, 4);
  EXPECT_EQ(r.new_last_page_len, (std::vector<std::int32_t>{1, 1}));
  EXPECT_EQ(r.freed_pages, (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
  // One spare short: nothing changes.
  check(c, {6, 7, 8}, /*expect_ok=*/false);
}

TEST(PagedCompaction, KvAddressingMatchesLayouts) {
  const std::int32_t idx[] = {7, 2, 5};
  audiokv::core::kv_addressing paged{idx, 4, 4 * 3 * 8, 3 * 8, 8};  // [pages, P, heads, dim]
  EXPECT_EQ(paged.row_offset(5, 2), 2 * 96 + 1 * 24 + 2 * 8);
  audiokv::core::kv_addressing hnd{idx, 4, 4 * 3 * 8, 8, 4 * 8};  // [pages, heads, P, dim]
  EXPECT_EQ(hnd.row_offset(9, 1), 5 * 96 + 1 * 8 + 32);
  audiokv::core::kv_addressing flat{nullptr, 1, 0, 24, 8};
  EXPECT_EQ(flat.row_offset(10, 1), 248);
}

}  // namespace
