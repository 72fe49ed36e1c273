// SPDX-License-Identifier: Apache-2.0
// F30: spectral low-pass smoothing stage and audio-critical head budget allocation.
#include <gtest/gtest.h>

#include <audiokv/policy/baselines/head_budget_allocator.hpp>
#include <audiokv/policy/smoothing_pipeline.hpp>
#include <audiokv/policy/spectral_stage.hpp>
#include <audiokv/policy/stage_traits.hpp>
#include <audiokv/pool/tiered_cache.hpp>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;

static_assert(is_smoothing_stage_v<spectral_lowpass_stage>,
              "spectral_lowpass_stage must satisfy the smoothing-stage contract");

std::vector<float> run(const spectral_lowpass_stage& stage, const std::vector<float>& in) {
  std::vector<float> out(in.size());
  stage.apply(in.data(), out.data(), static_cast<std::int32_t>(in.size()), stage_context{});
  return out;
}

TEST(SpectralStage, FullBandIsIdentity) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int n : {1, 2, 5, 37, 64, 100}) {
    std::vector<float> in(n);
    for (float& x : in) x = u(rng);
    for (auto pad : {spectral_padding::reflect, spectral_padding::zero}) {
      const auto out = run(spectral_lowpass_stage(1.0f, pad), in);
      for (int j = 0; j < n; ++j) EXPECT_NEAR(out[j], in[j], 1e-5f) << n << " " << j;
    }
  }
}

TEST(SpectralStage, ConstantStaysConstantWithReflect) {
  const std::vector<float> in(37, 0.25f);
  const auto out = run(spectral_lowpass_stage(0.05f), in);
  for (float x : out) EXPECT_NEAR(x, 0.25f, 1e-6f);
}

TEST(SpectralStage, RemovesHighFrequencyKeepsTrend) {
  const int n = 64;
  std::vector<float> in(n);
  for (int j = 0; j < n; ++j) in[j] = 0.01f * j + ((j % 2) ? 0.2f : -0.2f);
  const auto out = run(spectral_lowpass_stage(0.25f), in);
  double residual = 0.0;
  for (int j = 4; j < n - 4; ++j) residual = std::max(residual, std::fabs(out[j] - 0.01 * j));
  EXPECT_LT(residual, 0.03);  // the +-0.2 alternation (Nyquist) is gone, the ramp stays
  EXPECT_THROW(spectral_lowpass_stage(0.0f), audiokv::error);
  EXPECT_THROW(spectral_lowpass_stage(1.5f), audiokv::error);
}

TEST(SpectralStage, PlugsIntoTieredCache) {
  audiokv_config c;
  c.budget = 100;
  c.capacity = 100;
  tiered_cache<smoothing_pipeline<spectral_lowpass_stage, median_stage<5>>> cache(c);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int t = 0; t < 300; ++t) {
    const auto f = test::frames(t, 1);
    cache.append(f.data(), 1);
    std::vector<float> a(cache.num_cells());
    for (float& x : a) x = u(rng);
    cache.observe(a.data(), cache.num_cells());
    if (cache.wants_eviction()) {
      eviction_plan plan;
      cache.plan(plan);
      cache.apply(plan);
    }
    ASSERT_LE(cache.num_cells(), c.budget);
  }
}

TEST(HeadBudgetAllocator, ExactTotalFloorsAndCriticalHeadsFavoured) {
  head_budget_allocator alloc{3.0, 8};
  const std::vector<std::uint8_t> critical = {0, 1, 0, 0, 1, 0, 0, 0};
  for (std::int64_t total : {64, 100, 257, 1000, 4099}) {
    const auto b = alloc.allocate(total, critical);
    EXPECT_EQ(std::accumulate(b.begin(), b.end(), std::int64_t{0}), total);
    for (std::size_t h = 0; h < b.size(); ++h) {
      EXPECT_GE(b[h], 8);
      if (critical[h]) {
        EXPECT_GE(b[h], b[0]);
      }
    }
  }
  const auto b = alloc.allocate(1000, critical);
  EXPECT_GT(b[1], 2 * b[0]);  // weight 3 on the share above the floors
  EXPECT_THROW(alloc.allocate(63, critical), audiokv::error);
  EXPECT_THROW(alloc.allocate(100, {}), audiokv::error);
  head_budget_allocator bad{0.0, 0};
  EXPECT_THROW(bad.allocate(100, critical), audiokv::error);
}

}  // namespace
