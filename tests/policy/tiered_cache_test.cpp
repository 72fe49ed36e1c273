// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <cstring>
#include <limits>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;
using test::frames;

audiokv_config small_config(std::int32_t budget = 100) {
  audiokv_config c;
  c.budget = budget;
  c.min_retention_ms = 50.0f;  // 5 frames of 10 ms
  c.boundary_radius = 2;
  // These tests check the score path (importance through the emergency pool) alone;
  // speech_rules_test.cpp covers the speech rules, which re-rank that path's scores by tier.
  c.speech.sinks.enabled = c.speech.coverage.enabled = c.speech.frontier.enabled = false;
  return c;
}

std::vector<float> uniform(std::int32_t n) { return std::vector<float>(n, 1.0f / n); }

TEST(TieredCache, NewFramesEnterBufferAndFlaggedOnesTheEmergencyPool) {
  tiered_cache<> cache(small_config());
  auto f = frames(0, 4);
  f[1].flags = frame_flag_segment_start;
  f[2].flags = frame_flag_sink;
  f[3].flags = frame_flag_phoneme_boundary;
  cache.append(f.data(), 4);
  EXPECT_EQ(cache.tiers()[0], pool_tier::buffer);
  EXPECT_EQ(cache.tiers()[1], pool_tier::emergency);
  EXPECT_EQ(cache.tiers()[2], pool_tier::emergency);
  EXPECT_EQ(cache.tiers()[3], pool_tier::buffer);
  EXPECT_EQ(cache.base_pool_cells(), 60);
  EXPECT_EQ(cache.emergency_pool_cells(), 10);
  EXPECT_EQ(cache.trigger_cells(), 90);
}

TEST(TieredCache, ImportanceIsEmaWithNeighbourPrior) {
  tiered_cache<> cache(small_config());
  auto f = frames(0, 2);
  cache.append(f.data(), 2);
  const float a[] = {0.8f, 0.2f};
  cache.observe(a, 2);
  EXPECT_FLOAT_EQ(cache.importance()[0], 0.3f * 0.8f);
  EXPECT_FLOAT_EQ(cache.importance()[1], 0.3f * 0.2f);
  auto g = frames(2, 1);
  cache.append(g.data(), 1);  // prior: the previous frame's importance
  EXPECT_FLOAT_EQ(cache.importance()[2], 0.3f * 0.2f);
  const float b[] = {0.5f, 0.25f, 0.25f};
  cache.observe(b, 3);
  EXPECT_FLOAT_EQ(cache.importance()[0], 0.3f * 0.5f + 0.7f * 0.24f);
  EXPECT_FLOAT_EQ(cache.importance()[2], 0.3f * 0.25f + 0.7f * 0.06f);
}

TEST(TieredCache, WithoutNeighbourPriorNewFramesStartAtZero) {
  auto c = small_config();
  c.neighbour_prior = false;
  tiered_cache<> cache(c);
  auto f = frames(0, 1);
  cache.append(f.data(), 1);
  const float a[] = {1.0f};
  cache.observe(a, 1);
  auto g = frames(1, 1);
  cache.append(g.data(), 1);
  EXPECT_EQ(cache.importance()[1], 0.0f);
}

TEST(TieredCache, TriggersAtNinetyPercentAndGetsBackUnder) {
  tiered_cache<> cache(small_config());
  eviction_plan plan;
  for (std::int32_t p = 0; p < 89; ++p) {
    auto f = frames(p, 1);
    cache.append(f.data(), 1);
  }
  EXPECT_FALSE(cache.wants_eviction());
  cache.plan(plan);
  EXPECT_TRUE(plan.empty());
  auto f = frames(89, 1);
  cache.append(f.data(), 1);
  cache.observe(uniform(90).data(), 90);
  ASSERT_TRUE(cache.wants_eviction());
  cache.plan(plan);
  EXPECT_LT(plan.n_kv_after, 90);
  // Flat scores: H = H_max, so r = base_rate and ceil(0.05 * candidates) cells go.
  EXPECT_NEAR(plan.normalized_entropy, 1.0f, 1e-5f);
  EXPECT_NEAR(plan.ratio, 0.05f, 1e-5f);
  cache.apply(plan);
  EXPECT_EQ(cache.num_cells(), plan.n_kv_after);
  EXPECT_FALSE(cache.wants_eviction());
}

TEST(TieredCache, PeakyScoresEvictMoreThanFlatOnes) {
  auto evicted_for = [](bool peaky) {
    tiered_cache<> cache(small_config());
    auto f = frames(0, 90);
    cache.append(f.data(), 90);
    std::vector<float> a(90, peaky ? 0.0001f : 1.0f / 90);
    if (peaky) {
      for (int j = 38; j < 43; ++j) a[j] = 1.0f;  // sustained, so the median keeps it
    }
    for (int step = 0; step < 20; ++step) cache.observe(a.data(), 90);
    eviction_plan plan;
    cache.plan(plan);
    return plan.evict.size();
  };
  EXPECT_GT(evicted_for(true), evicted_for(false));
}

TEST(TieredCache, EvictsLowestScoresAndPromotesBestIntoBase) {
  tiered_cache<> cache(small_config());
  auto f = frames(0, 90);
  cache.append(f.data(), 90);
  std::vector<float> a(90);
  for (int j = 0; j < 90; ++j) a[j] = j % 10 < 3 ? 10.0f : 1.0f;  // runs of 3 survive the median
  for (int step = 0; step < 10; ++step) cache.observe(a.data(), 90);
  eviction_plan plan;
  cache.plan(plan);
  // Every evicted cell scores no higher than every surviving unprotected buffer cell.
  float max_evicted = -1.0f, min_kept = 1e30f;
  for (int j = 0; j < 90; ++j) {
    const bool evicted = plan.move_to[j] < 0;
    if (evicted) max_evicted = std::max(max_evicted, plan.scores[j]);
    if (!evicted && !cache.is_protected(j)) min_kept = std::min(min_kept, plan.scores[j]);
  }
  EXPECT_LE(max_evicted, min_kept);
  // The base pool was empty, so the best 60 cells past the recent window are promoted.
  EXPECT_EQ(plan.promote.size(), 60u);
  cache.apply(plan);
  EXPECT_EQ(cache.pool_size(pool_tier::base), 60);
  for (int j = 0; j < cache.num_cells(); ++j) {
    if (cache.positions()[j] % 10 < 3 && cache.positions()[j] < 80) {
      EXPECT_EQ(cache.tiers()[j], pool_tier::base) << "pos " << cache.positions()[j];
    }
  }
}

TEST(TieredCache, BetterCandidatesReplaceWeakestBaseCells) {
  tiered_cache<> cache(small_config());
  auto f = frames(0, 90);
  cache.append(f.data(), 90);
  std::vector<float> a(90, 0.01f);
  cache.observe(a.data(), 90);
  eviction_plan plan;
  cache.plan(plan);
  cache.apply(plan);
  ASSERT_EQ(cache.pool_size(pool_tier::base), 60);
  // New frames draw much more attention than anything in the base pool.
  std::int32_t next = 90;
  while (!cache.wants_eviction()) {
    auto g = frames(next++, 1);
    cache.append(g.data(), 1);
  }
  std::vector<float> b(cache.num_cells(), 0.001f);
  for (int j = 0; j < cache.num_cells(); ++j) {
    if (cache.tiers()[j] == pool_tier::buffer) b[j] = 1.0f;
  }
  for (int step = 0; step < 10; ++step) cache.observe(b.data(), cache.num_cells());
  cache.plan(plan);
  EXPECT_FALSE(plan.demote.empty());  // some demoted cells are evicted in the same plan
  EXPECT_GE(plan.promote.size(), plan.demote.size());
  cache.apply(plan);
  EXPECT_EQ(cache.pool_size(pool_tier::base), 60);
}

TEST(TieredCache, RecentWindowAndBoundaryNeighboursAreNeverEvicted) {
  tiered_cache<> cache(small_config());
  auto f = frames(0, 90);
  f[30].flags = frame_flag_phoneme_boundary;
  cache.append(f.data(), 90);
  std::vector<float> a(90, 1.0f);
  for (int j = 80; j < 90; ++j) a[j] = 0.0f;  // the newest look useless
  for (int j = 20; j < 41; ++j) a[j] = 0.0f;  // and so does the boundary's neighbourhood
  for (int step = 0; step < 5; ++step) cache.observe(a.data(), 90);
  eviction_plan plan;
  cache.plan_to(60, plan);
  EXPECT_EQ(plan.protections_released, 0);
  for (int j = 85; j < 90; ++j) EXPECT_GE(plan.move_to[j], 0) << "recent " << j;
  for (int j = 28; j <= 32; ++j) EXPECT_GE(plan.move_to[j], 0) << "boundary " << j;
  EXPECT_LT(plan.move_to[27], 0);  // just outside the +-2 radius
  EXPECT_LT(plan.move_to[33], 0);
}

TEST(TieredCache, BoundaryProtectionExpiresAfterTheHorizon) {
  auto c = small_config();
  c.boundary_horizon_ms = 300.0f;  // 30 frames
  tiered_cache<> cache(c);
  auto f = frames(0, 90);
  f[30].flags = frame_flag_phoneme_boundary;  // 59 frames old: expired
  f[70].flags = frame_flag_phoneme_boundary;  // 19 frames old: active
  cache.append(f.data(), 90);
  EXPECT_FALSE(cache.is_protected(30));
  EXPECT_TRUE(cache.is_protected(70));
  EXPECT_TRUE(cache.is_protected(72));
  EXPECT_FALSE(cache.is_protected(73));
}

/// Rewrites `plan` (an empty plan of `cache`, for its generation) to evict exactly `slot`, as a
/// page-granular or per-layer rewrite may evict a base-pool cell.
void evict_only(const tiered_cache<>& cache, eviction_plan& plan, std::int32_t slot) {
  cache.plan_to(cache.num_cells(), plan);
  plan.evict = {slot};
  for (std::int32_t c = 0; c < cache.num_cells(); ++c)
    plan.move_to[c] = c < slot ? c : c == slot ? -1 : c - 1;
  plan.n_kv_after = cache.num_cells() - 1;
  plan.promote.clear();
  plan.demote.clear();
}

TEST(TieredCache, BoundaryProtectsItsNeighbourhoodAfterItsFrameLeaves) {
  // F15 protects the frames within +-radius of a phoneme transition for the horizon: the
  // transition is a point of the stream, not a cached cell. Evicting the boundary's own frame
  // (a base-pool cell, which boundary protection does not cover, taken by a page-granular or
  // per-layer rewrite or as the base pool's weakest; a released protection; its emergency
  // pool's overflow) leaves its neighbours protected until the horizon passes.
  auto c = small_config();      // radius 2
  c.boundary_horizon_ms = 600;  // 60 frames
  tiered_cache<> cache(c);
  auto f = frames(0, 90);
  f[30].flags = frame_flag_phoneme_boundary;
  cache.append(f.data(), 90);
  eviction_plan plan;
  evict_only(cache, plan, 30);
  cache.apply(plan);
  // Positions 28, 29, 31, 32 sit in slots 28..31.
  for (std::int32_t slot = 28; slot <= 31; ++slot)
    EXPECT_TRUE(cache.is_protected(slot)) << "position " << cache.positions()[slot];
  EXPECT_FALSE(cache.is_protected(27));  // position 27: outside the +-2 radius
  EXPECT_FALSE(cache.is_protected(32));  // position 33

  // Plans keep them too: the neighbourhood and the newest look useless, down to 60 cells.
  std::vector<float> a(89, 1.0f);
  for (int j = 79; j < 89; ++j) a[j] = 0.0f;
  for (int j = 20; j < 40; ++j) a[j] = 0.0f;
  for (int step = 0; step < 5; ++step) cache.observe(a.data(), 89);
  cache.plan_to(60, plan);
  EXPECT_EQ(plan.protections_released, 0);
  for (std::int32_t slot = 28; slot <= 31; ++slot) EXPECT_GE(plan.move_to[slot], 0) << slot;
  EXPECT_LT(plan.move_to[27], 0);
  EXPECT_LT(plan.move_to[32], 0);
  cache.apply(plan);

  // The horizon still ends it: at newest position 90 the boundary is 60 frames old (active),
  // at 91 it has expired.
  const auto slot_of = [&](std::int32_t pos) {
    const std::int32_t* p = cache.positions();
    return static_cast<std::int32_t>(std::lower_bound(p, p + cache.num_cells(), pos) - p);
  };
  auto g = frames(90, 1);
  cache.append(g.data(), 1);
  EXPECT_TRUE(cache.is_protected(slot_of(29)));
  EXPECT_TRUE(cache.is_protected(slot_of(32)));
  g = frames(91, 1);
  cache.append(g.data(), 1);
  EXPECT_FALSE(cache.is_protected(slot_of(29)));
  EXPECT_FALSE(cache.is_protected(slot_of(32)));

  // reset() forgets it.
  cache.reset();
  cache.append(f.data(), 90);
  evict_only(cache, plan, 30);
  cache.apply(plan);
  EXPECT_TRUE(cache.is_protected(28));
  cache.reset();
  f[30].flags = frame_flag_none;
  cache.append(f.data(), 90);
  EXPECT_FALSE(cache.is_protected(28));
}

TEST(TieredCache, EmergencyOverflowEvictsOldestNonSinkFirst) {
  auto c = small_config();
  tiered_cache<> cache(c);
  auto f = frames(0, 90);
  f[0].flags = frame_flag_sink;
  for (int j = 1; j <= 12; ++j) f[j * 5].flags = frame_flag_critical;  // 13 emergency, cap 10
  cache.append(f.data(), 90);
  cache.observe(uniform(90).data(), 90);
  eviction_plan plan;
  cache.plan(plan);
  EXPECT_GE(plan.move_to[0], 0);  // the sink stays
  EXPECT_LT(plan.move_to[5], 0);  // the three oldest critical cells go
  EXPECT_LT(plan.move_to[10], 0);
  EXPECT_LT(plan.move_to[15], 0);
  EXPECT_GE(plan.move_to[20], 0);
  cache.apply(plan);
  EXPECT_EQ(cache.pool_size(pool_tier::emergency), 10);
  EXPECT_EQ(cache.stats().emergency_evictions, 3);
}

TEST(TieredCache, VoiceWeightingKeepsVoicedFramesOverSilence) {
  tiered_cache<> cache(small_config());
  auto f = frames(0, 90);
  for (int j = 0; j < 90; ++j) f[j].voice = (j / 10) % 2 == 0 ? 1.0f : 0.0f;
  cache.append(f.data(), 90);
  cache.observe(uniform(90).data(), 90);
  eviction_plan plan;
  cache.plan_to(55, plan);  // 35 of the 40 silent cells go, no voiced one
  for (std::int32_t slot : plan.evict) {
    if (slot < 85) {
      EXPECT_EQ(f[slot].voice, 0.0f) << "voiced cell " << slot << " evicted";
    }
  }
}

TEST(TieredCache, AdditivePriorsRescueFrames) {
  tiered_cache<> cache(small_config());
  auto f = frames(0, 90);
  f[3].prior = 10.0f;
  cache.append(f.data(), 90);
  std::vector<float> a(90, 1.0f);
  a[3] = 0.0f;
  for (int step = 0; step < 5; ++step) cache.observe(a.data(), 90);
  eviction_plan plan;
  cache.plan_to(20, plan);
  EXPECT_GE(plan.move_to[3], 0);
}

TEST(TieredCache, MultiplicativePriorsScaleScores) {
  auto c = small_config();
  c.prior = prior_mode::multiply;
  tiered_cache<> cache(c);
  auto f = frames(0, 90);
  f[40].prior = -1.0f;  // final *= 0: always the first to go
  cache.append(f.data(), 90);
  cache.observe(uniform(90).data(), 90);
  eviction_plan plan;
  cache.plan_to(89, plan);
  ASSERT_EQ(plan.evict.size(), 1u);
  EXPECT_EQ(plan.evict[0], 40);
}

TEST(TieredCache, SpeakerNormalisationProtectsTheQuietSpeaker) {
  auto c = small_config();
  c.num_speakers = 2;
  tiered_cache<> cache(c);
  auto f = frames(0, 90);
  for (int j = 0; j < 90; ++j) f[j].speaker = j < 45 ? 0 : 1;
  cache.append(f.data(), 90);
  std::vector<float> a(90);
  for (int j = 0; j < 90; ++j) a[j] = (j < 45 ? 10.0f : 1.0f) * (1.0f + 0.01f * (j % 7));
  for (int step = 0; step < 20; ++step) cache.observe(a.data(), 90);
  EXPECT_GT(cache.speaker_baselines()[0], 5.0f * cache.speaker_baselines()[1]);
  eviction_plan plan;
  cache.plan_to(45, plan);
  int quiet_evicted = 0;
  for (std::int32_t slot : plan.evict) quiet_evicted += slot >= 45;
  EXPECT_GT(quiet_evicted, 10);  // without normalisation all 45 would come from speaker 1
  EXPECT_LT(quiet_evicted, 35);
}

TEST(TieredCache, BurstOfRawScoresResetsBaselines) {
  tiered_cache<> cache(small_config());
  auto f = frames(0, 60);
  cache.append(f.data(), 60);
  std::vector<float> calm(60);
  for (int j = 0; j < 60; ++j) calm[j] = 0.01f + 0.002f * static_cast<float>(j % 3);
  for (int step = 0; step < 20; ++step) cache.observe(calm.data(), 60);
  EXPECT_EQ(cache.stats().drift_resets, 0);
  std::vector<float> burst = calm;
  for (int j = 50; j < 60; ++j) burst[j] = (j % 2) ? 0.5f : 0.0f;  // noise burst on the newest
  cache.observe(burst.data(), 60);
  EXPECT_EQ(cache.stats().drift_resets, 1);
  double mean = 0;
  for (int j = 0; j < 60; ++j) mean += cache.importance()[j];
  EXPECT_NEAR(cache.speaker_baselines()[0], mean / 60, 1e-6);
}

TEST(TieredCache, GroupObserveReducesQueryHeads) {
  auto make = [] {
    tiered_cache<> cache(small_config());
    auto f = frames(0, 3);
    cache.append(f.data(), 3);
    return cache;
  };
  const float group[] = {0.2f, 0.3f, 0.5f,   // query head 0
                         0.6f, 0.1f, 0.3f};  // query head 1
  auto mean_cache = make();
  mean_cache.observe_group(group, 2, 3, gqa_reduce::mean);
  EXPECT_FLOAT_EQ(mean_cache.importance()[0], 0.3f * 0.4f);
  auto max_cache = make();
  max_cache.observe_group(group, 2, 3, gqa_reduce::max);
  EXPECT_FLOAT_EQ(max_cache.importance()[1], 0.3f * 0.3f);
}

TEST(TieredCache, PlanToReachesExactTarget) {
  tiered_cache<> cache(small_config());
  auto f = frames(0, 80);
  cache.append(f.data(), 80);
  cache.observe(uniform(80).data(), 80);
  eviction_plan plan;
  cache.plan_to(32, plan);
  EXPECT_EQ(plan.n_kv_after, 32);
  EXPECT_EQ(plan.evict.size(), 48u);
  cache.apply(plan);
  EXPECT_EQ(cache.num_cells(), 32);
}

TEST(TieredCache, BoundaryProtectionYieldsOnlyWhenTargetDemandsIt) {
  auto c = small_config();
  c.boundary_radius = 10;
  c.split = {0.0f, 0.9f, 0.1f};  // no base pool to promote into: every cell awaits evaluation
  tiered_cache<> cache(c);
  auto f = frames(0, 80);
  for (int j = 5; j < 75; j += 10) f[j].flags = frame_flag_phoneme_boundary;
  cache.append(f.data(), 80);
  cache.observe(uniform(80).data(), 80);
  eviction_plan plan;
  cache.plan_to(40, plan);  // every non-recent cell is boundary-protected
  EXPECT_EQ(plan.n_kv_after, 40);
  EXPECT_EQ(plan.protections_released, 40);
  for (int j = 75; j < 80; ++j) EXPECT_GE(plan.move_to[j], 0);
}

TEST(TieredCache, ApplyRejectsStalePlans) {
  tiered_cache<> cache(small_config());
  auto f = frames(0, 90);
  cache.append(f.data(), 90);
  cache.observe(uniform(90).data(), 90);
  eviction_plan plan;
  cache.plan(plan);
  auto g = frames(90, 1);
  cache.append(g.data(), 1);
  EXPECT_THROW(cache.apply(plan), audiokv::error);
  EXPECT_EQ(cache.num_cells(), 91);
}

TEST(TieredCache, PlanMatchesCpuCompactionOfKv) {
  tiered_cache<> cache(small_config());
  auto f = frames(100, 90);
  cache.append(f.data(), 90);
  std::vector<float> a(90);
  for (int j = 0; j < 90; ++j) a[j] = static_cast<float>((j * 37) % 11);
  cache.observe(a.data(), 90);
  // K rows of 2 heads x 4 dims in [cells, heads, dim]; every value encodes its cell's position.
  std::vector<float> k(90 * 2 * 4);
  for (int j = 0; j < 90; ++j) {
    for (int e = 0; e < 8; ++e) k[j * 8 + e] = static_cast<float>(100 + j) + 0.125f * e;
  }
  eviction_plan plan;
  cache.plan(plan);
  cpu::compact_all_heads(kv_view<float>(k.data(), layout_nhd{{90, 2, 4}}), plan);
  cache.apply(plan);
  for (int j = 0; j < cache.num_cells(); ++j) {
    for (int e = 0; e < 8; ++e) {
      ASSERT_EQ(k[j * 8 + e], static_cast<float>(cache.positions()[j]) + 0.125f * e);
    }
  }
}

}  // namespace

namespace {

using namespace audiokv;

TEST(TieredCache, UnevaluatedCellsCompeteByPositionUnderLocalRank) {
  audiokv_config c;
  c.budget = 200;
  c.capacity = 200;
  c.voice_weight = 0.0f;
  c.evaluation_share = 4.0f;
  default_pipeline pipeline;
  pipeline.stage<2>().block = 4;
  tiered_cache<> cache(c, pipeline);
  auto f = test::frames(0, 200);
  cache.append(f.data(), 200);
  // Cells 0..19 were attended (the decoder's first words); the rest got noise only.
  std::vector<float> a(200);
  for (int j = 0; j < 200; ++j) a[j] = j < 20 ? 0.04f + 0.001f * (j % 3) : 1e-4f * (1 + j % 7);
  cache.observe(a.data(), 200);
  eviction_plan plan;
  cache.plan_to(80, plan);
  // Noise does not decide: every block of 4 unevaluated cells keeps 1 or 2 cells, so no gap
  // between kept cells is longer than 6.
  int gap = 0, longest = 0;
  for (int j = 0; j < 200; ++j) {
    gap = plan.move_to[j] < 0 ? gap + 1 : 0;
    longest = std::max(longest, gap);
  }
  EXPECT_LE(longest, 6);
  EXPECT_EQ(plan.n_kv_after, 80);
}

}  // namespace

namespace {

using namespace audiokv;

// is_protected() reads only the positions and flags (no scratch); positions here have gaps
// (every other one), as after evictions, so the boundary search must go by position, not
// by slot. Expected set worked out by hand from the rules of is_protected().
TEST(TieredCache, IsProtectedFollowsPositionsNotSlots) {
  audiokv_config c;
  c.budget = 100;
  c.min_retention_ms = 50.0f;  // recent window: 5 frames of 10 ms
  c.boundary_radius = 2;       // positions p - 2 .. p + 2 around a boundary at p
  tiered_cache<> cache(c);     // boundary horizon 1000 ms = 100 frames
  std::vector<frame_meta> f(90);
  for (int s = 0; s < 90; ++s) f[s] = frame_meta{2 * s, 0, 1.0f, frame_flag_none, 0.0f};
  f[3].flags = frame_flag_sink;               // always kept (and in the emergency pool)
  f[5].flags = frame_flag_segment_start;      // emergency pool
  f[10].flags = frame_flag_phoneme_boundary;  // pos 20: older than newest 178 - 100: expired
  f[39].flags = frame_flag_phoneme_boundary;  // pos 78 = 178 - 100: still active
  f[50].flags = frame_flag_phoneme_boundary;  // pos 100: active
  cache.append(f.data(), 90);
  // Window: positions >= 178 - 5 + 1 = 174, i.e. slots 87..89. Boundary 78 covers 76..80
  // (slots 38..40), boundary 100 covers 98..102 (slots 49..51).
  const std::vector<int> expected = {3, 5, 38, 39, 40, 49, 50, 51, 87, 88, 89};
  std::vector<int> got;
  for (int s = 0; s < 90; ++s) {
    if (cache.is_protected(s)) got.push_back(s);
  }
  EXPECT_EQ(got, expected);
}

}  // namespace

namespace {

using namespace audiokv;

// Every field a plan carries except its scratch; scores by their bits.
void expect_same_plan(const eviction_plan& a, const eviction_plan& b, std::size_t head) {
  EXPECT_EQ(a.evict, b.evict) << "head " << head;
  EXPECT_EQ(a.move_to, b.move_to) << "head " << head;
  EXPECT_EQ(a.promote, b.promote) << "head " << head;
  EXPECT_EQ(a.demote, b.demote) << "head " << head;
  ASSERT_EQ(a.scores.size(), b.scores.size()) << "head " << head;
  EXPECT_TRUE(a.scores.empty() ||
              std::memcmp(a.scores.data(), b.scores.data(), a.scores.size() * sizeof(float)) == 0)
      << "head " << head;
  EXPECT_EQ(a.n_kv_before, b.n_kv_before) << "head " << head;
  EXPECT_EQ(a.n_kv_after, b.n_kv_after) << "head " << head;
  EXPECT_EQ(std::memcmp(&a.ratio, &b.ratio, sizeof(float)), 0) << "head " << head;
  EXPECT_EQ(std::memcmp(&a.normalized_entropy, &b.normalized_entropy, sizeof(float)), 0)
      << "head " << head;
  EXPECT_EQ(a.protections_released, b.protections_released) << "head " << head;
  EXPECT_EQ(a.generation, b.generation) << "head " << head;
  EXPECT_EQ(a.cache_id, b.cache_id) << "head " << head;
}

// Eleven caches of one layer (two planning groups), each with its own attention and history:
// different cell counts at the trigger and past it, one below the trigger, one listed twice,
// one with other trend parameters, one with an evaluation share, one with text cells left
// unsmoothed (the default) and one with text cells smoothed. plan_heads() must write what plan()
// of each writes.
TEST(TieredCache, PlanningALayersHeadsTogetherGivesEachHeadsOwnPlan) {
  audiokv_config config;  // defaults: speech rules on
  config.budget = 400;
  default_pipeline other_trend;
  other_trend.stage<1>().slope_gain = 0.45f;
  std::vector<tiered_cache<>> caches;
  for (int h = 0; h < 10; ++h) {
    audiokv_config c = config;
    if (h == 6) c.evaluation_share = 0.5f;
    if (h == 5) c.smooth_text = true;
    if (h == 7) c.smooth_text = false;
    caches.emplace_back(c, h == 4 ? other_trend : default_pipeline{});
  }
  std::uint32_t seed = 99;
  const auto next = [&] {
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    return static_cast<float>(seed >> 8) * (1.0f / 16777216.0f);
  };
  for (int h = 0; h < 10; ++h) {
    tiered_cache<>& cache = caches[h];
    std::int32_t pos = 0;
    // Two evictions, then fill to the trigger plus h cells (head 9: stays below it).
    for (int evictions = 0; evictions < 2;) {
      auto f = frames(pos, 7);
      for (auto& fr : f) {
        fr.flags = fr.pos % 13 == 0 ? frame_flag_phoneme_boundary : 0;
        if ((h == 5 || h == 7) && fr.pos % 3 != 0) fr.flags = frame_flag_text;
      }
      cache.append(f.data(), 7);
      pos += 7;
      std::vector<float> a(cache.num_cells());
      for (float& v : a) v = next() * next();
      cache.observe(a.data(), cache.num_cells());
      if (cache.wants_eviction()) {
        eviction_plan p;
        cache.plan(p);
        cache.apply(p);
        ++evictions;
      }
    }
    const std::int32_t fill = h == 9 ? cache.trigger_cells() - 5 : cache.trigger_cells() + h;
    while (cache.num_cells() < fill) {
      auto f = frames(pos++, 1);
      cache.append(f.data(), 1);
    }
    std::vector<float> a(cache.num_cells());
    for (float& v : a) v = next();
    cache.observe(a.data(), cache.num_cells());
  }
  std::vector<const tiered_cache<>*> heads;
  for (const auto& cache : caches) heads.push_back(&cache);
  heads.push_back(&caches[2]);
  std::vector<eviction_plan> together(heads.size());
  tiered_cache<>::plan_heads(heads, together);
  for (std::size_t i = 0; i < heads.size(); ++i) {
    eviction_plan alone;
    heads[i]->plan(alone);
    EXPECT_EQ(alone.empty(), i == 9) << "head " << i;
    expect_same_plan(together[i], alone, i);
  }
  for (std::size_t i = 0; i < caches.size(); ++i) caches[i].apply(together[i]);
}

std::vector<std::byte> state_of(const tiered_cache<>& cache) {
  std::vector<std::byte> bytes(cache.snapshot_size());
  cache.snapshot(bytes);
  return bytes;
}

// Eleven KV heads (two passes of core::trend_lanes) of different lengths, one to three speakers
// (with runs of one speaker), one with an evaluation share, and bursts of attention that fire
// the drift detector. observe_heads() on one set must leave each cache as observe() leaves its
// twin: the whole snapshot (importance, flags, baselines, drift state, stats) and the plans.
TEST(TieredCache, ObservingALayersHeadsTogetherEqualsObservingEachHead) {
  constexpr int heads = 11;
  std::vector<tiered_cache<>> together, alone;
  for (int h = 0; h < heads; ++h) {
    audiokv_config c;
    c.budget = 700;
    c.num_speakers = 1 + h % 3;
    if (h == 5) c.evaluation_share = 0.5f;
    together.emplace_back(c);
    alone.emplace_back(c);
  }
  std::uint32_t seed = 7;
  const auto next = [&] {
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    return static_cast<float>(seed >> 8) * (1.0f / 16777216.0f);
  };
  std::vector<std::int32_t> pos(heads, 0);
  std::int64_t resets = 0;
  for (int step = 0; step < 40; ++step) {
    std::vector<std::vector<float>> rows(heads);
    for (int h = 0; h < heads; ++h) {
      // Head h grows by 5 + 3h cells a step: lengths differ, blocks end at different cells.
      const std::int32_t count = 5 + 3 * h;
      auto f = frames(pos[h], count);
      for (auto& fr : f) {
        fr.speaker = (fr.pos / 37) % (1 + h % 3);
        fr.flags = fr.pos % 29 == 0 ? frame_flag_phoneme_boundary : 0;
      }
      pos[h] += count;
      together[h].append(f.data(), count);
      alone[h].append(f.data(), count);
      rows[h].resize(together[h].num_cells());
      const float burst = step % 9 == 8 ? 50.0f : 1.0f;
      for (float& v : rows[h]) v = next() * next() * (next() < 0.1f ? burst : 1.0f);
    }
    std::vector<tiered_cache<>*> layer;
    std::vector<span<const float>> attention;
    for (int h = 0; h < heads; ++h) {
      layer.push_back(&together[h]);
      attention.emplace_back(rows[h]);
      alone[h].observe(rows[h].data(), alone[h].num_cells());
    }
    tiered_cache<>::observe_heads(layer, attention);
    for (int h = 0; h < heads; ++h) {
      ASSERT_EQ(state_of(together[h]), state_of(alone[h])) << "head " << h << " step " << step;
      if (!together[h].wants_eviction()) continue;
      eviction_plan a, b;
      together[h].plan(a);
      alone[h].plan(b);
      eviction_plan b_as_a = b;  // the plans differ only in the id of the cache that made them
      b_as_a.cache_id = a.cache_id;
      expect_same_plan(a, b_as_a, h);
      together[h].apply(a);
      alone[h].apply(b);
    }
  }
  for (const auto& cache : together) resets += cache.stats().drift_resets;
  EXPECT_GT(resets, 0) << "no drift reset: the bursts must exercise the reset path";
  EXPECT_GT(together[10].stats().evictions, 0);
}

TEST(TieredCache, ObserveHeadsChecksEveryHeadBeforeChangingAny) {
  audiokv_config c;
  c.budget = 400;
  tiered_cache<> first(c), second(c);
  auto f = frames(0, 300);
  first.append(f.data(), 300);
  second.append(f.data(), 200);
  std::vector<float> a(300, 1.0f / 300), b(200, 1.0f / 200);
  const auto before_first = state_of(first), before_second = state_of(second);
  std::vector<tiered_cache<>*> layer{&first, &second};
  const auto expect_throws = [&](std::vector<span<const float>> attention, const char* argument) {
    try {
      tiered_cache<>::observe_heads(layer, attention);
      ADD_FAILURE() << "accepted a bad " << argument;
    } catch (const audiokv::error& e) {
      EXPECT_EQ(e.argument(), argument);
    }
    EXPECT_EQ(state_of(first), before_first) << argument;
    EXPECT_EQ(state_of(second), before_second) << argument;
  };
  expect_throws({a}, "attention.size()");
  expect_throws({a, a}, "attention[1].size()");
  expect_throws({a, span<const float>(nullptr, 200)}, "attention[1]");
  b[157] = -1.0f;  // the second head's score; the first head's row is valid
  expect_throws({a, b}, "attention[1][157]");
  b[157] = std::numeric_limits<float>::quiet_NaN();
  expect_throws({a, b}, "attention[1][157]");
  b[157] = 0.0f;
  a[299] = std::numeric_limits<float>::infinity();
  expect_throws({a, b}, "attention[0][299]");
  a[299] = 0.0f;
  layer = {&first, nullptr};
  expect_throws({a, b}, "caches[1]");
  layer = {&first, &first};
  expect_throws({a, a}, "caches[1]");
  layer = {&first, &second};
  tiered_cache<>::observe_heads(layer, std::vector<span<const float>>{a, b});
  EXPECT_NE(state_of(first), before_first);
  EXPECT_EQ(first.stats().steps, 1);
  EXPECT_EQ(second.stats().steps, 1);
}

TEST(TieredCache, PlanHeadsChecksItsArgumentsBeforeWritingAPlan) {
  tiered_cache<> cache(small_config());
  auto f = frames(0, 95);
  cache.append(f.data(), 95);
  const std::vector<float> a = uniform(95);
  cache.observe(a.data(), 95);
  std::vector<const tiered_cache<>*> heads{&cache, &cache};
  std::vector<eviction_plan> plans(1);
  try {
    tiered_cache<>::plan_heads(heads, plans);
    FAIL() << "accepted one plan for two caches";
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "plans.size()");
  }
  EXPECT_TRUE(plans[0].move_to.empty());
  heads = {&cache, nullptr};
  plans.resize(2);
  try {
    tiered_cache<>::plan_heads(heads, plans);
    FAIL() << "accepted a null cache";
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "caches[1]");
  }
  EXPECT_TRUE(plans[0].move_to.empty());
}

// Text cells in the text window (ceil(text_recent_share x budget) positions) are kept like the
// recent window: protected_cells() and is_protected() count them, and plan_to(0) stops there;
// audio cells in the same span are not kept.
TEST(TieredCache, TextWindowKeepsTheNewestTextCells) {
  audiokv_config c;
  c.budget = 64;
  c.capacity = 100;
  c.text_recent_share = 0.5f;
  ASSERT_EQ(c.text_recent_cells(), 32);
  ASSERT_EQ(c.recent_window_frames(), 20);
  c.text_recent_share = 1.0f;  // capped by the room below the trigger: 58 - 1 - 6
  EXPECT_EQ(c.text_recent_cells(), 51);
  c.text_recent_share = 0.0f;  // the recent window
  EXPECT_EQ(c.text_recent_cells(), 20);
  c.text_recent_share = 0.5f;
  for (const bool text : {true, false}) {
    tiered_cache<> cache(c);
    std::vector<frame_meta> f = frames(0, 50);
    if (text) {
      for (auto& fr : f) fr.flags = frame_flag_text;
    }
    cache.append(f.data(), 50);
    const std::vector<float> a = uniform(50);
    cache.observe(a.data(), 50);
    const std::int32_t kept = text ? 32 : 20;
    EXPECT_EQ(cache.protected_cells(), kept) << text;
    for (std::int32_t j = 0; j < 50; ++j)
      EXPECT_EQ(cache.is_protected(j), j >= 50 - kept) << text << " cell " << j;
    eviction_plan plan;
    cache.plan_to(0, plan);
    EXPECT_EQ(plan.n_kv_after, kept) << text;
    for (std::int32_t j = 0; j < 50; ++j) EXPECT_EQ(plan.move_to[j] >= 0, j >= 50 - kept) << j;
  }
}

TEST(TieredCache, TextRecentShareOutsideZeroToOneRejected) {
  for (const float share : {-0.1f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    audiokv_config c = small_config();
    c.text_recent_share = share;
    try {
      tiered_cache<> cache(c);
      FAIL() << "accepted text_recent_share " << share;
    } catch (const audiokv::error& e) {
      EXPECT_EQ(e.argument(), "config.text_recent_share");
    }
  }
}

}  // namespace
