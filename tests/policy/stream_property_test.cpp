// SPDX-License-Identifier: Apache-2.0
// Properties over long speech-like streams (budget adherence and the hard rules), several
// configurations.
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <cstdint>
#include <vector>

#include "common/protection_oracle.hpp"
#include "common/stream.hpp"

namespace {

using namespace audiokv;

struct stream_result {
  double mean_occupancy = 0.0;
  std::int32_t peak = 0;
  test::protection_report protection;  // against tests/common/protection_oracle.hpp
  std::int64_t oracle_mismatches = 0;  // oracle's positions / pools differ from the cache's
  std::uint64_t digest = 1469598103934665603ull;  // FNV-1a over every plan
  audiokv_stats stats;
};

struct stream_case {
  const char* name;
  audiokv_config config;
  std::int64_t frames;
  bool text = false;  // a speech LLM's prompt: blocks of 50 text tokens between audio
};

/// True when frame `step` of a case with text is a text token: 50 of every 200.
bool is_text_step(std::int64_t step) { return (step / 50) % 4 == 1; }

constexpr std::int64_t kSinks = 2;  // the first frames are attention sinks

/// Streams sc's frames through a cache of sc.config; the plans are judged by an oracle of
/// `rules` (sc.config unless given).
stream_result run_stream(const stream_case& sc, unsigned seed,
                         const audiokv_config* rules = nullptr) {
  tiered_cache<> cache(sc.config);
  test::protection_oracle oracle(rules != nullptr ? *rules : sc.config, cache.capacity());
  test::speech_stream stream(seed, sc.config.num_speakers);
  eviction_plan plan;
  plan.reserve(cache.capacity());
  std::vector<float> attention;
  // One K row per cell of one head, holding the position: checks compaction against the plan.
  std::vector<float> keys(cache.capacity());
  stream_result r;
  double occupancy_sum = 0.0;
  std::int64_t samples = 0;
  const std::int64_t warm_up = 3 * sc.config.budget;
  for (std::int64_t step = 0; step < sc.frames; ++step) {
    frame_meta f = stream.next_frame();
    if (step < kSinks) f.flags |= frame_flag_sink;
    if (sc.text && is_text_step(step)) f.flags |= frame_flag_text;
    cache.append(&f, 1);
    oracle.append(&f, 1);
    keys[cache.num_cells() - 1] = static_cast<float>(f.pos);
    stream.attention(cache.positions(), cache.num_cells(), attention);
    cache.observe(attention.data(), cache.num_cells());
    if (cache.wants_eviction()) {
      cache.plan(plan);
      r.protection += oracle.check(plan);
      for (std::int32_t j = 0; j < plan.n_kv_before; ++j) {
        r.digest = (r.digest ^ static_cast<std::uint32_t>(plan.move_to[j])) * 1099511628211ull;
      }
      cpu::compact(kv_view<float, layout_hnd>(keys.data(), layout_hnd{{cache.capacity(), 1, 1}}), 0,
                   plan);
      cache.apply(plan);
      oracle.apply(plan);
      for (std::int32_t j = 0; j < cache.num_cells(); ++j) {
        r.oracle_mismatches +=
            oracle.positions()[j] != cache.positions()[j] || oracle.tiers()[j] != cache.tiers()[j];
      }
      r.oracle_mismatches += oracle.size() != cache.num_cells();
      for (std::int32_t j = 0; j < cache.num_cells(); ++j) {
        if (keys[j] != static_cast<float>(cache.positions()[j])) {
          ADD_FAILURE() << sc.name << ": compaction disagrees with plan at step " << step;
          return r;
        }
      }
    }
    r.peak = std::max(r.peak, cache.num_cells());
    if (step >= warm_up) {
      occupancy_sum += cache.num_cells();
      ++samples;
    }
  }
  r.mean_occupancy = occupancy_sum / static_cast<double>(samples);
  r.stats = cache.stats();
  return r;
}

std::vector<stream_case> cases() {
  std::vector<stream_case> out;
  audiokv_config a;
  a.budget = 1000;
  a.num_speakers = 3;
  out.push_back({"default_B1000", a, 120000});
  audiokv_config b = a;
  b.budget = 256;
  b.frame_ms = 40.0f;  // Qwen2-Audio tokens: 200 ms = 5 cells
  b.boundary_radius = 3;
  out.push_back({"qwen_tokens_B256", b, 100000});
  audiokv_config c = a;
  c.budget = 4096;
  c.split = {0.5f, 0.4f, 0.1f};
  c.trigger = 0.95f;
  c.base_rate = 0.1f;
  out.push_back({"large_B4096", c, 100000});
  audiokv_config d = a;
  d.budget = 512;
  d.frame_ms = 40.0f;
  d.boundary_radius = 3;
  out.push_back({"speech_llm_text_B512", d, 60000, true});
  return out;
}

TEST(StreamProperties, BudgetProtectionCompactionAndDeterminism) {
  for (const auto& sc : cases()) {
    const stream_result r = run_stream(sc, 42);
    const double operating_point = sc.config.trigger_cells();
    SCOPED_TRACE(sc.name);
    EXPECT_LE(r.peak, sc.config.budget);
    EXPECT_LE(r.peak, sc.config.trigger_cells());
    EXPECT_NEAR(r.mean_occupancy / operating_point, 1.0, 0.03) << "mean " << r.mean_occupancy;
    const test::protection_report& p = r.protection;
    EXPECT_EQ(r.oracle_mismatches, 0);
    EXPECT_EQ(p.recent_evicted, 0);
    EXPECT_EQ(p.text_recent_evicted, 0);
    if (sc.text) {
      EXPECT_GT(p.text_recent_seen, 0);
    }
    EXPECT_EQ(p.sink_evicted, 0);
    EXPECT_EQ(p.emergency_excess, 0);
    EXPECT_EQ(p.emergency_order, 0);
    EXPECT_EQ(p.boundary_evicted, 0);  // the streams never need a protection to yield
    EXPECT_EQ(r.stats.protections_released, 0);
    EXPECT_GT(p.emergency_evicted, 0);
    // Every rule covered cells when plans were made, so the zeros above test something.
    EXPECT_GT(p.recent_seen, 0);
    EXPECT_GT(p.sink_seen, 0);
    EXPECT_GT(p.boundary_seen, 0);
    EXPECT_GT(p.emergency_seen, 0);
    EXPECT_GT(r.stats.evictions, 10);
    EXPECT_GT(r.stats.promotions, 0);
    EXPECT_GT(r.stats.emergency_evictions, 0);
    const stream_result again = run_stream(sc, 42);
    EXPECT_EQ(again.digest, r.digest);
    EXPECT_EQ(again.stats.cells_evicted, r.stats.cells_evicted);
  }
}

// The text window is a rule the plans need: without it (text_recent_share 0) the same stream
// evicts text cells the window would have kept, so the zero above can fail.
TEST(StreamProperties, TextWindowKeepsTextTheScoresWouldEvict) {
  const stream_case with_window = cases().back();
  ASSERT_TRUE(with_window.text);
  ASSERT_GT(with_window.config.text_recent_cells(), with_window.config.recent_window_frames());
  stream_case without = with_window;
  without.config.text_recent_share = 0.0f;
  const stream_result r = run_stream(without, 42, &with_window.config);
  EXPECT_GT(r.protection.text_recent_evicted, 0);
}

}  // namespace
