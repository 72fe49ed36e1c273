// SPDX-License-Identifier: Apache-2.0
// Per-cell smoothing stages: a user-written functor stage runs through smoothing_pipeline beside
// the library's stages, checked against references written from the formulas; the trait
// accepts cell stages and rejects what a kernel could not take.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace audiokv;

/// A user's stage: a 1-2-1 blur with the ends replicated.
struct blur_121 {
  AUDIOKV_HOST_DEVICE float operator()(const cell_neighbourhood& cell, const stage_context&) const {
    return 0.25f * cell.at(-1) + 0.5f * cell.centre() + 0.25f * cell.at(1);
  }
};

/// A user's stage reading the context: adds the cell's speaker id.
struct add_speaker {
  float gain = 1.0f;
  AUDIOKV_HOST_DEVICE float operator()(const cell_neighbourhood& cell,
                                       const stage_context& ctx) const {
    return cell.centre() + gain * static_cast<float>(ctx.speaker[cell.j]);
  }
};

/// Has the operator but owns memory: a kernel could not take it by value.
struct owns_memory {
  std::vector<float> table;
  float operator()(const cell_neighbourhood& cell, const stage_context&) const {
    return cell.centre();
  }
};

struct not_a_stage {};

static_assert(is_cell_stage_v<blur_121>);
static_assert(is_cell_stage_v<add_speaker>);
static_assert(is_cell_stage_v<median_stage<5>>);
static_assert(is_cell_stage_v<local_rank_stage>);
static_assert(is_cell_stage_v<speaker_norm_stage>);
static_assert(!is_cell_stage_v<trend_stage>);  // a recurrence: row stage, host only
static_assert(!is_cell_stage_v<spectral_lowpass_stage>);
static_assert(!is_cell_stage_v<owns_memory>);
static_assert(!is_cell_stage_v<not_a_stage>);
static_assert(is_smoothing_stage_v<blur_121>);
static_assert(!is_smoothing_stage_v<not_a_stage>);
static_assert(smoothing_pipeline<median_stage<5>, blur_121, speaker_norm_stage>::runs_on_device);
static_assert(!default_pipeline::runs_on_device);
static_assert(std::is_trivially_copyable_v<smoothing_pipeline<median_stage<5>, add_speaker>>);

/// Median of the edge-padded window of width 5, by sorting.
float median5_reference(const std::vector<float>& x, int j) {
  std::vector<float> w;
  const int n = static_cast<int>(x.size());
  for (int d = -2; d <= 2; ++d) w.push_back(x[std::clamp(j + d, 0, n - 1)]);
  std::sort(w.begin(), w.end());
  return w[2];
}

std::vector<float> random_row(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = u(rng);
  return x;
}

TEST(CellStage, UserFunctorRunsThroughThePipeline) {
  for (const int n : {1, 2, 3, 7, 64, 1001}) {
    SCOPED_TRACE(std::to_string(n));
    const std::vector<float> x = random_row(n, 11u + static_cast<unsigned>(n));
    std::vector<float> out(n), scratch(n);
    smoothing_pipeline<median_stage<5>, blur_121> pipeline;
    pipeline.apply(x.data(), out.data(), scratch.data(), n, stage_context{});
    std::vector<float> median(n);
    for (int j = 0; j < n; ++j) median[j] = median5_reference(x, j);
    for (int j = 0; j < n; ++j) {
      const float left = median[std::max(j - 1, 0)], right = median[std::min(j + 1, n - 1)];
      EXPECT_EQ(out[j], 0.25f * left + 0.5f * median[j] + 0.25f * right) << "cell " << j;
    }
  }
}

TEST(CellStage, ContextAndParametersReachTheFunctor) {
  const int n = 9;
  const std::vector<float> x = random_row(n, 3);
  const std::vector<std::int32_t> speaker = {0, 1, 2, 0, 1, 2, 0, 1, 2};
  stage_context ctx;
  ctx.speaker = speaker.data();
  smoothing_pipeline<add_speaker> pipeline;
  pipeline.stage<0>().gain = 0.5f;
  std::vector<float> out(n), scratch(n);
  pipeline.apply(x.data(), out.data(), scratch.data(), n, ctx);
  for (int j = 0; j < n; ++j) EXPECT_EQ(out[j], x[j] + 0.5f * static_cast<float>(speaker[j]));
}

TEST(CellStage, LibraryStagesCellByCellMatchTheirFormulas) {
  const int n = 203;
  const std::vector<float> x = random_row(n, 5);
  const std::vector<std::int32_t> speaker(n, 1);
  const std::vector<float> baseline = {0.0f, 0.25f};
  const stage_context ctx{speaker.data(), baseline.data(), 2, nullptr};
  smoothing_pipeline<median_stage<5>, local_rank_stage, speaker_norm_stage> pipeline;
  pipeline.stage<1>().block = 8;
  std::vector<float> per_cell(n), row(n), scratch(n);
  pipeline.apply_per_cell(x.data(), per_cell.data(), scratch.data(), n, ctx);
  pipeline.apply(x.data(), row.data(), scratch.data(), n, ctx);
  // Reference: median by sorting, rank inside blocks of 8 (ties by position), / 0.25.
  std::vector<float> median(n);
  for (int j = 0; j < n; ++j) median[j] = median5_reference(x, j);
  for (int j = 0; j < n; ++j) {
    const int first = j / 8 * 8, last = std::min(first + 8, n);
    int below = 0;
    for (int i = first; i < last; ++i) {
      below += median[i] < median[j] || (median[i] == median[j] && i < j);
    }
    const float expected = static_cast<float>(below + 1) * (1.0f / 8.0f) / 0.25f;
    EXPECT_EQ(per_cell[j], expected) << "cell " << j;
    EXPECT_EQ(row[j], expected) << "cell " << j;
  }
}

}  // namespace
