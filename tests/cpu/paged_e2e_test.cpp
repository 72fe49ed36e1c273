// SPDX-License-Identifier: Apache-2.0
// A paged K/V cache in vLLM's and FlashInfer's page-table convention (indptr, indices,
// last_page_len over one shared page pool) driven end to end: sequences append, attend and
// evict, in three compaction modes, and every attention step is compared with a dense oracle
// that holds each sequence's kept rows in time order.
//  - table:    cell-granular keep masks through plan_paged_compaction (spares = the free list);
//  - in_place: hole-filling inside each sequence's own pages (slot_map + plan_paged_in_place),
//              no spare page ever taken;
//  - in_place_stable: time order kept inside each sequence's own pages (plan_paged_in_place
//              with the eviction plans; serial forward copies), no spare page either;
//  - pages:    page-granular keep masks through plan_paged_compaction with no spares: no row
//              moves at all.
// Also: page-granular rewriting of tiered_cache plans (protected cells are never evicted).
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <audiokv/cpu/paged.hpp>
#include <audiokv/cpu/reference.hpp>
#include <audiokv/pool/page_granular.hpp>
#include <audiokv/pool/slot_map.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;

constexpr std::int32_t P = 4;        // page size
constexpr std::int32_t H = 2;        // KV heads
constexpr std::int32_t QH = 4;       // query heads (GQA group 2)
constexpr std::int32_t D = 8;        // head_dim
constexpr std::int32_t kPages = 64;  // pages in the shared pool
constexpr std::int32_t kBatch = 3;
constexpr std::int64_t kRow = static_cast<std::int64_t>(H) * D;  // floats per cell
constexpr std::int64_t kPageStride = P * kRow;

enum class mode { table, in_place, in_place_stable, pages };

struct sequence {
  std::vector<std::int32_t> pages;  // this sequence's page list
  std::int32_t cells = 0;
  std::vector<float> dense_k, dense_v;  // oracle: kept rows in time order, kRow floats each
  slot_map map{static_cast<std::int32_t>(kPages * P)};
};

class paged_engine {
 public:
  explicit paged_engine(mode m, std::uint32_t seed) : mode_(m), rng_(seed) {
    k_pool_.assign(static_cast<std::size_t>(kPages) * kPageStride, 0.0f);
    v_pool_ = k_pool_;
    for (std::int32_t p = kPages - 1; p >= 0; --p) free_.push_back(p);
    out_.reserve(kBatch, kPages, P);
    ws_.reserve(kPages, P);
    for (auto& h : holes_) h.reserve(kPages * P);
  }

  /// Appends one token (random K and V rows) to sequence b; false when the pool is full.
  bool append(std::int32_t b) {
    sequence& s = seqs_[b];
    if (s.cells == static_cast<std::int32_t>(s.pages.size()) * P) {
      if (free_.empty()) return false;
      s.pages.push_back(free_.back());
      free_.pop_back();
    }
    const std::int32_t slot = s.cells;
    float* k = &k_pool_[s.pages[slot / P] * kPageStride + (slot % P) * kRow];
    float* v = &v_pool_[s.pages[slot / P] * kPageStride + (slot % P) * kRow];
    for (std::int64_t i = 0; i < kRow; ++i) {
      k[i] = normal_(rng_);
      v[i] = normal_(rng_);
      s.dense_k.push_back(k[i]);
      s.dense_v.push_back(v[i]);
    }
    ++s.cells;
    if (mode_ == mode::in_place) s.map.append(1);
    return true;
  }

  /// FlashInfer's CSR page table of the batch.
  void build_table() {
    indptr_.assign(1, 0);
    indices_.clear();
    last_.clear();
    for (const sequence& s : seqs_) {
      indices_.insert(indices_.end(), s.pages.begin(), s.pages.end());
      indptr_.push_back(static_cast<std::int32_t>(indices_.size()));
      last_.push_back(s.cells == 0 ? 0
                                   : s.cells - (static_cast<std::int32_t>(s.pages.size()) - 1) * P);
    }
  }

  /// One decode step for every sequence through the page table, against the dense oracle.
  void attend_and_check(int step) {
    build_table();
    for (std::int32_t b = 0; b < kBatch; ++b) {
      const sequence& s = seqs_[b];
      const std::int32_t n = s.cells;
      ASSERT_EQ(core::sequence_cells(indptr_[b + 1] - indptr_[b], last_[b], P), n);
      if (n == 0) continue;
      std::vector<float> q(QH * D);
      for (auto& x : q) x = normal_(rng_);
      core::kv_addressing paged{indices_.data() + indptr_[b], P, kPageStride, kRow, D};
      core::kv_addressing dense{nullptr, 1, 0, kRow, D};
      std::vector<float> out(QH * D), probs(QH * n), out_ref(QH * D), probs_ref(QH * n);
      cpu::reference::decode_attention(q.data(), k_pool_.data(), v_pool_.data(), paged, QH, H, D, n,
                                       n, out.data(), probs.data(), nullptr);
      cpu::reference::decode_attention(q.data(), s.dense_k.data(), s.dense_v.data(), dense, QH, H,
                                       D, n, n, out_ref.data(), probs_ref.data(), nullptr);
      if (mode_ != mode::in_place) {  // same rows in the same order: bit-identical
        ASSERT_EQ(out, out_ref) << "step " << step << " sequence " << b;
        ASSERT_EQ(probs, probs_ref) << "step " << step << " sequence " << b;
        continue;
      }
      // Slot order differs from time order: same values up to summation order.
      for (std::int32_t i = 0; i < QH * D; ++i)
        ASSERT_NEAR(out[i], out_ref[i], 1e-5f * (1.0f + std::fabs(out_ref[i])))
            << "step " << step << " sequence " << b;
      for (std::int32_t h = 0; h < QH; ++h) {
        std::vector<float> logical(n);
        s.map.gather(span<const float>(probs.data() + h * n, n), span<float>(logical.data(), n));
        for (std::int32_t i = 0; i < n; ++i)
          ASSERT_NEAR(logical[i], probs_ref[h * n + i], 1e-6f) << "step " << step;
      }
    }
  }

  /// Evicts in every sequence holding more than `limit` cells; returns the rows moved.
  std::int64_t evict(std::int32_t limit, std::int64_t& evicted) {
    build_table();
    std::vector<std::uint8_t> keep(indices_.size() * P, 0);
    std::vector<std::vector<bool>> seq_keep(kBatch);
    for (std::int32_t b = 0; b < kBatch; ++b) {
      const sequence& s = seqs_[b];
      seq_keep[b].assign(s.cells, true);
      if (s.cells > limit) {
        if (mode_ == mode::pages) {
          // Whole pages, the last one excepted.
          for (std::int32_t p = 0; p + 1 < static_cast<std::int32_t>(s.pages.size()); ++p)
            if (rng_() % 3 == 0)
              for (std::int32_t e = 0; e < P; ++e) seq_keep[b][p * P + e] = false;
        } else {
          for (std::int32_t i = 0; i < s.cells; ++i) seq_keep[b][i] = rng_() % 3 != 0;
        }
      }
      for (std::int32_t i = 0; i < s.cells; ++i)
        keep[static_cast<std::size_t>(indptr_[b]) * P + i] = seq_keep[b][i] ? 1 : 0;
    }
    std::int64_t moved = 0;
    std::vector<eviction_plan> logical(kBatch);
    if (mode_ == mode::in_place_stable) {
      std::int64_t expected_moves = 0;
      for (std::int32_t b = 0; b < kBatch; ++b) {
        eviction_plan& p = logical[b];
        p.n_kv_before = seqs_[b].cells;
        std::int32_t kept = 0;
        bool hole = false;
        for (std::int32_t i = 0; i < seqs_[b].cells; ++i) {
          p.move_to.push_back(seq_keep[b][i] ? kept++ : -1);
          hole = hole || !seq_keep[b][i];
          expected_moves += seq_keep[b][i] && hole ? 1 : 0;
        }
        p.n_kv_after = kept;
      }
      cpu::plan_paged_in_place(indices_.data(), indptr_.data(), last_.data(), kBatch, P,
                               span<const eviction_plan>(logical.data(), kBatch), out_);
      EXPECT_EQ(static_cast<std::int64_t>(out_.moves.size()), expected_moves);
    } else if (mode_ == mode::in_place) {
      for (std::int32_t b = 0; b < kBatch; ++b) {
        // seq_keep is over the sequence's time order (the map's logical cells).
        sequence& s = seqs_[b];
        const std::vector<bool>& logical_keep = seq_keep[b];
        eviction_plan& p = logical[b];
        p.n_kv_before = s.cells;
        std::int32_t kept = 0;
        for (std::int32_t i = 0; i < s.cells; ++i) {
          p.move_to.push_back(logical_keep[i] ? kept++ : -1);
          if (!logical_keep[i]) p.evict.push_back(i);
        }
        p.n_kv_after = kept;
        s.map.plan(p, holes_[b]);
      }
      cpu::plan_paged_in_place(indices_.data(), indptr_.data(), last_.data(), kBatch, P,
                               span<const hole_fill_plan>(holes_, kBatch), out_);
      EXPECT_EQ(out_.spare_pages_used, 0);
    } else {
      std::vector<std::int32_t> spare_ids(free_.rbegin(), free_.rend());
      if (mode_ != mode::table) spare_ids.clear();
      cpu::plan_paged_compaction(indices_.data(), indptr_.data(), last_.data(), kBatch, P,
                                 keep.data(), spare_ids.data(),
                                 static_cast<std::int32_t>(spare_ids.size()), out_, ws_);
      if (!out_.ok) return -1;
      if (mode_ == mode::pages) {
        EXPECT_TRUE(out_.moves.empty()) << "whole pages never copy";
      }
    }
    moved = static_cast<std::int64_t>(out_.moves.size());
    const std::int64_t row_bytes = kRow * static_cast<std::int64_t>(sizeof(float));
    for (std::vector<float>* pool : {&k_pool_, &v_pool_})
      cpu::apply_paged_moves(reinterpret_cast<unsigned char*>(pool->data()),
                             kPageStride * static_cast<std::int64_t>(sizeof(float)), row_bytes,
                             row_bytes, 1, row_bytes, out_.moves);
    // The engine adopts the new table and returns freed pages to its free list.
    std::set<std::int32_t> in_use;
    for (std::int32_t b = 0; b < kBatch; ++b) {
      sequence& s = seqs_[b];
      s.pages.assign(out_.new_indices.begin() + out_.new_indptr[b],
                     out_.new_indices.begin() + out_.new_indptr[b + 1]);
      std::vector<float> k, v;
      std::int32_t kept = 0;
      for (std::int32_t i = 0; i < s.cells; ++i) {
        if (!seq_keep[b][i]) continue;
        ++kept;
        k.insert(k.end(), s.dense_k.begin() + i * kRow, s.dense_k.begin() + (i + 1) * kRow);
        v.insert(v.end(), s.dense_v.begin() + i * kRow, s.dense_v.begin() + (i + 1) * kRow);
      }
      evicted += s.cells - kept;
      s.dense_k = std::move(k);
      s.dense_v = std::move(v);
      if (mode_ == mode::in_place) s.map.apply(logical[b], holes_[b]);
      s.cells = kept;
      EXPECT_EQ(core::pages_for(kept, P), static_cast<std::int32_t>(s.pages.size()));
      if (!s.pages.empty()) {
        EXPECT_EQ(out_.new_last_page_len[b], kept - (core::pages_for(kept, P) - 1) * P);
      }
      in_use.insert(s.pages.begin(), s.pages.end());
    }
    free_.clear();
    for (std::int32_t p = kPages - 1; p >= 0; --p)
      if (!in_use.count(p)) free_.push_back(p);
    // Every freed page is really free, and no page belongs to two sequences.
    for (const std::int32_t p : out_.freed_pages) EXPECT_EQ(in_use.count(p), 0u);
    std::size_t total = 0;
    for (const sequence& s : seqs_) total += s.pages.size();
    EXPECT_EQ(total, in_use.size());
    return moved;
  }

  const std::vector<std::int32_t>& free_pages() const { return free_; }

 private:
  mode mode_;
  std::mt19937 rng_;
  std::normal_distribution<float> normal_;
  std::vector<float> k_pool_, v_pool_;
  std::vector<std::int32_t> free_;
  sequence seqs_[kBatch];
  std::vector<std::int32_t> indptr_, indices_, last_;
  cpu::paged_compaction out_;
  cpu::paged_compaction_workspace ws_;
  hole_fill_plan holes_[kBatch];
};

void run_engine(mode m, std::uint32_t seed) {
  paged_engine engine(m, seed);
  std::mt19937 rng(seed + 100);
  std::int64_t moved = 0, evicted = 0, evictions = 0;
  for (int step = 0; step < 400; ++step) {
    for (std::int32_t b = 0; b < kBatch; ++b) {
      const int add = 1 + static_cast<int>(rng() % 3);
      for (int a = 0; a < add; ++a) ASSERT_TRUE(engine.append(b)) << "pool exhausted";
    }
    engine.attend_and_check(step);
    if (::testing::Test::HasFatalFailure()) return;
    if (step % 5 == 4) {
      const std::int64_t r = engine.evict(30, evicted);
      ASSERT_GE(r, 0) << "spares short at step " << step;
      moved += r;
      ++evictions;
      engine.attend_and_check(step);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  EXPECT_GT(evicted, 0);
  if (m == mode::in_place) {
    EXPECT_LE(moved, evicted);
  }
  if (m == mode::pages) {
    EXPECT_EQ(moved, 0);
  }
}

TEST(PagedEndToEnd, TableModeMatchesDenseOracle) { run_engine(mode::table, 1); }
TEST(PagedEndToEnd, InPlaceHoleFillingMatchesDenseOracleWithoutSpares) {
  run_engine(mode::in_place, 2);
}
TEST(PagedEndToEnd, PageGranularMatchesDenseOracleWithoutMoves) { run_engine(mode::pages, 3); }
TEST(PagedEndToEnd, InPlaceStableMatchesDenseOracleWithoutSpares) {
  run_engine(mode::in_place_stable, 4);
}

TEST(PagedPlanner, ReservedPlanningEqualsTheAllocatingForm) {
  // Two sequences, P = 2: [a b | c d | e] and [f g | h]; evict b, c, g.
  const std::vector<std::int32_t> indices{7, 3, 9, 4, 1}, indptr{0, 3, 5}, last{1, 1};
  const std::vector<std::uint8_t> keep{1, 0, 0, 1, 1, 0, 1, 0, 1, 0};
  const std::vector<std::int32_t> spares{11, 12};
  const auto ref = cpu::plan_paged_compaction(indices.data(), indptr.data(), last.data(), 2, 2,
                                              keep.data(), spares.data(), 2);
  cpu::paged_compaction out;
  cpu::paged_compaction_workspace ws;
  out.reserve(2, 5, 2);
  ws.reserve(3, 2);
  cpu::plan_paged_compaction(indices.data(), indptr.data(), last.data(), 2, 2, keep.data(),
                             spares.data(), 2, out, ws);
  EXPECT_EQ(out.new_indices, ref.new_indices);
  EXPECT_EQ(out.moves, ref.moves);
  EXPECT_EQ(out.freed_pages, ref.freed_pages);
  // Sequence 0 keeps a, d, e -> 3 cells, 2 pages: [a d] (copy page into its evicted page? no
  // fully evicted page: page 3 holds d, page 7 holds a) -> a copy page; sequence 1 keeps f, h.
  EXPECT_EQ(out.new_indptr, (std::vector<std::int32_t>{0, 2, 3}));
  EXPECT_EQ(out.new_last_page_len, (std::vector<std::int32_t>{1, 2}));
  // A bad table throws before `out` changes.
  const auto saved = out.new_indices;
  const std::vector<std::int32_t> bad_last{3, 1};
  try {
    cpu::plan_paged_compaction(indices.data(), indptr.data(), bad_last.data(), 2, 2, keep.data(),
                               spares.data(), 2, out, ws);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "last_page_len[0]");
  }
  EXPECT_EQ(out.new_indices, saved);
}

TEST(PagedPlanner, InPlaceHandWorked) {
  // One sequence of 7 cells in pages {5, 2} (P = 4: [0 1 2 3 | 4 5 6]); evict slots 1 and 2.
  // n_after = 5: holes {1, 2}, movers {5, 6} -> (2,1)->(5,1), (2,2)->(5,2); page 2 stays
  // (5 cells need 2 pages), nothing freed. Then evict 4 more -> pages {5}, page 2 freed.
  slot_map map(8);
  map.append(7);
  eviction_plan p;
  p.n_kv_before = 7;
  p.move_to = {0, -1, -1, 1, 2, 3, 4};
  p.evict = {1, 2};
  p.n_kv_after = 5;
  hole_fill_plan h[1];
  map.plan(p, h[0]);
  const std::vector<std::int32_t> indices{5, 2}, indptr{0, 2}, last{3};
  cpu::paged_compaction out;
  cpu::plan_paged_in_place(indices.data(), indptr.data(), last.data(), 1, 4,
                           span<const hole_fill_plan>(h, 1), out);
  EXPECT_EQ(out.moves, (std::vector<cpu::paged_row_move>{{2, 1, 5, 1}, {2, 2, 5, 2}}));
  EXPECT_EQ(out.new_indices, (std::vector<std::int32_t>{5, 2}));
  EXPECT_EQ(out.new_last_page_len, (std::vector<std::int32_t>{1}));
  EXPECT_TRUE(out.freed_pages.empty());
  map.apply(p, h[0]);
  // Keep only logical cells 0 and 1 (slots 0 and 3) -> n_after 2: hole slot 1 gets slot 3.
  eviction_plan p2;
  p2.n_kv_before = 5;
  p2.move_to = {0, 1, -1, -1, -1};
  p2.evict = {2, 3, 4};
  p2.n_kv_after = 2;
  map.plan(p2, h[0]);
  const std::vector<std::int32_t> last2{1};
  cpu::plan_paged_in_place(indices.data(), indptr.data(), last2.data(), 1, 4,
                           span<const hole_fill_plan>(h, 1), out);
  EXPECT_EQ(out.moves, (std::vector<cpu::paged_row_move>{{5, 3, 5, 1}}));
  EXPECT_EQ(out.new_indices, (std::vector<std::int32_t>{5}));
  EXPECT_EQ(out.freed_pages, (std::vector<std::int32_t>{2}));
  EXPECT_EQ(out.new_last_page_len, (std::vector<std::int32_t>{2}));
  // A plan over the wrong number of cells is rejected, `out` unchanged.
  const std::vector<std::int32_t> last_wrong{2};
  try {
    cpu::plan_paged_in_place(indices.data(), indptr.data(), last_wrong.data(), 1, 4,
                             span<const hole_fill_plan>(h, 1), out);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "plans[0].n_before");
  }
  EXPECT_EQ(out.freed_pages, (std::vector<std::int32_t>{2}));
}

TEST(PagedPlanner, InPlaceStableHandWorked) {
  // 7 cells in pages {5, 2} (P = 4); evict cells 1 and 2: cells 3..6 shift down by two, in
  // order: (5,3)->(5,1), (2,0)->(5,2), (2,1)->(5,3), (2,2)->(2,0); 5 cells keep both pages.
  const std::vector<std::int32_t> indices{5, 2}, indptr{0, 2}, last{3};
  eviction_plan p[1];
  p[0].n_kv_before = 7;
  p[0].move_to = {0, -1, -1, 1, 2, 3, 4};
  p[0].evict = {1, 2};
  p[0].n_kv_after = 5;
  cpu::paged_compaction out;
  cpu::plan_paged_in_place(indices.data(), indptr.data(), last.data(), 1, 4,
                           span<const eviction_plan>(p, 1), out);
  EXPECT_EQ(out.moves, (std::vector<cpu::paged_row_move>{
                           {5, 3, 5, 1}, {2, 0, 5, 2}, {2, 1, 5, 3}, {2, 2, 2, 0}}));
  EXPECT_EQ(out.new_indices, (std::vector<std::int32_t>{5, 2}));
  EXPECT_EQ(out.new_last_page_len, (std::vector<std::int32_t>{1}));
  EXPECT_TRUE(out.freed_pages.empty());
  // A move map that is not stable is rejected before `out` changes.
  const auto saved = out.moves;
  p[0].move_to = {0, 2, -1, 1, 2, 3, 4};
  try {
    cpu::plan_paged_in_place(indices.data(), indptr.data(), last.data(), 1, 4,
                             span<const eviction_plan>(p, 1), out);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "plans[0].move_to[1]");
  }
  EXPECT_EQ(out.moves, saved);
}

TEST(PageGranular, HandWorkedMeanAndMax) {
  // 10 cells, P = 3: pages {0,1,2} {3,4,5} {6,7,8} {9 (last)}. The plan evicted 4 cells ->
  // ceil(4/3) = 2 pages. Scores: page 0 mean 0.5 max 0.9; page 1 mean 0.3 max 0.3; page 2
  // mean 0.4 max 0.5. mean -> pages 1, 2; max -> pages 1, 2 as well unless protected: with
  // cell 4 protected, page 1 is out -> mean: pages 2, 0; max: pages 2, 0.
  eviction_plan base;
  base.n_kv_before = 10;
  base.move_to = {0, -1, 1, -1, 2, -1, 3, -1, 4, 5};
  base.evict = {1, 3, 5, 7};
  base.n_kv_after = 6;
  base.scores = {0.1f, 0.5f, 0.9f, 0.3f, 0.3f, 0.3f, 0.5f, 0.5f, 0.2f, 1.0f};
  base.promote = {2, 6};
  page_eviction_workspace ws;
  ws.reserve(10, 3);
  auto plan = base;
  EXPECT_EQ(make_page_granular(
                plan, 3, page_score_rule::mean, [](std::int32_t) { return false; }, ws),
            2);
  EXPECT_EQ(plan.evict, (std::vector<std::int32_t>{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(plan.move_to, (std::vector<std::int32_t>{0, 1, 2, -1, -1, -1, -1, -1, -1, 3}));
  EXPECT_EQ(plan.n_kv_after, 4);
  EXPECT_EQ(plan.promote, (std::vector<std::int32_t>{2}));
  plan = base;
  make_page_granular(
      plan, 3, page_score_rule::max, [](std::int32_t c) { return c == 4; }, ws);
  EXPECT_EQ(plan.evict, (std::vector<std::int32_t>{0, 1, 2, 6, 7, 8}));
  // max: page 0 scores 0.9, page 2 scores 0.5; with only one page wanted (evict 2 cells):
  plan = base;
  plan.evict = {1, 3};
  plan.move_to = {0, -1, 1, -1, 2, 3, 4, 5, 6, 7};
  plan.n_kv_after = 8;
  make_page_granular(
      plan, 3, page_score_rule::max, [](std::int32_t c) { return c == 4; }, ws);
  EXPECT_EQ(plan.evict, (std::vector<std::int32_t>{6, 7, 8}));
  // Bad page size: rejected, plan unchanged.
  plan = base;
  try {
    make_page_granular(
        plan, 0, page_score_rule::mean, [](std::int32_t) { return false; }, ws);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "page_size");
  }
  EXPECT_EQ(plan.evict, base.evict);
}

/// Streams speech-like frames through one tiered_cache whose plans are made page-granular;
/// returns the largest occupancy seen, or -1 when the cache filled up (append would throw).
/// `mean_share` receives the mean occupancy after warm-up over the trigger level.
std::int32_t page_granular_stream(std::int32_t page, page_score_rule rule, std::int64_t& pages,
                                  double& mean_share) {
  audiokv_config config;
  config.budget = 512;
  tiered_cache<> cache(config);
  eviction_plan plan;
  plan.reserve(cache.capacity());
  page_eviction_workspace ws;
  ws.reserve(cache.capacity(), page);
  test::speech_stream stream(5, 1);
  std::vector<float> probs;
  std::int32_t peak = 0;
  double occupancy = 0.0;
  std::int64_t samples = 0;
  for (int step = 0; step < 8000; ++step) {
    frame_meta f = stream.next_frame();
    if (cache.num_cells() == cache.capacity()) return -1;
    cache.append(&f, 1);
    stream.attention(cache.positions(), cache.num_cells(), probs);
    cache.observe(probs.data(), cache.num_cells());
    peak = std::max(peak, cache.num_cells());
    if (step >= 3 * config.budget) {
      occupancy += cache.num_cells();
      ++samples;
    }
    if (!cache.wants_eviction()) continue;
    cache.plan(plan);
    pages += make_page_granular(
        plan, page, rule, [&](std::int32_t c) { return cache.is_protected(c); }, ws);
    for (const std::int32_t c : plan.evict) {
      EXPECT_FALSE(cache.is_protected(c)) << "step " << step;
    }
    // Whole pages: the evicted cells come in complete, aligned runs of `page`.
    EXPECT_EQ(plan.evict.size() % page, 0u);
    for (std::size_t i = 0; i + page <= plan.evict.size(); i += page) {
      EXPECT_TRUE(plan.evict[i] % page == 0 &&
                  plan.evict[i + page - 1] == plan.evict[i] + page - 1);
    }
    cache.apply(plan);
  }
  mean_share = occupancy / static_cast<double>(samples) / cache.trigger_cells();
  return peak;
}

TEST(PageGranular, TieredCacheStreamNeverEvictsProtectedAndFreesWholePages) {
  // Boundary protection (radius 10 around ~1 boundary per 50 voiced frames) leaves enough
  // unprotected whole pages up to P = 8 here; at P = 16 almost every page holds a protected
  // cell and this stream fills the cache (page_granular_stream returns -1).
  for (const std::int32_t page : {1, 4, 8}) {
    for (const page_score_rule rule : {page_score_rule::mean, page_score_rule::max}) {
      std::int64_t pages = 0;
      double share = 0.0;
      const std::int32_t peak = page_granular_stream(page, rule, pages, share);
      EXPECT_NEAR(share, 1.0, 0.03) << "page " << page << ": mean occupancy / trigger level";
      EXPECT_GT(peak, 0) << "page " << page << ": the cache filled up";
      EXPECT_LE(peak, 512) << "page " << page;
      EXPECT_GT(pages, 100) << "page " << page;
    }
  }
}

}  // namespace
