// SPDX-License-Identifier: Apache-2.0
// Bit-exact behaviour of the AudioKV policy over long speech-like streams: a digest of every
// plan (move map, score bits, promotions, demotions, ratio), of the importance and of the speaker
// baselines after each step, for observe, observe_group (mean and max) and several
// configurations. The expected values were recorded from the single-class implementation that
// preceded the split into importance tracker, protection rules, pool manager and planner (with
// its one coverage floor over all time, frontier_density 0), for the frontier-first default when
// it became the default, and for the segment floor when it became the default; a refactoring or an
// optimisation that changes one bit of any plan or state fails here.
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/earlier_floor.hpp"
#include "common/state_digest.hpp"
#include "common/stream.hpp"

namespace {

using namespace audiokv;

using test::fnv1a;

enum class feed { observe, group_mean, group_max };

struct digest_case {
  const char* name;
  audiokv_config config;
  feed mode;
  std::int64_t frames;
  std::uint64_t expected;
};

std::uint64_t run(const digest_case& dc) {
  tiered_cache<> cache(dc.config);
  test::speech_stream stream(7, dc.config.num_speakers);
  eviction_plan plan;
  plan.reserve(cache.capacity());
  std::vector<float> attention, group;
  fnv1a d;
  constexpr std::int32_t kGroup = 3;
  for (std::int64_t step = 0; step < dc.frames; ++step) {
    frame_meta f = stream.next_frame();
    if (step < 2) f.flags |= frame_flag_sink;
    cache.append(&f, 1);
    const std::int32_t n = cache.num_cells();
    stream.attention(cache.positions(), n, attention);
    if (dc.mode == feed::observe) {
      cache.observe(attention.data(), n);
    } else {
      // Rows of the group differ in scale and by a cell-dependent factor, so mean and max
      // differ from each row and from each other.
      group.resize(static_cast<std::size_t>(kGroup) * n);
      for (std::int32_t g = 0; g < kGroup; ++g) {
        for (std::int32_t j = 0; j < n; ++j) {
          group[g * n + j] = attention[j] * (0.5f + 0.25f * g + 0.125f * ((j * (g + 3)) % 5));
        }
      }
      cache.observe_group(group, kGroup, n,
                          dc.mode == feed::group_max ? gqa_reduce::max : gqa_reduce::mean);
    }
    test::digest_state(d, cache, dc.config.num_speakers);
    if (cache.wants_eviction()) {
      cache.plan(plan);
      test::digest_plan(d, plan);
      cache.apply(plan);
    }
  }
  test::digest_stats(d, cache.stats());
  return d.value;
}

std::vector<digest_case> cases() {
  std::vector<digest_case> out;
  audiokv_config a;
  a.budget = 600;
  a.num_speakers = 3;
  // The library's default floor: the segment floor, with the stride's age profile behind the
  // frontier.
  out.push_back(
      {"observe_3_speakers_segment_floor", a, feed::observe, 12000, 0xcab0612ec6e74f6aull});
  out.push_back({"group_max_segment_floor", a, feed::group_max, 8000, 0xb55728464e0a4d9aull});
  // The segment_ms floor, frontier first, the default before the segment floor.
  test::use_segment_ms_floor(a.speech);
  out.push_back(
      {"observe_3_speakers_frontier_first", a, feed::observe, 12000, 0x858bc12b638c5d0bull});
  out.push_back({"group_mean_frontier_first", a, feed::group_mean, 8000, 0xb5bab037fc903c1eull});
  // One floor over all time, as the recorded single-class implementation had it.
  a.speech.frontier.frontier_density = 0.0f;
  out.push_back({"observe_3_speakers", a, feed::observe, 12000, 0x24626446f79d16baull});
  out.push_back({"group_mean", a, feed::group_mean, 8000, 0x6e30502a5a50adf9ull});
  out.push_back({"group_max", a, feed::group_max, 8000, 0xb415f5d60f5916e2ull});
  audiokv_config b = a;
  b.num_speakers = 1;
  b.evaluation_share = 0.5f;
  b.neighbour_prior = false;
  b.prior = prior_mode::multiply;
  b.drift_window = 4;
  b.drift_factor = 1.2f;
  out.push_back({"one_speaker_evaluation_share", b, feed::observe, 12000, 0xe2c01efe90979e11ull});
  audiokv_config c = a;
  c.budget = 300;
  c.frame_ms = 40.0f;
  c.boundary_radius = 3;
  c.split = {0.5f, 0.4f, 0.1f};
  out.push_back({"qwen_tokens_group_mean", c, feed::group_mean, 8000, 0x3213d14ad0553547ull});
  return out;
}

TEST(GoldenDigest, PlansAndStateAreBitIdentical) {
  for (const digest_case& dc : cases()) {
    SCOPED_TRACE(dc.name);
    const std::uint64_t got = run(dc);
    std::printf("%s 0x%016llxull\n", dc.name, static_cast<unsigned long long>(got));
    EXPECT_EQ(got, dc.expected);
  }
}

}  // namespace
