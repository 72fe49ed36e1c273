// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/policy/stages/smoothing_pipeline.hpp>
#include <vector>

namespace {

using namespace audiokv;

struct double_it {  // a user-defined stage: no change to the pools needed
  void apply(const float* in, float* out, std::int32_t n, const stage_context&) const {
    for (std::int32_t j = 0; j < n; ++j) out[j] = 2.0f * in[j];
  }
};
struct add_index {  // out[j] = in[j] + j: position-dependent, so it commutes with neither
  void apply(const float* in, float* out, std::int32_t n, const stage_context&) const {
    for (std::int32_t j = 0; j < n; ++j) out[j] = in[j] + static_cast<float>(j);
  }
};
struct not_a_stage {};

static_assert(is_smoothing_stage_v<median_stage<5>>);
static_assert(is_smoothing_stage_v<trend_stage>);
static_assert(is_smoothing_stage_v<speaker_norm_stage>);
static_assert(is_smoothing_stage_v<double_it>);
static_assert(is_smoothing_stage_v<add_index>);
static_assert(!is_smoothing_stage_v<not_a_stage>);
static_assert(!is_smoothing_stage_v<int>);

template <class Pipeline>
std::vector<float> run(const Pipeline& pipeline, const std::vector<float>& in,
                       const stage_context& ctx = {}) {
  std::vector<float> out(in.size()), scratch(in.size());
  pipeline.apply(in.data(), out.data(), scratch.data(), static_cast<std::int32_t>(in.size()), ctx);
  return out;
}

// median_stage<5> and add_index do not commute (a median of x + j is not the median of x plus
// j), and neither do add_index and double_it, so every expected vector below names one order.
TEST(Pipeline, StagesRunLeftToRight) {
  const std::vector<float> x = {0.0f, 4.0f, 0.0f, 4.0f, 0.0f};
  // Median of 5, edges replicated: every window holds at least three zeros -> all 0; + j.
  EXPECT_EQ(run(smoothing_pipeline<median_stage<5>, add_index>{}, x),
            (std::vector<float>{0, 1, 2, 3, 4}));
  // x + j = {0, 5, 2, 7, 4}; windows {0,0,0,5,2} {0,0,5,2,7} {0,5,2,7,4} {5,2,7,4,4} {2,7,4,4,4}.
  EXPECT_EQ(run(smoothing_pipeline<add_index, median_stage<5>>{}, x),
            (std::vector<float>{0, 2, 4, 4, 4}));
  // Two stages: 2x + j against 2(x + j).
  EXPECT_EQ(run(smoothing_pipeline<double_it, add_index>{}, x),
            (std::vector<float>{0, 9, 2, 11, 4}));
  EXPECT_EQ(run(smoothing_pipeline<add_index, double_it>{}, x),
            (std::vector<float>{0, 10, 4, 14, 8}));
  // Three stages (an odd count: the first writes `out`, the second the scratch array).
  // 2(x + j) = {0, 10, 4, 14, 8}; windows {0,0,0,10,4} {0,0,10,4,14} {0,10,4,14,8}
  // {10,4,14,8,8} {4,14,8,8,8}.
  EXPECT_EQ(run(smoothing_pipeline<add_index, double_it, median_stage<5>>{}, x),
            (std::vector<float>{0, 4, 8, 8, 8}));
  // median 0 everywhere, + j, x2.
  EXPECT_EQ(run(smoothing_pipeline<median_stage<5>, add_index, double_it>{}, x),
            (std::vector<float>{0, 2, 4, 6, 8}));
}

TEST(Pipeline, EachStageUsableAlone) {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f};
  const auto t = run(smoothing_pipeline<trend_stage>{}, x);
  EXPECT_FLOAT_EQ(t[0], 1.0f);
  EXPECT_NEAR(t[1], 1.6f, 1e-6f);
  EXPECT_NEAR(t[2], 2.512f, 1e-6f);
  const auto same = run(smoothing_pipeline<>{}, x);
  EXPECT_EQ(same, x);
}

TEST(Pipeline, SpeakerNormDividesByOwnBaseline) {
  const std::vector<float> x = {4.0f, 1.0f, 8.0f, 2.0f};
  const std::int32_t speaker[] = {0, 1, 0, 1};
  const float baseline[] = {4.0f, 1.0f};  // speaker 0 draws 4x the attention of speaker 1
  const stage_context ctx{speaker, baseline, 2, nullptr};
  const auto y = run(smoothing_pipeline<speaker_norm_stage>{}, x, ctx);
  EXPECT_EQ(y, (std::vector<float>{1.0f, 1.0f, 2.0f, 2.0f}));
}

TEST(Pipeline, DefaultIsMedianTrendSpeakerNorm) {
  static_assert(default_pipeline::num_stages == 4);
  default_pipeline p;
  p.stage<1>().level_weight = 1.0f;  // trend off: output equals the median
  const std::vector<float> x = {0.82f, 0.15f, 0.91f, 0.08f, 0.87f, 0.12f};
  const std::int32_t speaker[6] = {};
  const float baseline[] = {0.5f};
  const auto y = run(p, x, stage_context{speaker, baseline, 1, nullptr});
  const auto m = run(smoothing_pipeline<median_stage<5>>{}, x);
  for (size_t j = 0; j < x.size(); ++j) EXPECT_FLOAT_EQ(y[j], m[j] / 0.5f);
}

}  // namespace

namespace {

TEST(Pipeline, MedianStageEqualsCoreFunctionBitForBit) {
  std::vector<float> x(1001);
  for (size_t j = 0; j < x.size(); ++j) x[j] = static_cast<float>((j * 7919) % 97) * 0.01f - 0.3f;
  for (std::int32_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1001}) {
    std::vector<float> out(n);
    audiokv::median_stage<5>{}.apply(x.data(), out.data(), n, {});
    for (std::int32_t j = 0; j < n; ++j) {
      ASSERT_EQ(out[j], audiokv::core::median_at<5>(x.data(), n, j)) << "n=" << n << " j=" << j;
    }
  }
}

}  // namespace

namespace {

TEST(Pipeline, LocalRankSpreadsEvictionsOverBlocks) {
  using audiokv::local_rank_stage;
  const std::vector<float> x = {5, 1, 3, 9, 9, 9, 0.5f, 2};
  std::vector<float> y(x.size());
  local_rank_stage{3}.apply(x.data(), y.data(), 8, {});
  // Blocks {5,1,3} {9,9,9} {0.5,2}: ranks / 3; equal scores rank the older cell lower.
  const std::vector<float> expected = {1.0f,     1 / 3.0f, 2 / 3.0f, 1 / 3.0f,
                                       2 / 3.0f, 1.0f,     1 / 3.0f, 2 / 3.0f};
  for (size_t j = 0; j < x.size(); ++j) EXPECT_FLOAT_EQ(y[j], expected[j]) << j;
  local_rank_stage{0}.apply(x.data(), y.data(), 8, {});
  EXPECT_EQ(y, x);
}

}  // namespace
