// SPDX-License-Identifier: Apache-2.0
// Const calls of one tiered_cache from several threads at once: plans into distinct
// eviction_plans, and readers (is_protected, num_cells, positions, tiers) beside a planner.
// Worker threads only record; the main thread asserts after join(), so GoogleTest itself is
// never used concurrently. Run under the tsan preset, any write from a const call is a
// reported data race (the test then fails with ThreadSanitizer's exit code).
#include <gtest/gtest.h>

#include <atomic>
#include <audiokv/audiokv.hpp>
#include <cstdint>
#include <thread>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;

audiokv_config threading_config() {
  audiokv_config c;
  c.budget = 400;
  c.num_speakers = 2;
  c.boundary_radius = 3;
  return c;
}

/// A cache fed `frames` frames of the synthetic speech stream, planning and applying whenever
/// the trigger fires, so it holds base, buffer and emergency cells and phoneme boundaries.
void feed(tiered_cache<>& cache, test::speech_stream& stream, std::int64_t frames) {
  std::vector<float> attention;
  eviction_plan plan;
  for (std::int64_t step = 0; step < frames; ++step) {
    const frame_meta f = stream.next_frame();
    cache.append(&f, 1);
    stream.attention(cache.positions(), cache.num_cells(), attention);
    cache.observe(attention.data(), cache.num_cells());
    if (cache.wants_eviction()) {
      cache.plan(plan);
      cache.apply(plan);
    }
  }
}

bool same_plan(const eviction_plan& a, const eviction_plan& b) {
  return a.move_to == b.move_to && a.evict == b.evict && a.promote == b.promote &&
         a.demote == b.demote && a.scores == b.scores && a.n_kv_after == b.n_kv_after &&
         a.ratio == b.ratio && a.protections_released == b.protections_released &&
         a.generation == b.generation && a.cache_id == b.cache_id;
}

/// Brings the cache to its trigger level (the next plan() evicts).
void fill_to_trigger(tiered_cache<>& cache, test::speech_stream& stream) {
  std::vector<float> attention;
  while (!cache.wants_eviction()) {
    const frame_meta f = stream.next_frame();
    cache.append(&f, 1);
    stream.attention(cache.positions(), cache.num_cells(), attention);
    cache.observe(attention.data(), cache.num_cells());
  }
}

TEST(Threading, TwoThreadsPlanConcurrentlyOnOneCache) {
  tiered_cache<> cache(threading_config());
  test::speech_stream stream(11, 2);
  feed(cache, stream, 2000);
  constexpr int kRounds = 6, kPlansPerThread = 20;
  for (int round = 0; round < kRounds; ++round) {
    fill_to_trigger(cache, stream);
    // Sequential references, made before any thread starts.
    eviction_plan by_trigger, by_target;
    cache.plan(by_trigger);
    const std::int32_t target = cache.num_cells() / 2;
    cache.plan_to(target, by_target);
    ASSERT_FALSE(by_trigger.empty());
    ASSERT_EQ(by_target.n_kv_after, target);

    std::atomic<int> mismatches{0};
    std::atomic<bool> go{false};
    auto planner = [&](bool explicit_target) {
      eviction_plan plan;
      plan.reserve(cache.capacity());
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kPlansPerThread; ++i) {
        // Alternate the two kinds so both threads run the whole planning path at once.
        const bool to_target = (i % 2 == 0) == explicit_target;
        if (to_target) {
          cache.plan_to(target, plan);
        } else {
          cache.plan(plan);
        }
        if (!same_plan(plan, to_target ? by_target : by_trigger)) ++mismatches;
      }
    };
    std::thread a(planner, true), b(planner, false);
    go.store(true);
    a.join();
    b.join();
    EXPECT_EQ(mismatches.load(), 0) << "round " << round;
    cache.apply(by_trigger);  // exclusive again: the decode thread commits one plan
  }
}

TEST(Threading, ReadersRunWhileAnotherThreadPlans) {
  auto c = threading_config();
  c.boundary_horizon_ms = 5000.0f;  // boundaries protect for longer: more boundary cells
  tiered_cache<> cache(c);
  test::speech_stream stream(5, 2);
  feed(cache, stream, 3000);
  fill_to_trigger(cache, stream);
  const std::int32_t n = cache.num_cells();
  // What the readers must see, computed before the threads start.
  std::vector<std::uint8_t> protected_before(n);
  std::int32_t protected_count = 0;
  for (std::int32_t j = 0; j < n; ++j) {
    protected_before[j] = cache.is_protected(j);
    protected_count += protected_before[j];
  }
  ASSERT_GT(protected_count, 0);
  ASSERT_LT(protected_count, n);
  const std::vector<std::int32_t> positions(cache.positions(), cache.positions() + n);
  const std::vector<pool_tier> tiers(cache.tiers(), cache.tiers() + n);
  eviction_plan reference;
  cache.plan(reference);

  std::atomic<bool> planning_done{false};
  std::atomic<int> plan_mismatches{0}, read_mismatches{0};
  std::thread planner([&] {
    eviction_plan plan;
    plan.reserve(cache.capacity());
    for (int i = 0; i < 30; ++i) {
      cache.plan(plan);
      if (!same_plan(plan, reference)) ++plan_mismatches;
    }
    planning_done.store(true);
  });
  std::thread reader([&] {
    int sweeps = 0;
    // At least two full sweeps, and keep reading until the planner is done.
    while (sweeps < 2 || !planning_done.load()) {
      bool ok = cache.num_cells() == n;
      for (std::int32_t j = 0; j < n && ok; ++j) {
        ok = cache.is_protected(j) == static_cast<bool>(protected_before[j]) &&
             cache.positions()[j] == positions[j] && cache.tiers()[j] == tiers[j];
      }
      if (!ok) ++read_mismatches;
      ++sweeps;
    }
  });
  planner.join();
  reader.join();
  EXPECT_EQ(plan_mismatches.load(), 0);
  EXPECT_EQ(read_mismatches.load(), 0);
  cache.apply(reference);
  EXPECT_EQ(cache.num_cells(), reference.n_kv_after);
}

}  // namespace
