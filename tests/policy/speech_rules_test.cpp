// SPDX-License-Identifier: Apache-2.0
// The speech rules (attention sinks, temporal coverage, alignment frontier) and the
// attention-mass correction, against hand-computed selections.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <audiokv/policy/speech/attention_mass.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/earlier_floor.hpp"
#include "common/stream.hpp"

namespace {

using namespace audiokv;

std::vector<std::int32_t> marked(const std::vector<std::uint8_t>& tier, std::uint8_t level) {
  std::vector<std::int32_t> out;
  for (std::size_t j = 0; j < tier.size(); ++j) {
    if (tier[j] == level) out.push_back(static_cast<std::int32_t>(j));
  }
  return out;
}

struct cells {
  explicit cells(std::int32_t n) : pos(n), voice(n, 1.0f), score(n, 0.0f), tier(n, 0) {
    for (std::int32_t j = 0; j < n; ++j) pos[j] = j;
  }
  std::int32_t n() const { return static_cast<std::int32_t>(pos.size()); }
  std::int32_t floor(std::int32_t quota, std::int32_t segment, std::int64_t dense_from = INT64_MIN,
                     double past = 1.0, double silence = 1.0) {
    return mark_coverage_floor(pos.data(), voice.data(), score.data(), n(), quota, segment,
                               dense_from, past, silence, tier.data(), 2);
  }
  std::vector<std::int32_t> pos;
  std::vector<float> voice, score;
  std::vector<std::uint8_t> tier;
};

// 20 frames, segments of 10, floor 4: quotas 2 + 2, sub-spans [0,5) [5,10) [10,15) [15,20);
// equal scores pick the cell nearest each centre (2.5 -> 2, the older of 2 and 3; 7.5 -> 7...).
TEST(TemporalCoverage, EqualScoresSpreadEvenlyOverSubSpans) {
  cells c(20);
  EXPECT_EQ(c.floor(4, 10), 4);
  EXPECT_EQ(marked(c.tier, 2), (std::vector<std::int32_t>{2, 7, 12, 17}));
}

TEST(TemporalCoverage, InsideASubSpanTheBestScoreWins) {
  cells c(20);
  c.score[4] = 1.0f;   // sub-span [0, 5)
  c.score[15] = 0.5f;  // sub-span [15, 20)
  c.floor(4, 10);
  EXPECT_EQ(marked(c.tier, 2), (std::vector<std::int32_t>{4, 7, 12, 15}));
}

// Density 0 before position 10: the whole floor goes to [10, 20), sub-spans of 2.5 frames with
// centres 11.25, 13.75, 16.25, 18.75.
TEST(TemporalCoverage, PastDensityMovesTheFloorAhead) {
  cells c(20);
  c.floor(4, 10, /*dense_from=*/10, /*past=*/0.0);
  EXPECT_EQ(marked(c.tier, 2), (std::vector<std::int32_t>{11, 14, 16, 19}));
}

TEST(TemporalCoverage, SilenceWeightMovesTheFloorToVoicedSegments) {
  cells c(20);
  for (std::int32_t j = 0; j < 10; ++j) c.voice[j] = 0.0f;
  c.floor(4, 10, INT64_MIN, 1.0, /*silence=*/0.0);
  EXPECT_EQ(marked(c.tier, 2), (std::vector<std::int32_t>{11, 14, 16, 19}));
}

TEST(TemporalCoverage, AKeptCellCoversItsSubSpan) {
  cells c(20);
  c.tier[6] = 3;  // a sink in [5, 10)
  EXPECT_EQ(c.floor(4, 10), 3);
  EXPECT_EQ(marked(c.tier, 2), (std::vector<std::int32_t>{2, 12, 17}));
}

// Cumulative rounding: 3 segments of 10 and a floor of 4 -> round(4/3)=1, round(8/3)-1=2,
// 4-3=1; no segment is skipped although 4 is not a multiple of 3.
TEST(TemporalCoverage, QuotasFollowCumulativeRounding) {
  cells c(30);
  c.floor(4, 10);
  // [0,10): one sub-span, centre 5; [10,20): two, centres 12.5 -> 12, 17.5 -> 17; [20,30): 25.
  EXPECT_EQ(marked(c.tier, 2), (std::vector<std::int32_t>{5, 12, 17, 25}));
}

TEST(AttentionSinks, FirstCellsThenHighestImportanceWithinTheCap) {
  std::vector<std::int32_t> pos(10), order(10);
  std::vector<float> importance(10, 0.1f);
  for (std::int32_t j = 0; j < 10; ++j) pos[j] = j;
  importance[7] = 0.9f;
  importance[4] = 0.8f;
  importance[1] = 1.0f;  // already a first-cell sink: not counted twice
  std::vector<std::uint8_t> tier(10, 0);
  attention_sinks_config config;
  config.first = 2;
  config.observed = 2;
  config.max_share = 1.0f;
  EXPECT_EQ(mark_attention_sinks(config, pos.data(), importance.data(), 10, 8, tier.data(), 3,
                                 order.data()),
            4);
  EXPECT_EQ(marked(tier, 3), (std::vector<std::int32_t>{0, 1, 4, 7}));
  // cap = floor(0.25 * 8) = 2: only the first cells.
  std::fill(tier.begin(), tier.end(), 0);
  config.max_share = 0.25f;
  EXPECT_EQ(mark_attention_sinks(config, pos.data(), importance.data(), 10, 8, tier.data(), 3,
                                 order.data()),
            2);
  EXPECT_EQ(marked(tier, 3), (std::vector<std::int32_t>{0, 1}));
}

TEST(AlignmentFrontier, MedianOfRecentPeaksNeverMovesBack) {
  alignment_frontier f(3);
  EXPECT_FALSE(f.known(true));
  f.observe_peak(10);
  EXPECT_EQ(f.position(), 10);
  f.observe_peak(1499);  // a one-step jump to a sink: median(10, 1499) lower = 10
  EXPECT_EQ(f.position(), 10);
  f.observe_peak(20);  // median(10, 1499, 20) = 20
  EXPECT_EQ(f.position(), 20);
  f.observe_peak(5);  // median(1499, 20, 5) = 20
  f.observe_peak(6);  // median(20, 5, 6) = 6 < 20: stays
  EXPECT_EQ(f.position(), 20);
  EXPECT_FALSE(f.known(false));
  f.set_position(7);  // the engine's position replaces the estimate
  EXPECT_TRUE(f.known(false));
  EXPECT_EQ(f.position(), 7);
}

// Tier order: sink > floor > ahead > rest; inside a tier the raw score order.
TEST(SpeechRules, ScoresBecomeTierThenRank) {
  const std::int32_t n = 8;
  std::vector<std::int32_t> pos(n), order(n);
  std::vector<float> voice(n, 1.0f), importance(n, 0.0f), raw(n);
  std::vector<std::uint8_t> tier(n);
  std::vector<float> score = {0.7f, 0.6f, 0.5f, 0.4f, 0.3f, 0.2f, 0.1f, 0.0f};
  for (std::int32_t j = 0; j < n; ++j) pos[j] = j;
  speech_rules_config config;
  config.sinks.enabled = true;
  config.sinks.first = 1;
  config.sinks.observed = 0;
  config.sinks.max_share = 1.0f;
  config.coverage.segment_ms = 80.0f;  // one segment of 8 frames of 10 ms
  config.coverage.share = 0.5f;        // floor(0.5 * (5 - 1)) = 2 sub-spans: [0, 4), [4, 8)
  config.frontier.lookback_ms = 0.0f;
  config.frontier.frontier_density = 0.0f;  // one floor over all time
  test::use_segment_ms_floor(config);
  alignment_frontier frontier;
  frontier.set_position(6);
  ASSERT_TRUE(apply_speech_rules(config, 10.0f, pos.data(), voice.data(), importance.data(),
                                 nullptr, 0, n, 5, frontier, score.data(), raw.data(), tier.data(),
                                 order.data()));
  // Cell 0: sink (it also covers [0, 4)); cell 4: the floor of [4, 8) (best score there);
  // cells 6, 7: ahead of the frontier; 1, 2, 3, 5: rest. Scores: 4 tier + 1.5 + 1.5 x/(1+|x|),
  // x = raw / mean |raw| (mean 0.35).
  auto expected = [](int level, float value) {
    const double x = value / 0.35;
    return static_cast<float>(4.0 * level + 1.5 + 1.5 * x / (1.0 + std::fabs(x)));
  };
  EXPECT_FLOAT_EQ(score[0], expected(3, 0.7f));
  EXPECT_FLOAT_EQ(score[4], expected(2, 0.3f));
  EXPECT_FLOAT_EQ(score[6], expected(1, 0.1f));
  EXPECT_FLOAT_EQ(score[7], expected(1, 0.0f));
  EXPECT_FLOAT_EQ(score[1], expected(0, 0.6f));
  EXPECT_FLOAT_EQ(score[5], expected(0, 0.2f));
  // Eviction order: rest by score (5, 3, 2, 1), then ahead (7, 6), then floor, then sink.
  const std::vector<std::int32_t> order_expected = {5, 3, 2, 1, 7, 6, 4, 0};
  for (std::size_t i = 1; i < order_expected.size(); ++i) {
    EXPECT_LT(score[order_expected[i - 1]], score[order_expected[i]]) << i;
  }
  EXPECT_EQ(raw[0], 0.7f);
  speech_rules_config off = config;
  off.sinks.enabled = off.coverage.enabled = off.frontier.enabled = false;
  EXPECT_FALSE(apply_speech_rules(off, 10.0f, pos.data(), voice.data(), importance.data(), nullptr,
                                  0, n, 5, frontier, score.data(), raw.data(), tier.data(),
                                  order.data()));
}

// Seven rows of different lengths whose values span 2^-30 .. 2^30 with both signs, so the sum
// depends on the order of its additions: each row's sum must be the left-to-right double sum of
// its |values|, written out here as the formula.
TEST(SpeechRules, ScaleSumsOfRowsSideBySideAreEachRowsSumInIndexOrder) {
  constexpr std::int32_t rows = 7;
  std::vector<std::vector<float>> values(rows);
  std::uint32_t seed = 3;
  for (std::int32_t r = 0; r < rows; ++r) {
    values[r].resize(40 + 13 * r);
    for (float& v : values[r]) {
      seed = seed * 1664525u + 1013904223u;
      const int exponent = static_cast<int>(seed >> 24) % 61 - 30;
      v = std::ldexp(1.0f + static_cast<float>(seed & 0xffff) / 65536.0f, exponent);
      if (seed & 0x10000) v = -v;
    }
  }
  const float* scores[rows];
  std::int32_t n[rows];
  for (std::int32_t r = 0; r < rows; ++r) {
    scores[r] = values[r].data();
    n[r] = static_cast<std::int32_t>(values[r].size());
  }
  double sums[rows];
  speech_scale_sums(scores, n, rows, sums);
  for (std::int32_t r = 0; r < rows; ++r) {
    double expected = 0.0;
    for (const float v : values[r]) expected = expected + (v < 0.0f ? -double{v} : double{v});
    EXPECT_EQ(sums[r], expected) << "row " << r;
  }
  // The rules given that sum write what they write when they sum themselves.
  cells a(n[6]), b(n[6]);
  std::copy(values[6].begin(), values[6].end(), a.score.begin());
  std::copy(values[6].begin(), values[6].end(), b.score.begin());
  speech_rules_config config;
  alignment_frontier frontier;
  std::vector<std::int32_t> order(n[6]);
  std::vector<float> raw_a(n[6]), raw_b(n[6]), importance(n[6], 0.5f);
  importance[17] = 0.9f;
  ASSERT_TRUE(apply_speech_rules(config, 10.0f, a.pos.data(), a.voice.data(), importance.data(),
                                 nullptr, 0, n[6], n[6] / 2, frontier, a.score.data(), raw_a.data(),
                                 a.tier.data(), order.data()));
  ASSERT_TRUE(apply_speech_rules(config, 10.0f, b.pos.data(), b.voice.data(), importance.data(),
                                 nullptr, 0, n[6], n[6] / 2, frontier, b.score.data(), raw_b.data(),
                                 b.tier.data(), order.data(), &sums[6]));
  EXPECT_EQ(a.score, b.score);
  EXPECT_EQ(raw_a, raw_b);
}

/// Largest distance between consecutive kept positions of a one-shot plan to `budget` cells
/// of 1000 frames whose attention (six steps) covers only the first 100.
std::int32_t largest_gap_after_one_shot(const audiokv_config& config) {
  tiered_cache<> cache(config);
  const auto f = test::frames(0, 1000);
  cache.append(f.data(), 1000);
  std::vector<float> attention(1000, 0.0f);
  for (int step = 0; step < 6; ++step) {
    for (std::int32_t j = 0; j < 1000; ++j) attention[j] = j < 100 ? 0.009f : 0.0001f;
    cache.observe(attention.data(), 1000);
  }
  eviction_plan plan;
  cache.plan_to(config.budget, plan);
  cache.apply(plan);
  std::int32_t gap = 0;
  for (std::int32_t j = 1; j < cache.num_cells(); ++j) {
    gap = std::max(gap, cache.positions()[j] - cache.positions()[j - 1]);
  }
  return gap;
}

// The score-only selection empties the audio the decoder has not reached. The coverage floor
// (share 1, no sinks) keeps one cell per sub-span of 1000 / 190 ~ 5.3 frames (time weights
// differ only at the recent window), so no two consecutive kept cells are far apart.
TEST(SpeechRules, DefaultCacheCoversTheWholeClipInOneShot) {
  audiokv_config config;
  config.budget = 200;
  config.capacity = 1000;
  config.frame_ms = 20.0f;
  EXPECT_LE(largest_gap_after_one_shot(config), 15);
  config.speech.sinks.enabled = config.speech.coverage.enabled = false;
  config.speech.frontier.enabled = false;
  EXPECT_GT(largest_gap_after_one_shot(config), 100);
}

/// Positions a one-shot plan to 200 cells keeps of 1000 frames of 20 ms (no attention observed,
/// no sinks) with the engine's frontier at 600, under `speech` (the rest of the configuration
/// is the default).
std::vector<std::int32_t> kept_with_frontier_at_600(const speech_rules_config& speech) {
  audiokv_config config;
  config.budget = 200;
  config.capacity = 1000;
  config.frame_ms = 20.0f;
  config.speech = speech;
  config.speech.sinks.enabled = false;
  tiered_cache<> cache(config);
  const auto f = test::frames(0, 1000);
  cache.append(f.data(), 1000);
  cache.set_alignment_position(600);
  eviction_plan plan;
  cache.plan_to(200, plan);
  cache.apply(plan);
  return {cache.positions(), cache.positions() + cache.num_cells()};
}

// The default floor is the segment floor with the stride's age profile behind the frontier
// (past density 0, decay T = 1 x the floor's F cells). The newest min_retention_ms (200 ms, 10
// frames) are protected outside the floor, so F = 190. With the frontier at 600 (dense from 550)
// a frame a frames before 550 weighs exp(-a / 190), one from 550 on weighs 1, and each stretch
// keeps F x (its weight / all weight) cells: [0, 275) 190 (e^-1.447 - e^-2.895) = 34.2,
// [275, 550) 190 (1 - e^-1.447) = 145.3, [550, 1000) 450, of 629.5: 10.3, 43.9 and 135.8 cells,
// plus the 10 protected ones.
TEST(SpeechRules, DefaultFloorKeepsTheStridesAgeProfileBehindTheFrontier) {
  const speech_rules_config defaults;
  EXPECT_EQ(defaults.coverage.segment_cells, 1);
  EXPECT_EQ(defaults.frontier.past_density, 0.0f);
  EXPECT_EQ(defaults.frontier.past_decay_floor, 1.0f);
  const auto kept = kept_with_frontier_at_600(defaults);
  std::int32_t old_past = 0, recent_past = 0, ahead = 0;
  for (const std::int32_t p : kept) (p < 275 ? old_past : p < 550 ? recent_past : ahead)++;
  EXPECT_EQ(kept.size(), 200u);
  EXPECT_NEAR(old_past, 10, 2);
  EXPECT_NEAR(recent_past, 44, 2);
  EXPECT_NEAR(ahead, 146, 2);
}

// With the frontier at 600, frames before 600 - 50 are covered at past_density (0.25) of the
// density ahead.
TEST(SpeechRules, FramesBehindTheFrontierThinToAStridedPast) {
  speech_rules_config speech;
  speech.coverage.share = 1.0f;
  speech.frontier.frontier_density = 0.0f;  // one floor over all time
  test::use_segment_ms_floor(speech);
  std::int32_t past = 0, ahead = 0;
  for (const std::int32_t p : kept_with_frontier_at_600(speech)) (p < 550 ? past : ahead)++;
  // Weighted time: 550 * 0.25 + 450 = 587.5; floor cells ~ 200 * 137.5 / 587.5 = 47 behind.
  EXPECT_NEAR(past, 47, 3);
  EXPECT_NEAR(ahead, 153, 3);
}

// Age decay T = 10 frames, past density 0, dense from 10: [0, 10) weighs
// 10 ln((10 + 10 - 0) / (10 + 10 - 10)) = 10 ln 2 = 6.93 against 10 for [10, 20), so the
// quotas are round(4 * 6.93 / 16.93) = 2 and 2 (a constant density 0 gives 0 and 4).
TEST(TemporalCoverage, AgeDecayGivesThePastAHarmonicWeight) {
  cells c(20);
  EXPECT_EQ(mark_coverage_floor(c.pos.data(), c.voice.data(), c.score.data(), c.n(), 4, 10,
                                /*dense_from=*/10, /*past_density=*/0.0, /*silence=*/1.0,
                                c.tier.data(), 2, INT64_MAX, /*past_decay_frames=*/10.0),
            4);
  EXPECT_EQ(marked(c.tier, 2), (std::vector<std::int32_t>{2, 7, 12, 17}));
  // Past density 0.5, T = 5: [0, 10) weighs 0.5 * 10 + 0.5 * 5 ln(15 / 5), [10, 20) 10; without
  // the decay, 0.5 * 10 + 10.
  EXPECT_NEAR(policy::speech::detail::coverage_time_weight(0, 20, 10, 0.5, 5.0),
              15.0 + 2.5 * std::log(3.0), 1e-12);
  EXPECT_DOUBLE_EQ(policy::speech::detail::coverage_time_weight(0, 20, 10, 0.5, 0.0), 15.0);
}

// The exponential profile's weight against a midpoint sum of past + (1 - past) exp(-(D - p) / T)
// over 200,000 steps per frame range (error well below 1e-6 here).
TEST(TemporalCoverage, ExponentialDecayWeightIsTheIntegralOfItsProfile) {
  struct shape {
    std::int64_t from, to, dense_from;
    double past, decay;
  };
  for (const shape& c :
       {shape{0, 20, 10, 0.0, 5.0}, shape{0, 20, 10, 0.3, 7.0}, shape{-40, 5, -10, 0.25, 12.0},
        shape{3, 9, 50, 0.0, 2.0}, shape{0, 30, 0, 0.5, 4.0}}) {
    double sum = 0.0;
    const std::int64_t split = std::min(std::max(c.dense_from, c.from), c.to);
    const int steps = 200000;
    const double h = static_cast<double>(split - c.from) / steps;
    for (int i = 0; i < steps; ++i) {
      const double p = static_cast<double>(c.from) + (i + 0.5) * h;
      sum += h * (c.past +
                  (1.0 - c.past) * std::exp(-(static_cast<double>(c.dense_from) - p) / c.decay));
    }
    sum += static_cast<double>(c.to - split);
    EXPECT_NEAR(
        policy::speech::detail::coverage_time_weight(c.from, c.to, c.dense_from, c.past, c.decay,
                                                     /*exponential=*/true),
        sum, 1e-6)
        << c.from << " " << c.to << " " << c.dense_from;
  }
}

// Exponential decay T = 5, past density 0, dense from 10, floor 10, segments of 10: [0, 10)
// weighs 5 (1 - e^-2) = 4.32 against 10, so it gets round(10 * 4.32 / 14.32) = 3 cells (the
// harmonic profile: 5 ln 3 = 5.49 -> round(3.55) = 4). Equal scores pick the cells nearest the
// centres 1.67, 5, 8.33 and, in sub-spans of 10 / 7 frames, 10.71, 12.14, ..., 19.29.
TEST(TemporalCoverage, ExponentialDecayGivesThePastItsShare) {
  cells c(20);
  EXPECT_EQ(mark_coverage_floor(c.pos.data(), c.voice.data(), c.score.data(), c.n(), 10, 10,
                                /*dense_from=*/10, /*past_density=*/0.0, /*silence=*/1.0,
                                c.tier.data(), 2, INT64_MAX, /*past_decay_frames=*/5.0,
                                /*exponential_decay=*/true),
            10);
  EXPECT_EQ(marked(c.tier, 2), (std::vector<std::int32_t>{2, 5, 8, 11, 12, 14, 15, 16, 18, 19}));
  cells harmonic(20);
  mark_coverage_floor(harmonic.pos.data(), harmonic.voice.data(), harmonic.score.data(),
                      harmonic.n(), 10, 10, 10, 0.0, 1.0, harmonic.tier.data(), 2, INT64_MAX, 5.0);
  const auto kept = marked(harmonic.tier, 2);
  EXPECT_EQ(std::count_if(kept.begin(), kept.end(), [](std::int32_t p) { return p < 10; }), 4);
}

// One sub-span [0, 10), centre 5. The whole band lets the best score win anywhere; a band of 0.5
// (|p - 5| <= 2.5) lets it win only in 3..7, and a sub-span with no cell in its band keeps the
// cell nearest the centre (the older of two).
TEST(TemporalCoverage, CentreBandBoundsWhereTheScoreChooses) {
  auto pick = [](std::vector<std::int32_t> pos, std::vector<float> score, double band) {
    const auto n = static_cast<std::int32_t>(pos.size());
    std::vector<float> voice(pos.size(), 1.0f);
    std::vector<std::uint8_t> tier(pos.size(), 0);
    EXPECT_EQ(mark_coverage_floor(pos.data(), voice.data(), score.data(), n, 1, 10, INT64_MIN, 1.0,
                                  1.0, tier.data(), 2, INT64_MAX, 0.0, false, band),
              1);
    for (std::int32_t j = 0; j < n; ++j)
      if (tier[j] == 2) return pos[j];
    return -1;
  };
  const std::vector<std::int32_t> all = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> score(10, 1.0f);
  score[0] = 9.0f;
  EXPECT_EQ(pick(all, score, 1.0), 0);
  EXPECT_EQ(pick(all, score, 0.5), 5);
  score[7] = 5.0f;
  EXPECT_EQ(pick(all, score, 0.5), 7);
  EXPECT_EQ(pick(all, score, 0.3), 5);  // |7 - 5| > 1.5
  EXPECT_EQ(pick({0, 1, 9}, {9.0f, 1.0f, 1.0f}, 0.5), 1);
  EXPECT_EQ(pick({0, 1, 9}, {9.0f, 1.0f, 1.0f}, 1.0), 0);
}

/// Floor cells of apply_speech_rules() on 20 cells at positions 0..19 of 10 ms, equal scores,
/// segments of 10 frames, the engine's frontier at 15 with a 5-frame look-back (dense from 10).
std::vector<std::int32_t> floor_cells(std::int32_t keep, float frontier_density,
                                      float past_density = 0.25f) {
  const std::int32_t n = 20;
  std::vector<std::int32_t> pos(n), order(n);
  std::vector<float> voice(n, 1.0f), importance(n, 0.0f), score(n, 0.0f), raw(n);
  std::vector<std::uint8_t> tier(n);
  for (std::int32_t j = 0; j < n; ++j) pos[j] = j;
  speech_rules_config config;
  config.sinks.enabled = false;
  config.coverage.segment_ms = 100.0f;
  config.coverage.share = 1.0f;
  config.frontier.lookback_ms = 50.0f;
  test::use_segment_ms_floor(config, past_density);
  config.frontier.frontier_density = frontier_density;
  alignment_frontier frontier;
  frontier.set_position(15);
  apply_speech_rules(config, 10.0f, pos.data(), voice.data(), importance.data(), nullptr, 0, n,
                     keep, frontier, score.data(), raw.data(), tier.data(), order.data());
  return marked(tier, static_cast<std::uint8_t>(speech_tier::floor));
}

// Frontier first, density 0.5: [10, 20) takes floor(0.5 * 10) = 5 floor cells (sub-spans of 2,
// centres 11, 13, ..., 19), the other 3 of the 8 cover [0, 10) (sub-spans of 10/3, centres
// 1.67, 5, 8.33). Without it, one floor: weights 0.25 * 10 and 10, quotas round(8 * 2.5 /
// 12.5) = 2 and 6.
TEST(SpeechRules, FrontierFirstFloorCoversTheFrontierBeforeThePast) {
  EXPECT_EQ(floor_cells(8, 0.5f), (std::vector<std::int32_t>{2, 5, 8, 11, 13, 15, 17, 19}));
  EXPECT_EQ(floor_cells(8, 0.0f), (std::vector<std::int32_t>{2, 7, 11, 12, 14, 16, 17, 19}));
  // Density 1 and a floor of 8: all 8 in [10, 20) (sub-spans of 1.25, centres 10.625, 11.875,
  // ..., 19.375), none behind.
  EXPECT_EQ(floor_cells(8, 1.0f), (std::vector<std::int32_t>{11, 12, 13, 14, 16, 17, 18, 19}));
  // A floor of 12 holds every cell of [10, 20) and covers [0, 10) with the 2 left (centres
  // 2.5 -> 2, the older of a tie, and 7.5 -> 7); with past density 0 the past has no weight,
  // so the 2 left go to the scores instead.
  EXPECT_EQ(floor_cells(12, 1.0f),
            (std::vector<std::int32_t>{2, 7, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_EQ(floor_cells(12, 1.0f, 0.0f),
            (std::vector<std::int32_t>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
}

// Positions 0..5, keep 0, 3, 5: cell 1 -> 0 (distance 1 < 2), cell 2 -> 3, cell 4 -> 3 (tie
// with 5: the older). Weights 2, 3, 1.
TEST(AttentionMass, EvictedCellsJoinTheNearestKeptCell) {
  attention_mass mass(6);
  mass.append(6);
  eviction_plan plan;
  plan.n_kv_before = 6;
  plan.n_kv_after = 3;
  plan.move_to = {0, -1, -1, 1, -1, 2};
  const std::vector<std::int32_t> pos = {0, 1, 2, 3, 4, 5};
  mass.apply(plan, pos.data());
  ASSERT_EQ(mass.size(), 3);
  EXPECT_EQ(mass.weights()[0], 2.0);
  EXPECT_EQ(mass.weights()[1], 3.0);
  EXPECT_EQ(mass.weights()[2], 1.0);
  EXPECT_FLOAT_EQ(mass.logit_bias()[1], std::log(3.0f));
  EXPECT_EQ(mass.logit_bias()[2], 0.0f);
  // A second plan folds weights, not counts: keep slot 1 only -> 6.
  plan.n_kv_before = 3;
  plan.n_kv_after = 1;
  plan.move_to = {-1, 0, -1};
  const std::vector<std::int32_t> pos2 = {0, 3, 5};
  mass.apply(plan, pos2.data());
  EXPECT_EQ(mass.weights()[0], 6.0);
}

/// Expects config.validate() to throw an audiokv::error naming `field`.
void expect_rejected(const audiokv_config& config, const char* field) {
  try {
    config.validate();
    ADD_FAILURE() << "no error for " << field;
  } catch (const audiokv::error& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(SpeechRules, ConfigValidationNamesTheField) {
  audiokv_config config;
  config.budget = 100;
  config.speech.coverage.share = 1.5f;
  expect_rejected(config, "config.speech.coverage.share");
  config.speech.coverage.share = 0.5f;
  config.speech.frontier.filter = 4;
  EXPECT_THROW(config.validate(), audiokv::error);
  config.speech.frontier.filter = 5;
  for (const float bad : {-0.1f, 1.5f, std::nanf("")}) {
    audiokv_config c = config;
    c.speech.frontier.frontier_density = bad;
    expect_rejected(c, "config.speech.frontier.frontier_density");
  }
  for (const float bad : {-1.0f, 2e6f, std::nanf("")}) {
    audiokv_config c = config;
    c.speech.frontier.past_decay_floor = bad;
    expect_rejected(c, "config.speech.frontier.past_decay_floor");
  }
  {
    audiokv_config c = config;  // two decays at once: which one applies would be a guess
    c.speech.frontier.past_decay_floor = 1.0f;
    c.speech.frontier.past_decay_ms = 2000.0f;
    expect_rejected(c, "config.speech.frontier.past_decay_floor");
  }
  for (const int bad : {-1, 9}) {
    audiokv_config c = config;
    c.speech.coverage.segment_cells = bad;
    expect_rejected(c, "config.speech.coverage.segment_cells");
  }
  for (const float bad : {0.0f, -0.5f, 1.5f, std::nanf("")}) {
    audiokv_config c = config;
    c.speech.coverage.centre_band = bad;
    expect_rejected(c, "config.speech.coverage.centre_band");
  }
  for (const float bad : {-0.1f, 1.5f, std::nanf("")}) {
    audiokv_config c = config;
    c.speech.coverage.phase = bad;
    expect_rejected(c, "config.speech.coverage.phase");
  }
  for (const float bad : {-1.0f, 2e9f, std::nanf("")}) {
    audiokv_config c = config;
    c.speech.frontier.past_decay_ms = bad;
    expect_rejected(c, "config.speech.frontier.past_decay_ms");
  }
}

// Text cells (frame_flag_text) are outside the coverage floor and the frontier: the floor's
// quota shrinks to the audio cells' share of the free cells (floor(1.0 x 4 x 4/8) = 2) and
// lands on audio cells only; every text cell keeps the lowest tier (its score ranks it).
TEST(SpeechRules, TextCellsAreLeftToTheirScores) {
  const std::int32_t n = 8;
  std::vector<std::int32_t> pos(n), order(n);
  std::vector<float> voice(n, 1.0f), importance(n, 0.0f), raw(n);
  std::vector<std::uint8_t> tier(n);
  const std::vector<std::uint8_t> text = {1, 1, 1, 1, 0, 0, 0, 0};
  std::vector<float> score = {0.7f, 0.6f, 0.5f, 0.4f, 0.3f, 0.2f, 0.1f, 0.05f};
  for (std::int32_t j = 0; j < n; ++j) pos[j] = j;
  speech_rules_config config;
  config.coverage.segment_ms = 80.0f;  // one segment of 8 frames of 10 ms
  config.coverage.share = 1.0f;
  config.frontier.enabled = false;
  alignment_frontier frontier;
  ASSERT_TRUE(apply_speech_rules(config, 10.0f, pos.data(), voice.data(), importance.data(),
                                 nullptr, 0, n, 4, frontier, score.data(), raw.data(), tier.data(),
                                 order.data(), nullptr, text.data()));
  const double mean = (0.7 + 0.6 + 0.5 + 0.4 + 0.3 + 0.2 + 0.1 + 0.05) / 8;
  auto level = [&](std::int32_t j) {
    const double x = raw[j] / mean;
    return std::lround((score[j] - 1.5 - 1.5 * x / (1.0 + std::fabs(x))) / 4.0);
  };
  std::int32_t floor_cells = 0;
  for (std::int32_t j = 0; j < n; ++j) {
    if (text[j] != 0) {
      EXPECT_EQ(level(j), 0) << "text cell " << j;
    } else {
      EXPECT_TRUE(level(j) == 0 || level(j) == 2) << "audio cell " << j;
      floor_cells += level(j) == 2 ? 1 : 0;
    }
  }
  EXPECT_GE(floor_cells, 1);
  EXPECT_LE(floor_cells, 2);
  // Every cell text: no floor at all, every score in the lowest tier, in the order of raw.
  const std::vector<std::uint8_t> all_text(n, 1);
  score = {0.7f, 0.6f, 0.5f, 0.4f, 0.3f, 0.2f, 0.1f, 0.05f};
  config.frontier.enabled = true;  // estimated: there is no audio cell to estimate it from
  ASSERT_TRUE(apply_speech_rules(config, 10.0f, pos.data(), voice.data(), importance.data(),
                                 nullptr, 0, n, 4, frontier, score.data(), raw.data(), tier.data(),
                                 order.data(), nullptr, all_text.data()));
  for (std::int32_t j = 0; j < n; ++j) {
    EXPECT_EQ(level(j), 0) << j;
    if (j > 0) {
      EXPECT_LT(score[j], score[j - 1]) << j;
    }
  }
}

// The estimated frontier is the peak of the audio cells' importance: a text cell with more
// importance does not move it, and text cells after it do not join the `ahead` tier.
TEST(SpeechRules, TheFrontierIsEstimatedOverAudioCells) {
  const std::int32_t n = 8;
  std::vector<std::int32_t> pos(n), order(n);
  std::vector<float> voice(n, 1.0f), raw(n), score(n, 0.5f);
  std::vector<float> importance = {0.0f, 0.1f, 0.5f, 0.1f, 0.2f, 0.3f, 1.0f, 0.1f};
  std::vector<std::uint8_t> tier(n);
  const std::vector<std::uint8_t> text = {0, 0, 0, 0, 1, 1, 1, 1};
  for (std::int32_t j = 0; j < n; ++j) pos[j] = j;
  speech_rules_config config;
  config.coverage.enabled = false;
  config.frontier.lookback_ms = 0.0f;
  config.frontier.frontier_density = 0.0f;
  alignment_frontier frontier;
  ASSERT_TRUE(apply_speech_rules(config, 10.0f, pos.data(), voice.data(), importance.data(),
                                 nullptr, 0, n, 4, frontier, score.data(), raw.data(), tier.data(),
                                 order.data(), nullptr, text.data()));
  // Equal raw scores: x = 1, score = 4 tier + 2.25. Audio peak: cell 2, so cells 2, 3 are ahead.
  for (std::int32_t j = 0; j < n; ++j) {
    EXPECT_FLOAT_EQ(score[j], (j == 2 || j == 3) ? 6.25f : 2.25f) << j;
  }
  // Without text flags the peak is cell 6: cells 6 and 7 are ahead.
  std::fill(score.begin(), score.end(), 0.5f);
  ASSERT_TRUE(apply_speech_rules(config, 10.0f, pos.data(), voice.data(), importance.data(),
                                 nullptr, 0, n, 4, frontier, score.data(), raw.data(), tier.data(),
                                 order.data()));
  for (std::int32_t j = 0; j < n; ++j) {
    EXPECT_FLOAT_EQ(score[j], (j >= 6) ? 6.25f : 2.25f) << j;
  }
}

// One step's attention over `cells` cells from the LCG `state`: u + 1e-3 per cell (u uniform in
// [0, 1)), or u^3 + 1e-3 when `peaked`, normalised to sum 1.
void random_attention(std::uint32_t& state, std::int32_t cells, bool peaked,
                      std::vector<float>& out) {
  out.assign(static_cast<std::size_t>(cells), 0.0f);
  float sum = 0.0f;
  for (auto& p : out) {
    state = state * 1664525u + 1013904223u;
    const float u = static_cast<float>(state >> 8) / 16777216.0f;
    p = (peaked ? u * u * u : u) + 1e-3f;
    sum += p;
  }
  for (auto& p : out) p /= sum;
}

// A stream of text frames under the default rules plans exactly as a cache whose coverage floor
// and frontier are off: text is ranked by attention alone. (The plain cache keeps one rule on
// that marks nothing, sinks with first = observed = 0, so both rank the same rewritten scores;
// text is smoothed and has no window of its own here, as audio.)
TEST(SpeechRules, TextStreamPlansAsWithoutCoverageAndFrontier) {
  audiokv_config with_rules;
  with_rules.budget = 64;
  with_rules.capacity = 80;
  with_rules.smooth_text = true;
  with_rules.text_recent_share = 0.0f;
  audiokv_config without = with_rules;
  without.speech.coverage.enabled = false;
  without.speech.frontier.enabled = false;
  without.speech.sinks.enabled = true;
  without.speech.sinks.first = 0;
  without.speech.sinks.observed = 0;
  tiered_cache<> text_cache(with_rules), plain_cache(without);
  std::uint32_t state = 12345u;
  std::vector<float> attention;
  eviction_plan a, b;
  for (std::int32_t step = 0; step < 400; ++step) {
    frame_meta f;
    f.pos = step;
    f.flags = frame_flag_text;
    text_cache.append(&f, 1);
    f.flags = frame_flag_none;
    plain_cache.append(&f, 1);
    const std::int32_t cells = text_cache.num_cells();
    random_attention(state, cells, /*peaked=*/false, attention);
    text_cache.observe(attention.data(), cells);
    plain_cache.observe(attention.data(), cells);
    if (text_cache.wants_eviction()) {
      ASSERT_TRUE(plain_cache.wants_eviction()) << step;
      text_cache.plan(a);
      plain_cache.plan(b);
      ASSERT_EQ(a.evict, b.evict) << step;
      text_cache.apply(a);
      plain_cache.apply(b);
    }
  }
}

// Without config.smooth_text (the default) a text cell's smoothed score is its importance over
// its speaker's baseline: a text stream plans exactly as a cache whose pipeline is speaker
// normalisation alone; with it (median and trend mixing neighbouring tokens) the first eviction
// is planned otherwise.
TEST(SpeechRules, UnsmoothedTextPlansAsSpeakerNormalisationAlone) {
  audiokv_config smoothed;
  smoothed.budget = 64;
  smoothed.capacity = 80;
  smoothed.smooth_text = true;
  audiokv_config unsmoothed = smoothed;
  unsmoothed.smooth_text = false;
  tiered_cache<> text_cache(unsmoothed), default_cache(smoothed);
  tiered_cache<smoothing_pipeline<speaker_norm_stage>> norm_cache(smoothed);
  std::uint32_t state = 777u;
  std::vector<float> attention;
  eviction_plan a, b;
  std::int32_t plans = 0;
  for (std::int32_t step = 0; step < 400; ++step) {
    frame_meta f;
    f.pos = step;
    f.flags = frame_flag_text;
    text_cache.append(&f, 1);
    norm_cache.append(&f, 1);
    if (plans == 0) default_cache.append(&f, 1);
    const std::int32_t cells = text_cache.num_cells();
    random_attention(state, cells, /*peaked=*/true, attention);  // a few tokens draw most of it
    text_cache.observe(attention.data(), cells);
    norm_cache.observe(attention.data(), cells);
    if (plans == 0) default_cache.observe(attention.data(), cells);
    if (!text_cache.wants_eviction()) continue;
    ASSERT_TRUE(norm_cache.wants_eviction()) << step;
    text_cache.plan(a);
    norm_cache.plan(b);
    ASSERT_EQ(a.evict, b.evict) << step;
    if (plans++ == 0) {
      eviction_plan c;
      default_cache.plan(c);
      EXPECT_NE(a.evict, c.evict) << "the smoothing made no difference to the first plan";
    }
    text_cache.apply(a);
    norm_cache.apply(b);
  }
  EXPECT_GT(plans, 5);
}

}  // namespace
