// SPDX-License-Identifier: Apache-2.0
// Spectral low-pass smoothing stage and audio-critical head budget allocation.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/policy/audiokv/tiered_cache.hpp>
#include <audiokv/policy/baselines/head_budget_allocator.hpp>
#include <audiokv/policy/stages/smoothing_pipeline.hpp>
#include <audiokv/policy/stages/spectral_stage.hpp>
#include <audiokv/policy/stages/stage_traits.hpp>
#include <cmath>
#include <complex>
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

/// Smallest power of two >= n.
std::int64_t pow2_at_least(std::int64_t n) {
  std::int64_t m = 1;
  while (m < n) m *= 2;
  return m;
}

/// The padded sequence of spectral_stage.hpp, built from its documentation: zero padding is x
/// then zeros up to next_pow2(n); reflect padding fills the gap [n, M), M = next_pow2(2n), with
/// the end mirrored (x[n-1], x[n-2], ...) from the front of the gap and the start mirrored
/// (..., x[1], x[0]) towards its back, so the periodic wrap reads x[0] | x[0]. The end mirror
/// takes the first ceil(gap / 2) cells, the start mirror the rest; indices clamp to [0, n).
std::vector<double> padded(const std::vector<float>& x, spectral_padding pad) {
  const auto n = static_cast<std::int64_t>(x.size());
  const std::int64_t m = pow2_at_least(pad == spectral_padding::reflect ? 2 * n : n);
  std::vector<double> p(static_cast<std::size_t>(m), 0.0);
  for (std::int64_t t = 0; t < n; ++t) p[t] = x[t];
  if (pad == spectral_padding::zero) return p;
  const std::int64_t gap = m - n, front = (gap + 1) / 2;
  const auto at = [&](std::int64_t i) { return x[std::clamp<std::int64_t>(i, 0, n - 1)]; };
  for (std::int64_t g = 0; g < front; ++g) p[n + g] = at(n - 1 - g);
  for (std::int64_t g = 0; g < gap - front; ++g) p[m - 1 - g] = at(g);
  return p;
}

/// y = IDFT(lowpass(DFT(padded x)))[0, n) with a naive O(M^2) DFT: bins k with
/// min(k, M - k) <= floor(cutoff * M / 2) survive.
std::vector<double> naive_lowpass(const std::vector<float>& x, float cutoff, spectral_padding pad) {
  const std::vector<double> p = padded(x, pad);
  const auto m = static_cast<std::int64_t>(p.size());
  const auto keep = static_cast<std::int64_t>(std::floor(static_cast<double>(cutoff) * m / 2.0));
  const double two_pi = 2.0 * std::acos(-1.0);
  std::vector<std::complex<double>> spectrum(static_cast<std::size_t>(m));
  for (std::int64_t k = 0; k < m; ++k) {
    if (std::min(k, m - k) > keep) continue;
    std::complex<double> sum = 0.0;
    for (std::int64_t t = 0; t < m; ++t) {
      sum += p[t] * std::polar(1.0, -two_pi * static_cast<double>((k * t) % m) / m);
    }
    spectrum[k] = sum;
  }
  std::vector<double> y(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) {
    std::complex<double> sum = 0.0;
    for (std::int64_t k = 0; k < m; ++k) {
      const auto kj = (k * static_cast<std::int64_t>(j)) % m;
      sum += spectrum[k] * std::polar(1.0, two_pi * static_cast<double>(kj) / m);
    }
    y[j] = sum.real() / static_cast<double>(m);
  }
  return y;
}

TEST(SpectralStage, EqualsNaiveDftLowPass) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int n : {1, 2, 3, 5, 16, 37, 64, 100}) {
    std::vector<float> in(n);
    for (float& v : in) v = u(rng);
    for (float cutoff : {0.05f, 0.1f, 0.25f, 0.5f, 0.8f}) {
      for (auto pad : {spectral_padding::reflect, spectral_padding::zero}) {
        const auto out = run(spectral_lowpass_stage(cutoff, pad), in);
        const auto expected = naive_lowpass(in, cutoff, pad);
        for (int j = 0; j < n; ++j) {
          ASSERT_NEAR(out[j], expected[j], 1e-5)
              << "n " << n << " cutoff " << cutoff << " reflect "
              << (pad == spectral_padding::reflect) << " j " << j;
        }
      }
    }
  }
}

// A hand-checkable case: n = 3, reflect, M = 8, gap of 5: x[2], x[1], x[0] from the end, then
// x[1], x[0] before the wrap, so p = {1, 0, 0 | 0, 0, 1, 0, 1}. cutoff 0.25 keeps bins 0, 1 and
// 7 (floor(0.25 * 8 / 2) = 1): y[j] = (X0 + 2 Re(X1 e^{i pi j / 4})) / 8 with X0 = 3 and
// X1 = sum_t p[t] e^{-i pi t / 4} = 1 + e^{-5i pi / 4} + e^{-7i pi / 4} = 1 + 2r i, r = sqrt(2)/2.
TEST(SpectralStage, HandComputedReflectCase) {
  const std::vector<float> in = {1.0f, 0.0f, 0.0f};
  const auto out = run(spectral_lowpass_stage(0.25f), in);
  const double r = std::sqrt(2.0) / 2.0, pi = std::acos(-1.0);
  const std::complex<double> x1(1.0, 2.0 * r);
  for (int j = 0; j < 3; ++j) {
    const double y = (3.0 + 2.0 * (x1 * std::polar(1.0, pi * j / 4.0)).real()) / 8.0;
    EXPECT_NEAR(out[j], y, 1e-6) << j;
  }
  // j = 0: (3 + 2) / 8; j = 1: (3 + 2 (r - 2r r)) / 8 = (3 + 2r - 2) / 8; j = 2: (3 - 4r) / 8.
  EXPECT_NEAR(out[0], 0.625, 1e-6);
  EXPECT_NEAR(out[1], (1.0 + 2.0 * r) / 8.0, 1e-6);
  EXPECT_NEAR(out[2], (3.0 - 4.0 * r) / 8.0, 1e-6);
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

/// Median of five with the ends replicated, by sorting each window.
std::vector<double> naive_median5(const std::vector<double>& x) {
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<double> y(x.size());
  for (std::int64_t j = 0; j < n; ++j) {
    double w[5];
    for (int k = 0; k < 5; ++k) w[k] = x[std::clamp<std::int64_t>(j - 2 + k, 0, n - 1)];
    std::sort(w, w + 5);
    y[j] = w[2];
  }
  return y;
}

// The stage inside a cache with headroom (capacity > budget) and bursts of frames: every plan
// must bring the cache back under the trigger level (hence the budget), and the scores of every
// plan must be the pipeline's output, low-pass then median, times the voice weight.
TEST(SpectralStage, PlugsIntoTieredCache) {
  audiokv_config c;
  c.budget = 100;
  c.capacity = 160;
  // Speech rules off: they rewrite plan.scores into tiers and ranks, and this test reads the
  // scores the pipeline produced.
  c.speech.sinks.enabled = false;
  c.speech.coverage.enabled = false;
  c.speech.frontier.enabled = false;
  tiered_cache<smoothing_pipeline<spectral_lowpass_stage, median_stage<5>>> cache(c);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::uniform_int_distribution<int> burst(1, 16);
  std::int32_t pos = 0, plans = 0, above_budget = 0;
  for (int t = 0; t < 400; ++t) {
    const int count = burst(rng);
    const auto f = test::frames(pos, count);  // voiced: final = 1.5 * smoothed
    pos += count;
    cache.append(f.data(), count);
    above_budget += cache.num_cells() > c.budget;
    std::vector<float> a(cache.num_cells());
    for (float& x : a) x = u(rng);
    cache.observe(a.data(), cache.num_cells());
    if (cache.wants_eviction()) {
      eviction_plan plan;
      cache.plan(plan);
      const std::vector<float> importance(cache.importance(),
                                          cache.importance() + cache.num_cells());
      const auto smoothed =
          naive_median5(naive_lowpass(importance, 0.25f, spectral_padding::reflect));
      for (std::int32_t j = 0; j < cache.num_cells(); ++j) {
        ASSERT_NEAR(plan.scores[j], 1.5 * smoothed[j], 1e-5) << "step " << t << " " << j;
      }
      cache.apply(plan);
      ++plans;
    }
    ASSERT_LT(cache.num_cells(), cache.trigger_cells()) << "step " << t;
    ASSERT_LE(cache.num_cells(), c.budget) << "step " << t;
  }
  EXPECT_GT(plans, 20);
  EXPECT_GT(above_budget, 0);  // bursts did overshoot the budget before their plans
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

TEST(HeadBudgetAllocator, WeightedSplitIsExactAndProportional) {
  head_budget_allocator alloc{3.0, 2};
  const std::vector<double> weight = {1.0, 3.0, 1.0, 1.0, 3.0, 1.0, 1.0, 1.0};
  const std::vector<std::uint8_t> critical = {0, 1, 0, 0, 1, 0, 0, 0};
  for (std::int64_t total : {16, 17, 100, 257, 4099}) {
    const auto b = alloc.allocate_weighted(total, weight);
    EXPECT_EQ(std::accumulate(b.begin(), b.end(), std::int64_t{0}), total);
    EXPECT_EQ(b, alloc.allocate(total, critical)) << total;  // the same split, the same ties
    for (std::size_t h = 0; h < b.size(); ++h) {
      const double exact = 2.0 + (static_cast<double>(total) - 16.0) * weight[h] / 12.0;
      EXPECT_LT(std::abs(b[h] - exact), 1.0) << "head " << h << " of " << total;
    }
  }
  EXPECT_THROW(alloc.allocate_weighted(100, {1.0, 0.0}), audiokv::error);
  EXPECT_THROW(alloc.allocate_weighted(100, {1.0, std::nan("")}), audiokv::error);
  EXPECT_THROW(alloc.allocate_weighted(100, {}), audiokv::error);
  EXPECT_THROW(alloc.allocate_weighted(3, {1.0, 1.0}), audiokv::error);  // below the floors
}

TEST(HeadBudgetAllocator, PerplexityWeightsFollowTheEntropy) {
  const std::vector<double> entropy = {0.5, 2.0, std::log(300.0)};
  for (const double w : attention_perplexity_weights(entropy, 0.0)) EXPECT_EQ(w, 1.0);
  const auto full = attention_perplexity_weights(entropy, 1.0);
  EXPECT_DOUBLE_EQ(full[0], 1.0);  // relative to the sharpest head
  EXPECT_NEAR(full[1] / full[0], std::exp(1.5), 1e-12);
  EXPECT_NEAR(full[2] / full[0], 300.0 / std::exp(0.5), 1e-9);
  const auto half = attention_perplexity_weights(entropy, 0.5);
  EXPECT_NEAR(half[2] / half[1], std::sqrt(full[2] / full[1]), 1e-12);
  const auto sharp = attention_perplexity_weights(entropy, -1.0);
  EXPECT_DOUBLE_EQ(sharp[2], 1.0);  // the most spread head is the reference
  EXPECT_NEAR(sharp[0] / sharp[2], full[2] / full[0], 1e-9);
  EXPECT_THROW(attention_perplexity_weights(entropy, std::nan("")), audiokv::error);
  EXPECT_THROW(attention_perplexity_weights({1.0, -1.0}, 1.0), audiokv::error);
  EXPECT_THROW(attention_perplexity_weights({1.0, INFINITY}, 1.0), audiokv::error);
}

}  // namespace
