// SPDX-License-Identifier: Apache-2.0
// Per-layer plan granularity (pool/layer_plan.hpp): a hand-worked case for both reductions, the
// protection rule (protected in any head => kept), errors with unchanged plans, and a stream of
// four tiered_caches (one per KV head) that share every plan and stay in step.
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <audiokv/pool/layer_plan.hpp>
#include <cstdint>
#include <vector>

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
  //   With cell 2 protected in head 1 only, only cells 0 and 1 remain: both go.
  const auto h0 = plan_of({0.1f, 0.9f, 0.3f, 0.6f, 0.2f}, {0});
  const auto h1 = plan_of({0.8f, 0.1f, 0.2f, 0.4f, 0.3f}, {1, 2});
  layer_plan_workspace ws;
  ws.reserve(5);
  const auto none = [](std::int32_t, std::int32_t) { return false; };
  const auto cell2_in_head1 = [](std::int32_t h, std::int32_t c) { return h == 1 && c == 2; };

  std::vector<eviction_plan> plans{h0, h1};
  EXPECT_EQ(share_layer_plan(span<eviction_plan>(plans.data(), 2), head_reduce::max, none, ws), 2);
  for (const auto& p : plans) {
    EXPECT_EQ(p.evict, (std::vector<std::int32_t>{0, 2}));
    EXPECT_EQ(p.move_to, (std::vector<std::int32_t>{-1, 0, -1, 1, 2}));
    EXPECT_EQ(p.n_kv_after, 3);
  }
  plans = {h0, h1};
  share_layer_plan(span<eviction_plan>(plans.data(), 2), head_reduce::max, cell2_in_head1, ws);
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
      [](std::int32_t h, std::int32_t c) { return h == 1 && c == 1; }, ws);
  EXPECT_EQ(plans[0].evict, (std::vector<std::int32_t>{0}));
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
      evicted += share_layer_plan(
          span<eviction_plan>(plans.data(), kHeads), rule,
          [&](std::int32_t h, std::int32_t c) { return caches[h].is_protected(c); }, ws);
      for (int h = 0; h < kHeads; ++h) {
        ASSERT_EQ(plans[h].move_to, plans[0].move_to) << "one keep-set for the layer";
        for (const std::int32_t c : plans[0].evict)
          for (int g = 0; g < kHeads; ++g)
            ASSERT_FALSE(caches[g].is_protected(c)) << "step " << step << " head " << g;
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

}  // namespace
