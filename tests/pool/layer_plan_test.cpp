// SPDX-License-Identifier: Apache-2.0
// Per-layer plan granularity (pool/layer_plan.hpp): a hand-worked case for both reductions, the
// duty rule by hand (locked in any head => kept; due in some head and locked in none =>
// evicted, counted towards the plan, protections_released per head), errors with unchanged
// plans, a stream of four tiered_caches (one per KV head) that share every plan and stay in
// step, and long streams of shared plans, cell- and page-granular
// (make_layer_page_granular), that hold the trigger level and every head's emergency pool at
// its nominal size, judged against the protection oracle of tests/common.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <audiokv/pool/layer_plan.hpp>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "common/protection_oracle.hpp"
#include "common/stream.hpp"

namespace {

using namespace audiokv;

eviction_plan plan_of(std::vector<float> scores, std::vector<std::int32_t> evict) {
  eviction_plan p;
  p.n_kv_before = static_cast<std::int32_t>(scores.size());
  p.scores = std::move(scores);
  p.evict = std::move(evict);
  std::int32_t kept = 0;
  std::size_t e = 0;
  for (std::int32_t c = 0; c < p.n_kv_before; ++c) {
    const bool out = e < p.evict.size() && p.evict[e] == c;
    e += out ? 1 : 0;
    p.move_to.push_back(out ? -1 : kept++);
  }
  p.n_kv_after = kept;
  return p;
}

TEST(LayerPlan, HandWorkedMaxAndMean) {
  // Two heads, 5 cells. Head 0 evicts 1 cell, head 1 evicts 2 -> the layer evicts 2, chosen
  // among the cells some head evicted: {0, 1, 2}.
  //   scores h0: 0.1 0.9 0.3 0.6 0.2     h1: 0.8 0.1 0.2 0.4 0.3
  //   max over {0,1,2}:  0.8 0.9 0.3  -> cells 2 and 0 (cell 4, lower than both, was evicted by
  //                                      no head: it stays)
  //   With cell 2 protected in head 0 only, which keeps it (locked), only cells 0 and 1
  //   remain: both go.
  const auto h0 = plan_of({0.1f, 0.9f, 0.3f, 0.6f, 0.2f}, {0});
  const auto h1 = plan_of({0.8f, 0.1f, 0.2f, 0.4f, 0.3f}, {1, 2});
  layer_plan_workspace ws;
  ws.reserve(5);
  const auto none = [](std::int32_t, std::int32_t) { return false; };
  const auto cell2_in_head0 = [](std::int32_t h, std::int32_t c) { return h == 0 && c == 2; };

  std::vector<eviction_plan> plans{h0, h1};
  EXPECT_EQ(share_layer_plan(span<eviction_plan>(plans.data(), 2), head_reduce::max, none, ws), 2);
  for (const auto& p : plans) {
    EXPECT_EQ(p.evict, (std::vector<std::int32_t>{0, 2}));
    EXPECT_EQ(p.move_to, (std::vector<std::int32_t>{-1, 0, -1, 1, 2}));
    EXPECT_EQ(p.n_kv_after, 3);
  }
  plans = {h0, h1};
  share_layer_plan(span<eviction_plan>(plans.data(), 2), head_reduce::max, cell2_in_head0, ws);
  EXPECT_EQ(plans[0].evict, (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(plans[1].evict, (std::vector<std::int32_t>{0, 1}));

  // max and mean disagree: one cell to evict among {0, 1}.
  //   c0: 0.1 and 0.6 -> max 0.6, mean 0.35;  c1: 0.5 and 0.5 -> max 0.5, mean 0.5;
  //   c2 scores 0 in both heads but no head evicted it.
  const auto g0 = plan_of({0.1f, 0.5f, 0.0f, 0.9f}, {0});
  const auto g1 = plan_of({0.6f, 0.5f, 0.0f, 0.9f}, {1});
  plans = {g0, g1};
  share_layer_plan(span<eviction_plan>(plans.data(), 2), head_reduce::max, none, ws);
  EXPECT_EQ(plans[0].evict, (std::vector<std::int32_t>{1}));
  plans = {g0, g1};
  share_layer_plan(span<eviction_plan>(plans.data(), 2), head_reduce::mean, none, ws);
  EXPECT_EQ(plans[0].evict, (std::vector<std::int32_t>{0}));
  EXPECT_EQ(plans[1].evict, (std::vector<std::int32_t>{0}));
  plans = {g0, g1};
  share_layer_plan(
      span<eviction_plan>(plans.data(), 2), head_reduce::max,
      [](std::int32_t h, std::int32_t c) { return h == 0 && c == 1; }, ws);
  EXPECT_EQ(plans[0].evict, (std::vector<std::int32_t>{0}));
}

TEST(LayerPlan, DueCellsGoLockedCellsStay) {
  // Two heads, 8 cells. Head 0 evicts {0, 1, 2, 6}, head 1 evicts {0, 3, 5, 7}: e = 4.
  //   cell 0: protected in both, evicted by both (an emergency pool's overflow): due -> goes;
  //   cell 1: protected in head 0 only, which evicts it (a released boundary): due -> goes;
  //   cell 2: due in head 0, but head 1 protects and keeps it: locked -> stays, and head 0's
  //           protections_released drops from 2 to 1;
  //   cell 3: evicted by head 1 (unprotected there), protected and kept by head 0: locked;
  //   cells 5, 6, 7: free candidates, max scores 0.3, 0.5, 0.45: the e - 2 = 2 lowest, 5 and
  //           7, go; cell 4 no head evicted.
  auto h0 = plan_of({0.0f, 0.0f, 0.0f, 0.9f, 0.0f, 0.3f, 0.2f, 0.45f}, {0, 1, 2, 6});
  auto h1 = plan_of({0.0f, 0.9f, 0.9f, 0.1f, 0.0f, 0.1f, 0.5f, 0.2f}, {0, 3, 5, 7});
  h0.protections_released = 2;  // cells 1 and 2
  h1.promote = {2, 5};
  const auto prot = [](std::int32_t h, std::int32_t c) {
    return c == 0 || (h == 0 && (c == 1 || c == 2 || c == 3)) || (h == 1 && c == 2);
  };
  layer_plan_workspace ws;
  ws.reserve(8);
  for (const head_reduce rule : {head_reduce::max, head_reduce::mean}) {
    std::vector<eviction_plan> plans{h0, h1};
    EXPECT_EQ(share_layer_plan(span<eviction_plan>(plans.data(), 2), rule, prot, ws), 4);
    for (const auto& p : plans) {
      EXPECT_EQ(p.evict, (std::vector<std::int32_t>{0, 1, 5, 7}));
      EXPECT_EQ(p.move_to, (std::vector<std::int32_t>{-1, -1, 0, 1, 2, -1, 3, -1}));
      EXPECT_EQ(p.n_kv_after, 4);
    }
    EXPECT_EQ(plans[0].protections_released, 1);
    EXPECT_EQ(plans[1].protections_released, 0);
    EXPECT_EQ(plans[1].promote, (std::vector<std::int32_t>{2}));
  }
  // Due cells beyond e all go: each head releases two cells the other does not protect.
  std::vector<eviction_plan> plans{plan_of({0.1f, 0.2f, 0.3f, 0.4f, 0.5f}, {0, 1}),
                                   plan_of({0.1f, 0.2f, 0.3f, 0.4f, 0.5f}, {2, 3})};
  plans[0].protections_released = plans[1].protections_released = 2;
  EXPECT_EQ(
      share_layer_plan(
          span<eviction_plan>(plans.data(), 2), head_reduce::max,
          [](std::int32_t h, std::int32_t c) { return h == 0 ? c < 2 : c == 2 || c == 3; }, ws),
      4);
  EXPECT_EQ(plans[0].evict, (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(plans[0].protections_released, 2);
  EXPECT_EQ(plans[1].protections_released, 2);
}

TEST(LayerPlan, ErrorsLeavePlansUnchanged) {
  const auto a = plan_of({0.1f, 0.2f, 0.3f}, {0});
  const auto b = plan_of({0.1f, 0.2f}, {1});
  std::vector<eviction_plan> plans{a, b};
  layer_plan_workspace ws;
  try {
    share_layer_plan(
        span<eviction_plan>(plans.data(), 2), head_reduce::max,
        [](std::int32_t, std::int32_t) { return false; }, ws);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "plans[1].n_kv_before");
  }
  EXPECT_EQ(plans[0].evict, a.evict);
  EXPECT_EQ(plans[0].move_to, a.move_to);
  try {
    share_layer_plan(
        span<eviction_plan>(), head_reduce::max, [](std::int32_t, std::int32_t) { return false; },
        ws);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "plans.size()");
  }
  // A promotion outside the plan, a non-finite score: named, nothing changes.
  const auto none = [](std::int32_t, std::int32_t) { return false; };
  plans = {a, a};
  plans[1].promote = {3};
  try {
    share_layer_plan(span<eviction_plan>(plans.data(), 2), head_reduce::max, none, ws);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "plans[1].promote[0]");
  }
  EXPECT_EQ(plans[0].move_to, a.move_to);
  plans = {a, a};
  plans[1].scores[2] = std::numeric_limits<float>::quiet_NaN();
  try {
    share_layer_plan(span<eviction_plan>(plans.data(), 2), head_reduce::mean, none, ws);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "plans[1].scores[2]");
  }
  EXPECT_EQ(plans[0].move_to, a.move_to);
  // make_layer_page_granular needs one keep-set (share_layer_plan first) and a page size the
  // plan can use; each error leaves every plan as it was.
  const auto c = plan_of({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}, {0, 1});
  const auto d = plan_of({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}, {0, 2});
  plans = {c, d};
  ws.reserve_pages(6, 2);
  try {
    make_layer_page_granular(span<eviction_plan>(plans.data(), 2), head_reduce::max, 2,
                             page_score_rule::mean, none, ws);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "plans[1].move_to[1]");
  }
  plans = {c, c};
  try {
    make_layer_page_granular(span<eviction_plan>(plans.data(), 2), head_reduce::max, 6,
                             page_score_rule::mean, none, ws);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "page_size");
  }
  EXPECT_EQ(plans[0].move_to, c.move_to);
  EXPECT_EQ(plans[1].move_to, c.move_to);
}

TEST(LayerPlan, PagesOfTheSharedKeepSetByHand) {
  // Two heads, 7 cells, pages of 2: {0,1} {2,3} {4,5} and the last {6}. Both plans (already
  // shared) evict cells 0 and 2: e = 2. Cell 1 is protected in head 1 only, which keeps it:
  // locked, so page 0 is partial. Cell scores, max over the heads: 0.2 0.9 0.1 0.3 0.5 0.6;
  // page means over free cells: page 0 0.2 (cell 0), page 1 0.2, page 2 0.55. Whole pages
  // first: page 1 covers e; cell 0 stays, and so does the locked cell 1.
  auto h0 = plan_of({0.2f, 0.9f, 0.1f, 0.3f, 0.5f, 0.6f, 0.7f}, {0, 2});
  auto h1 = plan_of({0.1f, 0.9f, 0.0f, 0.2f, 0.4f, 0.6f, 0.7f}, {0, 2});
  h1.promote = {2, 4};
  const auto prot = [](std::int32_t h, std::int32_t c) { return h == 1 && c == 1; };
  layer_plan_workspace ws;
  ws.reserve_pages(7, 2);
  for (const page_protection mode : {page_protection::page, page_protection::cells}) {
    std::vector<eviction_plan> plans{h0, h1};
    EXPECT_EQ(make_layer_page_granular(span<eviction_plan>(plans.data(), 2), head_reduce::max, 2,
                                       page_score_rule::mean, prot, ws, mode),
              1);
    for (const auto& p : plans) {
      EXPECT_EQ(p.evict, (std::vector<std::int32_t>{2, 3}));
      EXPECT_EQ(p.move_to, (std::vector<std::int32_t>{0, 1, -1, -1, 2, 3, 4}));
      EXPECT_EQ(p.n_kv_after, 5);
    }
    EXPECT_EQ(plans[1].promote, (std::vector<std::int32_t>{4}));
  }
  // Cells wanted beyond the whole pages: e = 5 takes pages 1 and 2 (4 cells), then (protection
  // per cell) page 0's free cell 0; locked cell 1 stays. Protection per page stops at 4.
  h0 = plan_of({0.2f, 0.9f, 0.1f, 0.3f, 0.5f, 0.6f, 0.7f}, {0, 2, 3, 4, 5});
  h1 = plan_of({0.1f, 0.9f, 0.0f, 0.2f, 0.4f, 0.6f, 0.7f}, {0, 2, 3, 4, 5});
  std::vector<eviction_plan> plans{h0, h1};
  make_layer_page_granular(span<eviction_plan>(plans.data(), 2), head_reduce::max, 2,
                           page_score_rule::mean, prot, ws, page_protection::cells);
  EXPECT_EQ(plans[1].evict, (std::vector<std::int32_t>{0, 2, 3, 4, 5}));
  plans = {h0, h1};
  make_layer_page_granular(span<eviction_plan>(plans.data(), 2), head_reduce::max, 2,
                           page_score_rule::mean, prot, ws, page_protection::page);
  EXPECT_EQ(plans[1].evict, (std::vector<std::int32_t>{2, 3, 4, 5}));
}

/// Per-head attention from the position alone (different in each head).
float head_score(std::int32_t head, std::int32_t pos, std::int32_t now) {
  const std::uint32_t h = (static_cast<std::uint32_t>(pos) + 7919u * head) * 2654435761u;
  const float content = 0.05f + static_cast<float>(h >> 8) / static_cast<float>(1u << 24);
  return content / (1.0f + 0.01f * static_cast<float>(now - pos)) * 1e-3f;
}

TEST(LayerPlan, FourHeadsShareEveryPlanAndNeverEvictProtected) {
  for (const head_reduce rule : {head_reduce::max, head_reduce::mean}) {
    audiokv_config config;
    config.budget = 400;
    constexpr int kHeads = 4;
    std::vector<tiered_cache<>> caches(kHeads, tiered_cache<>(config));
    std::vector<eviction_plan> plans(kHeads);
    for (auto& p : plans) p.reserve(caches[0].capacity());
    std::vector<std::vector<std::int32_t>> before(kHeads);  // each head's own plan's move_to
    layer_plan_workspace ws;
    ws.reserve(caches[0].capacity());
    test::speech_stream stream(9, 1);
    std::vector<float> scores(caches[0].capacity());
    std::int64_t evictions = 0, evicted = 0;
    std::int32_t peak = 0;
    double occupancy = 0.0;
    std::int64_t samples = 0;
    for (int step = 0; step < 6000; ++step) {
      const frame_meta f = stream.next_frame();
      for (int h = 0; h < kHeads; ++h) {
        caches[h].append(&f, 1);
        const std::int32_t n = caches[h].num_cells();
        for (std::int32_t c = 0; c < n; ++c)
          scores[c] = head_score(h, caches[h].positions()[c], f.pos);
        caches[h].observe(scores.data(), n);
      }
      peak = std::max(peak, caches[0].num_cells());
      if (step >= 3 * config.budget) {
        occupancy += caches[0].num_cells();
        ++samples;
      }
      bool any = false;
      for (const auto& c : caches) any = any || c.wants_eviction();
      if (!any) continue;
      for (int h = 0; h < kHeads; ++h) caches[h].plan(plans[h]);
      for (int h = 0; h < kHeads; ++h) before[h] = plans[h].move_to;
      evicted += share_layer_plan(
          span<eviction_plan>(plans.data(), kHeads), rule,
          [&](std::int32_t h, std::int32_t c) { return caches[h].is_protected(c); }, ws);
      for (int h = 0; h < kHeads; ++h) {
        ASSERT_EQ(plans[h].move_to, plans[0].move_to) << "one keep-set for the layer";
        // A protected cell goes only where its head's own plan evicted it (a due cell).
        for (const std::int32_t c : plans[0].evict)
          for (int g = 0; g < kHeads; ++g)
            ASSERT_FALSE(caches[g].is_protected(c) && before[g][c] != -1)
                << "step " << step << " head " << g;
      }
      for (int h = 0; h < kHeads; ++h) caches[h].apply(plans[h]);
      ++evictions;
      for (int h = 1; h < kHeads; ++h) {
        ASSERT_EQ(caches[h].num_cells(), caches[0].num_cells());
        for (std::int32_t c = 0; c < caches[0].num_cells(); ++c)
          ASSERT_EQ(caches[h].positions()[c], caches[0].positions()[c]);
      }
    }
    EXPECT_GT(evictions, 10);
    EXPECT_GT(evicted, 0);
    EXPECT_LE(peak, config.budget);
    // Mean occupancy within +-3% of the trigger level, as with per-head plans.
    const double trigger = caches[0].trigger_cells();
    EXPECT_NEAR(occupancy / static_cast<double>(samples), trigger, 0.03 * trigger);
  }
}

/// How run_layer drives a layer's heads.
struct layer_mode {
  std::int32_t heads = 2;
  std::int32_t budget = 200;
  std::int32_t steps = 12000;
  unsigned seed = 5;
  bool distinct = false;  // each head observes its own attention draw (else all the same)
  std::int32_t page = 0;  // > 0: make_layer_page_granular with pages of this size
  page_protection protection = page_protection::cells;
};

/// What run_layer measured.
struct layer_result {
  std::int32_t threw_at = -1;  // step whose append threw, or -1
  std::string thrown;
  double mean_share = 0.0;  // mean occupancy after warm-up / trigger level
  std::int32_t peak = 0;
  std::int32_t emergency_peak = 0;  // largest emergency pool of any head after warm-up
  std::int32_t emergency_nominal = 0;
  std::int64_t emergency_evictions = 0;  // head 0's
  std::int64_t evictions = 0;
  std::int64_t locked_evicted = 0;  // evicted cells some head protects and its own plan kept
  std::int64_t due_evicted = 0;     // evicted cells some head protects and its own plan evicted
  std::int64_t violations = 0;      // protection_oracle's rule violations, every head
  std::int64_t boundary_seen = 0;   // boundary-protected cells at plan time (head 0)
  std::int64_t out_of_step = 0;     // plans or caches that differ between heads
};

/// Streams speech-like frames (segment starts, boundaries, silences; one speaker) through one
/// tiered_cache per KV head, as an engine with per-layer plans drives them: append, observe,
/// and when any head's trigger fires, each head plans, share_layer_plan (max), optionally
/// make_layer_page_granular, apply. Every head's plan is checked against its own
/// protection_oracle (tests/common) before it is applied.
layer_result run_layer(const layer_mode& m) {
  audiokv_config config;
  config.budget = m.budget;
  std::vector<tiered_cache<>> caches(static_cast<std::size_t>(m.heads), tiered_cache<>(config));
  const std::int32_t capacity = caches[0].capacity();
  std::vector<test::protection_oracle> oracles(static_cast<std::size_t>(m.heads),
                                               test::protection_oracle(config, capacity));
  std::vector<eviction_plan> plans(static_cast<std::size_t>(m.heads));
  std::vector<std::vector<std::int32_t>> before(static_cast<std::size_t>(m.heads));
  for (std::int32_t h = 0; h < m.heads; ++h) {
    plans[h].reserve(capacity);
    before[h].reserve(capacity);
  }
  layer_plan_workspace ws;
  ws.reserve_pages(capacity, m.page > 0 ? m.page : 1);
  const auto is_protected = [&](std::int32_t h, std::int32_t c) {
    return caches[h].is_protected(c);
  };
  test::speech_stream stream(m.seed, 1);
  std::vector<float> probs;
  layer_result r;
  r.emergency_nominal = caches[0].emergency_pool_cells();
  double occupancy = 0.0;
  std::int64_t samples = 0;
  for (std::int32_t step = 0; step < m.steps; ++step) {
    const frame_meta f = stream.next_frame();
    try {
      for (auto& cache : caches) cache.append(&f, 1);
    } catch (const error& e) {
      r.threw_at = step;
      r.thrown = e.what();
      break;
    }
    for (auto& oracle : oracles) oracle.append(&f, 1);
    for (std::int32_t h = 0; h < m.heads; ++h) {
      if (h == 0 || m.distinct)
        stream.attention(caches[h].positions(), caches[h].num_cells(), probs);
      caches[h].observe(probs.data(), caches[h].num_cells());
    }
    const bool warm = step >= 3 * m.budget;
    r.peak = std::max(r.peak, caches[0].num_cells());
    if (warm) {
      occupancy += caches[0].num_cells();
      ++samples;
    }
    bool any = false;
    for (const auto& cache : caches) any = any || cache.wants_eviction();
    if (!any) continue;
    for (std::int32_t h = 0; h < m.heads; ++h) {
      caches[h].plan(plans[h]);
      before[h] = plans[h].move_to;
    }
    const span<eviction_plan> layer(plans.data(), plans.size());
    share_layer_plan(layer, head_reduce::max, is_protected, ws);
    if (m.page > 0) {
      make_layer_page_granular(layer, head_reduce::max, m.page, page_score_rule::mean, is_protected,
                               ws, m.protection);
    }
    for (const std::int32_t c : plans[0].evict) {
      for (std::int32_t g = 0; g < m.heads; ++g) {
        if (!caches[g].is_protected(c)) continue;
        (before[g][c] == -1 ? r.due_evicted : r.locked_evicted) += 1;
      }
    }
    for (std::int32_t h = 0; h < m.heads; ++h) {
      r.out_of_step += plans[h].move_to != plans[0].move_to;
      const test::protection_report report = oracles[h].check(plans[h]);
      r.violations += report.violations();
      if (h == 0) r.boundary_seen += report.boundary_seen;
    }
    r.evictions += plans[0].evict.empty() ? 0 : 1;
    for (std::int32_t h = 0; h < m.heads; ++h) {
      caches[h].apply(plans[h]);
      oracles[h].apply(plans[h]);
      r.out_of_step += oracles[h].size() != caches[h].num_cells();
      for (std::int32_t j = 0; j < caches[h].num_cells(); ++j) {
        r.out_of_step += caches[h].positions()[j] != caches[0].positions()[j] ||
                         oracles[h].tiers()[j] != caches[h].tiers()[j];
      }
      if (warm) {
        r.emergency_peak = std::max(r.emergency_peak, caches[h].pool_size(pool_tier::emergency));
      }
    }
  }
  r.mean_share =
      samples > 0 ? occupancy / static_cast<double>(samples) / caches[0].trigger_cells() : 0.0;
  r.emergency_evictions = caches[0].stats().emergency_evictions;
  return r;
}

TEST(LayerPlan, EmergencyOverflowLeavesEveryHead) {
  // The defect: share_layer_plan kept every cell protected in any head, so the emergency
  // pool's overflow, which each head's plan evicts oldest first, never left. Two heads, budget
  // 200 (nominal emergency pool 20), this stream: the pool grew to 51 cells and append threw at
  // step 10,012. Now the overflow is due in every head and goes, as with per-head plans.
  layer_mode m;
  m.steps = 12000;
  const layer_result r = run_layer(m);
  std::printf(
      "2 heads, budget 200: mean occupancy %.4f of the trigger level, emergency pool "
      "peak %d (nominal %d), %lld emergency evictions\n",
      r.mean_share, r.emergency_peak, r.emergency_nominal,
      static_cast<long long>(r.emergency_evictions));
  ASSERT_EQ(r.threw_at, -1) << r.thrown;
  // Segment starts lie >= 25 frames apart and the recent window is 20 frames: at most one
  // emergency cell above the nominal size cannot go yet.
  EXPECT_LE(r.emergency_peak, r.emergency_nominal + 1);
  EXPECT_GT(r.emergency_evictions, 20);
  EXPECT_GT(r.due_evicted, 0);
  EXPECT_EQ(r.locked_evicted, 0);
  EXPECT_EQ(r.violations, 0);
  EXPECT_EQ(r.out_of_step, 0);
  EXPECT_NEAR(r.mean_share, 1.0, 0.03);
}

/// Per-layer plans made page-granular (the vLLM / TensorRT-LLM pipeline of
/// docs/integration.md): four heads with their own attention, pages of 16 cells at budget 512
/// and of 32 at budget 1024 (a page is 3.5% of the trigger level), long enough for the
/// emergency pool to fill and overflow.
struct layer_pages_case {
  std::int32_t budget, page, steps;
};
class LayerPages : public ::testing::TestWithParam<layer_pages_case> {};

TEST_P(LayerPages, LongStreamHoldsTheTriggerLevel) {
  layer_mode m;
  m.heads = 4;
  m.budget = GetParam().budget;
  m.steps = GetParam().steps;
  m.distinct = true;
  m.page = GetParam().page;
  const layer_result r = run_layer(m);
  std::printf(
      "4 heads, budget %d, page %d: mean occupancy %.4f of the trigger level, peak %d, "
      "emergency pool peak %d (nominal %d), %lld emergency evictions, %lld evictions, %lld due "
      "cells evicted\n",
      m.budget, m.page, r.mean_share, r.peak, r.emergency_peak, r.emergency_nominal,
      static_cast<long long>(r.emergency_evictions), static_cast<long long>(r.evictions),
      static_cast<long long>(r.due_evicted));
  ASSERT_EQ(r.threw_at, -1) << r.thrown;
  EXPECT_NEAR(r.mean_share, 1.0, 0.03);
  EXPECT_LE(r.peak, m.budget);
  EXPECT_LE(r.emergency_peak, r.emergency_nominal + 1);
  EXPECT_GT(r.emergency_evictions, 10);
  EXPECT_GT(r.due_evicted, 0);
  EXPECT_EQ(r.locked_evicted, 0);
  EXPECT_EQ(r.violations, 0);
  EXPECT_GT(r.boundary_seen, 0);
  EXPECT_EQ(r.out_of_step, 0);
  EXPECT_GT(r.evictions, 200);
}

INSTANTIATE_TEST_SUITE_P(Pages, LayerPages,
                         ::testing::Values(layer_pages_case{512, 16, 30000},
                                           layer_pages_case{1024, 32, 40000}),
                         [](const ::testing::TestParamInfo<layer_pages_case>& value) {
                           return "budget" + std::to_string(value.param.budget) + "_page" +
                                  std::to_string(value.param.page);
                         });

}  // namespace
