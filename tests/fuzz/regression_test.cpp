// SPDX-License-Identifier: Apache-2.0
// Regression tests of library defects the fuzzers found whose tests have no other home
// (tests/fuzz/README.md lists every defect with its reproducer in crashes/<target>/).
#include <gtest/gtest.h>

#include <audiokv/policy/audiokv/tiered_cache.hpp>
#include <cstdint>
#include <vector>

namespace {

using namespace audiokv;

/// Budget 100 (emergency pool floor(0.1 * 100) = 10 cells, recent window 20 frames of 10 ms):
/// 15 segment starts at positions 0..14 put the emergency pool 5 cells over its share, then 30
/// ordinary frames push them all out of the recent window. 45 cells, none observed.
tiered_cache<> over_full_emergency_pool() {
  audiokv_config c;
  c.budget = 100;
  tiered_cache<> cache(c);
  std::vector<frame_meta> frames(45);
  for (std::int32_t i = 0; i < 45; ++i) {
    frames[i] = frame_meta{i, 0, 1.0f, i < 15 ? frame_flag_segment_start : frame_flag_none, 0.0f};
  }
  cache.append(frames.data(), 45);
  return cache;
}

std::vector<std::int32_t> evicted_positions(const tiered_cache<>& cache, const eviction_plan& p) {
  std::vector<std::int32_t> out;
  for (const std::int32_t slot : p.evict) out.push_back(cache.positions()[slot]);
  return out;
}

// Defect 8: plan_to(target) evicted the whole emergency overflow even when the target needed
// fewer cells, ending below its target (plan_to(44) on 45 cells left 40). An explicit target
// is exact: min(num_cells, target) cells remain, the overflow going oldest first only as far
// as the target needs, and an overflow smaller than the need is topped up from the buffer.
TEST(FuzzRegression, PlanToStopsEmergencyOverflowAtItsTarget) {
  tiered_cache<> cache = over_full_emergency_pool();
  ASSERT_EQ(cache.pool_size(pool_tier::emergency), 15);
  eviction_plan plan;

  cache.plan_to(44, plan);
  EXPECT_EQ(plan.n_kv_after, 44);
  EXPECT_EQ(evicted_positions(cache, plan), (std::vector<std::int32_t>{0}));

  cache.plan_to(42, plan);
  EXPECT_EQ(plan.n_kv_after, 42);
  EXPECT_EQ(evicted_positions(cache, plan), (std::vector<std::int32_t>{0, 1, 2}));

  cache.plan_to(38, plan);  // 7 cells: the 5 overflow cells and 2 buffer cells
  EXPECT_EQ(plan.n_kv_after, 38);
  const auto gone = evicted_positions(cache, plan);
  ASSERT_EQ(gone.size(), 7u);
  EXPECT_EQ(std::vector<std::int32_t>(gone.begin(), gone.begin() + 5),
            (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
  for (std::size_t i = 5; i < gone.size(); ++i) EXPECT_GE(gone[i], 15) << i;

  cache.plan_to(44, plan);
  cache.apply(plan);
  EXPECT_EQ(cache.num_cells(), 44);
  EXPECT_EQ(cache.pool_size(pool_tier::emergency), 14);
  EXPECT_EQ(cache.stats().emergency_evictions, 1);
}

// Defect C: a tiny frame_ms turned the speech rules' millisecond spans (lookback_ms,
// segment_ms) into more frames than an integer holds, and planning converted them unchecked
// (float-cast overflow, reproducer crashes/policy_fuzzer/speech_rules_ms_overflow). The
// configuration is now rejected, naming the span, before any cache exists.
TEST(FuzzRegression, SpeechRuleSpansBeyondTheFrameRangeAreRejected) {
  audiokv_config c;
  c.budget = 100;
  c.min_retention_ms = 0.0f;
  c.boundary_horizon_ms = 0.0f;
  c.frame_ms = 1e-30f;  // 1000 ms = 1e33 frames
  try {
    tiered_cache<> cache(c);
    FAIL() << "a lookback of 1e33 frames was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "config.speech.frontier.lookback_ms");
  }
  c.speech.frontier.enabled = false;
  try {
    tiered_cache<> cache(c);
    FAIL() << "a coverage segment of 1e33 frames was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "config.speech.coverage.segment_ms");
  }
  c.speech.coverage.enabled = false;
  EXPECT_NO_THROW(tiered_cache<> cache(c));  // rules off: their spans are never converted
}

}  // namespace
