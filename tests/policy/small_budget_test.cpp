// SPDX-License-Identifier: Apache-2.0
// Small budgets: a configuration the constructor accepts never throws from plan()/plan_to()/
// append() later because of its budget. Short clips at low retention give budgets of a few
// cells; the default 200 ms recent window used to make them either rejected at construction
// or, through a streaming host's plan_to(budget - chunk), throw mid-stream ("target_cells = 1
// is below the 10 cells no plan may evict"). The window now shrinks to fit
// (audiokv_config::shrink_recent_window) and plan_to() stops at the protected cells.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/protection_oracle.hpp"
#include "common/stream.hpp"
#include "common/xorshift.hpp"

namespace {

using namespace audiokv;

/// What a stream did, for the test's own assertions that it exercised something.
struct stream_report {
  std::int64_t plans = 0, targets = 0, short_targets = 0, evicted = 0, released = 0;
  test::protection_report protection;
  /// Boundary-protected buffer cells (by the cache's is_protected()) a plan evicted beyond
  /// its protections_released. The oracle's own boundary count is not used: it keeps a
  /// boundary protecting its neighbours after the boundary frame itself was evicted, where
  /// the cache protects around the boundaries it holds.
  std::int64_t boundary_unreleased = 0;

  /// Evictions that break a rule: the oracle's recent window, sinks and emergency pool, and
  /// boundary protections taken without being counted.
  std::int64_t violations() const {
    return protection.recent_evicted + protection.sink_evicted + protection.emergency_excess +
           protection.emergency_order + boundary_unreleased;
  }
};

/// A random stream over `cache`: appends of 1..4 frames (boundaries, segment starts, critical
/// frames, and sinks while the emergency pool has room), an observe per step, plan()/apply()
/// whenever the trigger fires, and every few steps plan_to() of a random target or of a
/// streaming host's max(1, budget - chunk). Every plan is checked against the protection
/// oracle and against its documented size. Any exception fails the test.
stream_report run_stream(tiered_cache<>& cache, std::int32_t steps, std::uint64_t seed) {
  stream_report report;
  test::protection_oracle oracle(cache.config(), cache.capacity());
  test::xorshift64 rng(seed);
  eviction_plan plan;
  plan.reserve(cache.capacity());
  std::vector<frame_meta> batch;
  std::vector<float> attention;
  std::int32_t pos = 0, sinks = 0;
  const auto check_and_apply = [&](const eviction_plan& p) {
    report.protection += oracle.check(p);
    std::int64_t boundary = 0;
    for (const std::int32_t slot : p.evict) {
      boundary += cache.is_protected(slot) && cache.tiers()[slot] == pool_tier::buffer ? 1 : 0;
    }
    report.boundary_unreleased += std::max<std::int64_t>(0, boundary - p.protections_released);
    report.evicted += static_cast<std::int64_t>(p.evict.size());
    report.released += p.protections_released;
    cache.apply(p);
    oracle.apply(p);
  };
  for (std::int32_t step = 0; step < steps; ++step) {
    const std::int32_t free = cache.capacity() - cache.num_cells();
    if (free < 1) {
      ADD_FAILURE() << "no free slot at step " << step << " (" << cache.num_cells() << " of "
                    << cache.capacity() << ")";
      return report;
    }
    const std::int32_t count = rng.range(1, std::min(free, 4));
    batch.assign(static_cast<std::size_t>(count), frame_meta{});
    for (auto& f : batch) {
      f.pos = pos;
      pos += rng.range(1, 2);
      f.voice = rng.unit() < 0.7f ? 1.0f : 0.0f;
      const std::int32_t kind = rng.range(0, 99);
      if (kind < 6) f.flags = frame_flag_phoneme_boundary;
      if (kind == 6) f.flags = frame_flag_segment_start;
      if (kind == 7) f.flags = frame_flag_critical;
      if (kind == 8 && sinks < cache.emergency_pool_cells()) {
        f.flags = frame_flag_sink;
        ++sinks;
      }
    }
    cache.append(batch);
    oracle.append(batch.data(), count);
    attention.resize(static_cast<std::size_t>(cache.num_cells()));
    float sum = 0.0f;
    for (auto& a : attention) sum += (a = rng.unit() * rng.unit());
    for (auto& a : attention) a = sum > 0.0f ? a / sum : 0.0f;
    cache.observe(attention);
    if (cache.wants_eviction()) {
      cache.plan(plan);
      ++report.plans;
      EXPECT_LT(plan.n_kv_after, cache.trigger_cells()) << "plan() stayed at the trigger";
      check_and_apply(plan);
    }
    if (step % 7 == 3 && cache.num_cells() > 0) {
      const std::int32_t n = cache.num_cells();
      const std::int32_t target =
          step % 14 == 3 ? rng.range(0, n) : std::max(1, cache.budget() - rng.range(1, 30));
      cache.plan_to(target, plan);
      ++report.targets;
      const std::int32_t floor = cache.protected_cells();
      report.short_targets += target < floor ? 1 : 0;
      EXPECT_EQ(plan.n_kv_after, std::max(std::min(n, target), floor))
          << "target " << target << " of " << n << ", protected " << floor;
      check_and_apply(plan);
    }
  }
  return report;
}

// Every budget from 1 to 64, with the default configuration (10 ms frames) and with Whisper's
// 20 ms frames, constructs and survives a long random stream; with the window forbidden to
// shrink, a budget either does the same or is rejected at construction naming the setting.
TEST(SmallBudgets, EveryBudgetFrom1To64RunsALongStreamOrIsRejectedUpFront) {
  std::int32_t ran = 0, rejected = 0, shrunk = 0;
  std::int64_t short_targets = 0;
  for (const float frame_ms : {10.0f, 20.0f}) {
    for (const bool shrink : {true, false}) {
      for (std::int32_t budget = 1; budget <= 64; ++budget) {
        audiokv_config c;
        c.budget = budget;
        c.frame_ms = frame_ms;
        c.shrink_recent_window = shrink;
        const std::string label = "budget " + std::to_string(budget) + ", frame_ms " +
                                  std::to_string(frame_ms) + (shrink ? "" : ", no shrink");
        std::unique_ptr<tiered_cache<>> cache;
        try {
          cache = std::make_unique<tiered_cache<>>(c);
        } catch (const error& e) {
          // Only a window that may not shrink is rejected, and the error names it.
          EXPECT_FALSE(shrink) << label << ": " << e.what();
          EXPECT_TRUE(e.argument() == "config.min_retention_ms" || e.argument() == "config.budget")
              << label << ": " << e.what();
          ++rejected;
          continue;
        }
        const std::int32_t window = cache->recent_window_frames();
        EXPECT_LE(window, c.retention_frames()) << label;
        EXPECT_LT(window + cache->emergency_pool_cells(), cache->trigger_cells()) << label;
        shrunk += window < c.retention_frames() ? 1 : 0;
        stream_report r;
        EXPECT_NO_THROW(r = run_stream(*cache, 3000, 97 + budget)) << label;
        EXPECT_EQ(r.violations(), 0)
            << label << ": recent " << r.protection.recent_evicted << ", sinks "
            << r.protection.sink_evicted << ", emergency excess " << r.protection.emergency_excess
            << ", emergency order " << r.protection.emergency_order << ", boundary unreleased "
            << r.boundary_unreleased;
        if (window > 0) {
          EXPECT_GT(r.protection.recent_seen, 0) << label;
        }
        EXPECT_GT(r.plans, 10) << label;
        EXPECT_GT(r.evicted, 0) << label;
        short_targets += r.short_targets;
        ++ran;
      }
    }
  }
  // 10 ms frames (20-frame window): budgets below 25 need a shrink; 20 ms frames: below 13.
  EXPECT_EQ(shrunk, 24 + 12);
  EXPECT_EQ(rejected, 24 + 12);
  EXPECT_EQ(ran, 4 * 64 - rejected);
  EXPECT_GT(short_targets, 100);  // plan_to() below the protected cells was exercised
}

/// The budget arithmetic and streaming protocol of examples/asr_whisper for a clip of
/// `seconds` at retention `keep`: 50 speech frames per second, 16 window sinks paid from the
/// budget, capacity max(2 budget, frames), 20 ms frames; frames revealed 25 at a time, and
/// before each reveal plan_to(max(1, budget - 25)) whenever the chunk would exceed the budget;
/// three decode steps observed per chunk.
void stream_clip(double seconds, double keep) {
  const auto n_frames = static_cast<std::int32_t>(std::lround(seconds * 50.0));
  const std::int32_t sinks = 16, chunk = 25;
  audiokv_config c;
  c.budget = std::max(1, static_cast<std::int32_t>(std::lround(keep * n_frames)) - sinks);
  c.capacity = std::max(2 * c.budget, n_frames);
  c.frame_ms = 20.0f;
  const std::string label = std::to_string(seconds) + " s at " + std::to_string(keep) +
                            " (budget " + std::to_string(c.budget) + ")";
  tiered_cache<> cache(c);
  test::xorshift64 rng(5);
  eviction_plan plan;
  std::vector<frame_meta> frames;
  std::vector<float> attention;
  for (std::int32_t shown = 0; shown < n_frames;) {
    const std::int32_t incoming = std::min(chunk, n_frames - shown);
    if (cache.num_cells() + incoming > cache.budget()) {
      const std::int32_t target = std::max(1, cache.budget() - incoming);
      cache.plan_to(target, plan);
      EXPECT_EQ(plan.n_kv_after,
                std::max(std::min(cache.num_cells(), target), cache.protected_cells()))
          << label;
      cache.apply(plan);
    }
    frames.clear();
    for (std::int32_t i = 0; i < incoming; ++i) {
      frames.push_back(frame_meta{shown + i, 0, rng.unit() < 0.8f ? 1.0f : 0.0f, 0, 0.0f});
    }
    cache.append(frames);
    shown += incoming;
    for (int step = 0; step < 3; ++step) {
      attention.assign(static_cast<std::size_t>(cache.num_cells()), 0.0f);
      float sum = 0.0f;
      for (auto& a : attention) sum += (a = rng.unit());
      for (auto& a : attention) a /= sum;
      cache.observe(attention);
    }
  }
  EXPECT_GT(cache.num_cells(), 0) << label;
}

// The clips of the report: 3 s at 0.2 and 12 s at 0.05 (budget 14, accepted, then plan_to(1)
// threw mid-stream), 1 s at any retention and 3 s at 0.1 (budget 1, rejected at
// construction). All of them now stream to the end.
TEST(SmallBudgets, WhisperStreamingProtocolOnShortClipsRunsToTheEnd) {
  for (const auto& [seconds, keep] : std::vector<std::pair<double, double>>{
           {3.0, 0.2}, {12.0, 0.05}, {1.0, 0.4}, {1.0, 0.05}, {3.0, 0.1}, {25.0, 0.05}}) {
    EXPECT_NO_THROW(stream_clip(seconds, keep)) << seconds << " s at " << keep;
  }
}

// The recent window a small budget leaves, by the rule of audiokv_config::shrink_recent_window,
// and what the cache reports: min(ceil(min_retention_ms / frame_ms), trigger - 1 - emergency).
TEST(SmallBudgets, TheShrunkWindowIsTheLargestThatFitsAndIsReported) {
  audiokv_config c;  // 20-frame window, emergency 10 %, trigger 90 %
  for (const auto& [budget, window] : std::vector<std::pair<std::int32_t, std::int32_t>>{
           {1, 0}, {2, 1}, {10, 7}, {20, 15}, {24, 19}, {25, 20}, {100, 20}}) {
    c.budget = budget;
    tiered_cache<> cache(c);
    EXPECT_EQ(cache.recent_window_frames(), window) << budget;
    EXPECT_EQ(c.recent_window_frames(), window) << budget;
    EXPECT_EQ(c.retention_frames(), 20);
  }
  // The window is what protection means: with budget 10 the newest 7 positions are kept.
  c.budget = 10;
  tiered_cache<> cache(c);
  cache.append(test::frames(0, 9));
  for (std::int32_t j = 0; j < 9; ++j) EXPECT_EQ(cache.is_protected(j), j >= 2) << j;
  eviction_plan plan;
  cache.plan(plan);
  EXPECT_EQ(plan.n_kv_after, 8);
  // The host's protection is kept whatever the budget: a sink beyond the emergency pool
  // (floor(0.1 x 10) = 1 cell) is rejected, as for any budget.
  tiered_cache<> tiny(c);
  auto sinks = test::frames(0, 2);
  for (auto& f : sinks) f.flags = frame_flag_sink;
  EXPECT_THROW(tiny.append(sinks), error);
  EXPECT_EQ(tiny.num_cells(), 0);
}

}  // namespace
