// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;
using test::frames;

audiokv_config valid_config() {
  audiokv_config c;
  c.budget = 100;
  c.num_speakers = 2;
  return c;
}

void expect_config_error(const std::function<void(audiokv_config&)>& mutate,
                         const std::string& argument) {
  audiokv_config c = valid_config();
  mutate(c);
  try {
    tiered_cache<> cache(c);
    FAIL() << "accepted invalid " << argument;
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(argument), std::string::npos) << e.what();
  }
}

TEST(Validation, EveryConfigFieldIsChecked) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_config_error([](auto& c) { c.budget = 0; }, "config.budget");
  expect_config_error([](auto& c) { c.capacity = 50; }, "config.capacity");
  expect_config_error([](auto& c) { c.split.base = 0.7f; },
                      "split.base + split.buffer + split.emergency");
  expect_config_error([](auto& c) { c.split.buffer = -0.1f; }, "split.buffer");
  expect_config_error([nan](auto& c) { c.split.emergency = nan; }, "split.emergency");
  expect_config_error([](auto& c) { c.trigger = 1.5f; }, "config.trigger");
  expect_config_error([](auto& c) { c.alpha = 0.0f; }, "config.alpha");
  expect_config_error([](auto& c) { c.base_rate = -0.1f; }, "config.base_rate");
  expect_config_error([nan](auto& c) { c.lambda = nan; }, "config.lambda");
  expect_config_error([](auto& c) { c.voice_weight = -1.0f; }, "config.voice_weight");
  expect_config_error([](auto& c) { c.boundary_radius = -1; }, "config.boundary_radius");
  expect_config_error([](auto& c) { c.frame_ms = 0.0f; }, "config.frame_ms");
  expect_config_error([](auto& c) { c.min_retention_ms = -5.0f; }, "config.min_retention_ms");
  expect_config_error([](auto& c) { c.num_speakers = 0; }, "config.num_speakers");
  expect_config_error([](auto& c) { c.baseline_rate = 2.0f; }, "config.baseline_rate");
  expect_config_error([](auto& c) { c.drift_window = 1; }, "config.drift_window");
  expect_config_error([](auto& c) { c.drift_factor = 0.0f; }, "config.drift_factor");
  // Budget smaller than the protected set: 200 ms of 10 ms frames + 1 emergency cell >= 18.
  expect_config_error([](auto& c) { c.budget = 20; }, "config.budget");
}

/// Snapshot of everything observable, to prove failed calls change nothing.
struct snapshot {
  std::vector<std::int32_t> pos;
  std::vector<float> importance;
  std::vector<pool_tier> tiers;
  audiokv_stats stats;
  bool operator==(const snapshot& o) const {
    return pos == o.pos && importance == o.importance && tiers == o.tiers &&
           stats.steps == o.stats.steps && stats.cells_evicted == o.stats.cells_evicted;
  }
};

snapshot take(const tiered_cache<>& c) {
  const auto n = c.num_cells();
  return {std::vector<std::int32_t>(c.positions(), c.positions() + n),
          std::vector<float>(c.importance(), c.importance() + n),
          std::vector<pool_tier>(c.tiers(), c.tiers() + n), c.stats()};
}

class FailedCalls : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = frames(0, 50);
    cache.append(f.data(), 50);
    std::vector<float> a(50, 0.02f);
    cache.observe(a.data(), 50);
    before = take(cache);
  }
  void expect_rejected(const std::function<void()>& call, const std::string& argument) {
    try {
      call();
      FAIL() << "accepted bad " << argument;
    } catch (const audiokv::error& e) {
      EXPECT_EQ(e.argument(), argument) << e.what();
    }
    EXPECT_TRUE(take(cache) == before) << "state changed by a failed call on " << argument;
  }
  tiered_cache<> cache{valid_config()};
  snapshot before;
};

TEST_F(FailedCalls, NanAndInfAndNegativeScores) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity(), -0.5f}) {
    std::vector<float> a(50, 0.02f);
    a[17] = bad;
    expect_rejected([&] { cache.observe(a.data(), 50); }, "attention[17]");
  }
}

TEST_F(FailedCalls, ShapeMismatch) {
  std::vector<float> a(49, 0.02f);
  expect_rejected([&] { cache.observe(a.data(), 49); }, "num_cells");
  expect_rejected([&] { cache.observe(nullptr, 50); }, "attention");
  std::vector<float> g(100, 0.01f);
  expect_rejected([&] { cache.observe_group(g.data(), 0, 50); }, "group_size");
}

TEST_F(FailedCalls, UnknownSpeakerOutOfOrderAndBadVoice) {
  auto f = frames(50, 3);
  f[2].speaker = 2;
  expect_rejected([&] { cache.append(f.data(), 3); }, "frames[2].speaker");
  auto g = frames(49, 1);
  expect_rejected([&] { cache.append(g.data(), 1); }, "frames[0].pos");
  auto h = frames(50, 2);
  h[1].pos = 50;
  expect_rejected([&] { cache.append(h.data(), 2); }, "frames[1].pos");
  auto v = frames(50, 1);
  v[0].voice = 2.0f;
  expect_rejected([&] { cache.append(v.data(), 1); }, "frames[0].voice");
  v[0].voice = 1.0f;
  v[0].prior = std::numeric_limits<float>::quiet_NaN();
  expect_rejected([&] { cache.append(v.data(), 1); }, "frames[0].prior");
  expect_rejected([&] { cache.append(v.data(), -1); }, "count");
}

TEST_F(FailedCalls, CapacityAndSinks) {
  auto f = frames(50, 51);
  expect_rejected([&] { cache.append(f.data(), 51); }, "count");
  auto s = frames(50, 11);
  for (auto& fr : s) fr.flags = frame_flag_sink;
  expect_rejected([&] { cache.append(s.data(), 11); }, "frames[10].flags");
}

TEST_F(FailedCalls, TargetsBelowTheProtectedSetAndStalePlans) {
  eviction_plan plan;
  expect_rejected([&] { cache.plan_to(-1, plan); }, "target_cells");
  expect_rejected([&] { cache.plan_to(5, plan); }, "target_cells");  // 20 recent frames protected
  cache.plan_to(40, plan);
  plan.move_to[3] = 7;
  expect_rejected([&] { cache.apply(plan); }, "plan.move_to[3]");
  cache.plan_to(40, plan);
  plan.generation += 1;
  expect_rejected([&] { cache.apply(plan); }, "plan.generation");
}

TEST(Validation, CompactRejectsMismatchedViews) {
  std::vector<float> k(10 * 2 * 4);
  eviction_plan plan;
  plan.n_kv_before = 11;
  plan.move_to.assign(11, 0);
  EXPECT_THROW(cpu::compact(kv_view<float>(k.data(), layout_nhd{{10, 2, 4}}), 0, plan),
               audiokv::error);
  plan.n_kv_before = 10;
  plan.move_to.assign(10, 0);
  EXPECT_THROW(cpu::compact(kv_view<float>(k.data(), layout_nhd{{10, 2, 4}}), 2, plan),
               audiokv::error);
}

}  // namespace

namespace {

using namespace audiokv;

// Regressions for the defects tests/fuzz found (tests/fuzz/README.md, "Known defects").
TEST_F(FailedCalls, TamperedEvictListsAndTierChanges) {
  eviction_plan plan;
  cache.plan_to(40, plan);
  plan.evict.push_back(1000);  // defect 3: out-of-range slot in evict
  expect_rejected([&] { cache.apply(plan); }, "plan.evict.size()");
  cache.plan_to(40, plan);
  plan.evict[0] = -1;
  expect_rejected([&] { cache.apply(plan); }, "plan.evict[0]");
}

TEST(Validation, PromotingAnEmergencyCellIsRejected) {  // defect 5
  audiokv_config c;
  c.budget = 100;
  tiered_cache<> cache(c);
  auto f = test::frames(0, 50);
  f[3].flags = frame_flag_segment_start;
  cache.append(f.data(), 50);
  eviction_plan plan;
  cache.plan_to(40, plan);
  plan.promote.push_back(3);
  try {
    cache.apply(plan);
    FAIL() << "promoted an emergency cell";
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "plan.promote");
  }
  EXPECT_EQ(cache.tiers()[3], pool_tier::emergency);
}

TEST(Validation, CompactRejectsUnstableMoveMaps) {  // defect 1
  std::vector<float> k(4 * 2);
  eviction_plan plan;
  plan.n_kv_before = 4;
  plan.move_to = {0, -1, 1, 1000};
  try {
    cpu::compact(kv_view<float, layout_hnd>(k.data(), layout_hnd{{4, 1, 2}}), 0, plan);
    FAIL() << "accepted move_to[3] = 1000";
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "plan.move_to[3]");
  }
}

TEST(Validation, DurationsSpanningTooManyFramesAreRejected) {  // defect 2
  audiokv_config c;
  c.budget = 100;
  c.min_retention_ms = 1e30f;
  EXPECT_THROW(c.validate(), audiokv::error);
  c.min_retention_ms = 200.0f;
  c.frame_ms = 1e-40f;  // denormal
  EXPECT_THROW(c.validate(), audiokv::error);
}

TEST(Validation, ExtremeFiniteInputsKeepPlansDefined) {  // defect 7
  audiokv_config c;
  c.budget = 100;
  c.prior = prior_mode::multiply;
  tiered_cache<> cache(c);
  auto f = test::frames(0, 95);
  for (int j = 0; j < 95; j += 3) f[j].prior = 3e38f;
  cache.append(f.data(), 90);
  std::vector<float> a(90, 0.5f);
  cache.observe(a.data(), 90);
  eviction_plan plan;
  cache.plan(plan);
  EXPECT_GE(plan.ratio, 0.0f);
  EXPECT_LE(plan.ratio, 1.0f);
  EXPECT_LT(plan.n_kv_after, cache.trigger_cells());
}

TEST(Validation, EmptyPlansResetReleasedProtections) {  // defect 6
  audiokv_config c;
  c.budget = 100;
  c.boundary_radius = 10;
  c.split = {0.0f, 0.9f, 0.1f};
  tiered_cache<> cache(c);
  auto f = test::frames(0, 80);
  for (int j = 5; j < 75; j += 10) f[j].flags = frame_flag_phoneme_boundary;
  cache.append(f.data(), 80);
  eviction_plan plan;
  cache.plan_to(40, plan);
  ASSERT_GT(plan.protections_released, 0);
  cache.apply(plan);
  const auto released = cache.stats().protections_released;
  cache.plan(plan);  // below the trigger: empty
  EXPECT_EQ(plan.protections_released, 0);
  cache.apply(plan);
  EXPECT_EQ(cache.stats().protections_released, released);
}

}  // namespace
