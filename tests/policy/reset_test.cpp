// SPDX-License-Identifier: Apache-2.0
// tiered_cache::reset(): a cache reset after a long, different history behaves bit for bit like
// a freshly constructed one over the same stream (plans, scores, importance, baselines,
// statistics), rejects the plans it made before, keeps its capacity and id, and allocates
// nothing (counting global operator new: this binary's only translation unit including it).
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/counting_allocator.hpp"
#include "common/stream.hpp"

namespace {

using namespace audiokv;

/// Everything observable a stream leaves behind, per step.
struct trace {
  std::vector<std::int32_t> move_to, promote, demote, positions;
  std::vector<std::uint32_t> bits;  // scores, ratios, importance and baselines, as raw bits
  void add(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    bits.push_back(b);
  }
};

trace run_stream(tiered_cache<>& cache, unsigned seed, std::int64_t frames) {
  test::speech_stream stream(seed, cache.config().num_speakers);
  eviction_plan plan;
  plan.reserve(cache.capacity());
  std::vector<float> attention;
  trace t;
  for (std::int64_t step = 0; step < frames; ++step) {
    frame_meta f = stream.next_frame();
    if (step < 2) f.flags |= frame_flag_sink;
    cache.append(&f, 1);
    stream.attention(cache.positions(), cache.num_cells(), attention);
    cache.observe(attention.data(), cache.num_cells());
    for (std::int32_t s = 0; s < cache.config().num_speakers; ++s) {
      t.add(cache.speaker_baselines()[s]);
    }
    if (cache.wants_eviction()) {
      cache.plan(plan);
      t.move_to.insert(t.move_to.end(), plan.move_to.begin(), plan.move_to.end());
      t.promote.insert(t.promote.end(), plan.promote.begin(), plan.promote.end());
      t.demote.insert(t.demote.end(), plan.demote.begin(), plan.demote.end());
      for (const float s : plan.scores) t.add(s);
      t.add(plan.ratio);
      cache.apply(plan);
    }
    cache.prefetch();
  }
  for (std::int32_t j = 0; j < cache.num_cells(); ++j) {
    t.add(cache.importance()[j]);
    t.positions.push_back(cache.positions()[j]);
  }
  return t;
}

audiokv_config stream_config() {
  audiokv_config c;
  c.budget = 400;
  c.num_speakers = 3;
  c.prefetch.enabled = true;
  return c;
}

// The allocation check below means something only if the replacement operator new is live.
std::vector<int>* volatile g_escape = nullptr;

TEST(Reset, CountingAllocatorCounts) {
  const std::int64_t made = test::count_allocations([] { g_escape = new std::vector<int>(100); });
  delete g_escape;
  EXPECT_EQ(made, 2);  // the vector object and its buffer
}

TEST(Reset, BehavesLikeAFreshCacheAndAllocatesNothing) {
  const audiokv_config config = stream_config();
  tiered_cache<> fresh(config);
  const trace expected = run_stream(fresh, 5, 3000);

  tiered_cache<> reused(config);
  run_stream(reused, 77, 2500);  // a different history: other frames, drift, prefetch growth
  ASSERT_GT(reused.stats().evictions, 0);
  ASSERT_GT(reused.forecast().steps(), 0);
  reused.set_alignment_position(1234);
  const std::int32_t capacity = reused.capacity();
  const std::uint64_t id = reused.id();
  eviction_plan old_plan;
  old_plan.reserve(capacity);
  reused.plan_to(reused.num_cells() - 1, old_plan);

  const std::int64_t allocations = test::count_allocations([&] { reused.reset(); });
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(reused.num_cells(), 0);
  EXPECT_EQ(reused.capacity(), capacity);
  EXPECT_EQ(reused.id(), id);
  EXPECT_EQ(reused.stats().steps, 0);
  EXPECT_EQ(reused.stats().evictions, 0);
  EXPECT_EQ(reused.stats().drift_resets, 0);
  EXPECT_EQ(reused.forecast().steps(), 0);
  EXPECT_EQ(reused.pending_frames(), 0);
  for (std::int32_t s = 0; s < config.num_speakers; ++s) {
    EXPECT_EQ(reused.speaker_baselines()[s], 0.0f);
  }
  EXPECT_THROW(reused.apply(old_plan), error);  // made before the reset: stale

  const trace got = run_stream(reused, 5, 3000);  // positions restart at 0
  EXPECT_EQ(got.move_to, expected.move_to);
  EXPECT_EQ(got.promote, expected.promote);
  EXPECT_EQ(got.demote, expected.demote);
  EXPECT_EQ(got.positions, expected.positions);
  EXPECT_EQ(got.bits, expected.bits);
  EXPECT_EQ(reused.stats().evictions, fresh.stats().evictions);
  EXPECT_EQ(reused.stats().drift_resets, fresh.stats().drift_resets);
  EXPECT_EQ(reused.stats().promotions, fresh.stats().promotions);
}

}  // namespace
