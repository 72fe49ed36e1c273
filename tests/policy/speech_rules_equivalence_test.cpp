// SPDX-License-Identifier: Apache-2.0
// The speech rules against a frozen copy of their first implementation: randomized inputs
// (gaps and negative positions, ties and zeros in the scores, protected cells, every frontier
// mode, sinks on and off, the configuration ranges' ends) give the same tiers, the same marked
// counts and bit for bit the same scores.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/policy/speech/speech_rules.hpp>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

// A frozen copy of the speech rules as first written: its only job is to pin their behaviour.
// Do not optimise or otherwise edit it.
namespace reference_v1 {

using audiokv::alignment_frontier;
using audiokv::attention_sinks_config;
using audiokv::speech_rules_config;
using audiokv::speech_tier;

inline std::int32_t mark_attention_sinks(const attention_sinks_config& config,
                                         const std::int32_t* pos, const float* importance,
                                         std::int32_t n, std::int32_t keep, std::uint8_t* tier,
                                         std::uint8_t sink_tier, std::int32_t* order) {
  const auto cap = static_cast<std::int32_t>(
      std::floor(static_cast<double>(config.max_share) * std::max(keep, 0) + 1e-9));
  std::int32_t marked = 0;
  for (std::int32_t j = 0; j < n && j < config.first && marked < cap; ++j) {
    if (tier[j] == 0) {
      tier[j] = sink_tier;
      ++marked;
    }
  }
  const std::int32_t want = std::min(config.observed, cap - marked);
  if (want <= 0) return marked;
  std::int32_t count = 0;
  for (std::int32_t j = 0; j < n; ++j) {
    if (tier[j] == 0) order[count++] = j;
  }
  const std::int32_t take = std::min(want, count);
  auto higher = [&](std::int32_t a, std::int32_t b) {
    return audiokv::core::evicts_before(importance[b], pos[b], importance[a], pos[a]);
  };
  std::nth_element(order, order + take - (take > 0 ? 1 : 0), order + count, higher);
  for (std::int32_t i = 0; i < take; ++i) tier[order[i]] = sink_tier;
  return marked + take;
}

inline double coverage_time_weight(std::int64_t from, std::int64_t to, std::int64_t dense_from,
                                   double past) {
  if (to <= from) return 0.0;
  const std::int64_t split = dense_from < from ? from : dense_from > to ? to : dense_from;
  return past * static_cast<double>(split - from) + static_cast<double>(to - split);
}

inline std::int32_t mark_coverage_floor(const std::int32_t* pos, const float* voice,
                                        const float* score, std::int32_t n, std::int32_t floor,
                                        std::int32_t segment_frames, std::int64_t dense_from,
                                        double past_density, double silence_weight,
                                        std::uint8_t* tier, std::uint8_t floor_tier,
                                        std::int64_t scored_until = INT64_MAX) {
  if (n <= 0 || floor <= 0 || segment_frames <= 0) return 0;
  const std::int64_t seg = segment_frames;
  const std::int64_t first = pos[0], end = static_cast<std::int64_t>(pos[n - 1]) + 1;
  auto segment_of = [&](std::int64_t p) { return p >= 0 ? p / seg : -((-p + seg - 1) / seg); };
  struct segment {
    std::int32_t b;
    std::int64_t lo, hi;
    double weight;
  };
  auto segment_at = [&](std::int32_t a) {
    const std::int64_t k = segment_of(pos[a]);
    std::int32_t b = a;
    double voiced = 0.0;
    while (b < n && segment_of(pos[b]) == k) voiced += voice[b++];
    const std::int64_t lo = k * seg < first ? first : k * seg;
    const std::int64_t hi = (k + 1) * seg > end ? end : (k + 1) * seg;
    const double factor = silence_weight + (1.0 - silence_weight) * voiced / (b - a);
    return segment{b, lo, hi, factor * coverage_time_weight(lo, hi, dense_from, past_density)};
  };
  double total = 0.0;
  for (std::int32_t a = 0; a < n;) {
    const segment sg = segment_at(a);
    total += sg.weight;
    a = sg.b;
  }
  if (!(total > 0.0)) return 0;
  std::int32_t marked = 0;
  double cumulative = 0.0;
  std::int64_t given = 0;
  for (std::int32_t a = 0; a < n;) {
    const segment sg = segment_at(a);
    const std::int32_t b = sg.b;
    const std::int64_t lo = sg.lo, hi = sg.hi;
    cumulative += sg.weight;
    const std::int64_t upto = std::llround(static_cast<double>(floor) * cumulative / total);
    const std::int64_t quota = upto - given;
    given = upto;
    const double width = static_cast<double>(hi - lo) / static_cast<double>(quota > 0 ? quota : 1);
    std::int32_t c = a;
    for (std::int64_t s = 0; s < quota; ++s) {
      const double from = static_cast<double>(lo) + width * static_cast<double>(s);
      const double to = from + width;
      const double centre = from + 0.5 * width;
      while (c < b && static_cast<double>(pos[c]) < from) ++c;
      std::int32_t best = -1;
      bool covered = false;
      for (std::int32_t j = c; j < b && static_cast<double>(pos[j]) < to; ++j) {
        if (tier[j] != 0) {
          covered = true;
          break;
        }
        const float sj = pos[j] <= scored_until ? score[j] : 0.0f;
        const float sb = best < 0 ? 0.0f : pos[best] <= scored_until ? score[best] : 0.0f;
        if (best < 0 || sj > sb ||
            (sj == sb && std::fabs(pos[j] - centre) < std::fabs(pos[best] - centre))) {
          best = j;
        }
      }
      if (best >= 0 && !covered) {
        tier[best] = floor_tier;
        ++marked;
      }
    }
    a = b;
  }
  return marked;
}

inline bool apply_speech_rules(const speech_rules_config& config, float frame_ms,
                               const std::int32_t* pos, const float* voice, const float* importance,
                               const std::uint8_t* protected_cells, std::uint8_t kept_level,
                               std::int32_t n, std::int32_t keep,
                               const alignment_frontier& frontier, float* score, float* raw,
                               std::uint8_t* tier, std::int32_t* order) {
  if (!config.any() || n <= 0) return false;
  constexpr auto rest = static_cast<std::uint8_t>(speech_tier::rest);
  for (std::int32_t j = 0; j < n; ++j) {
    const bool kept = protected_cells != nullptr && protected_cells[j] >= kept_level;
    tier[j] = kept ? static_cast<std::uint8_t>(speech_tier::sink) : rest;
    raw[j] = score[j];
  }
  std::int32_t sinks = 0;
  if (config.sinks.enabled) {
    sinks = reference_v1::mark_attention_sinks(config.sinks, pos, importance, n, keep, tier,
                                               static_cast<std::uint8_t>(speech_tier::sink), order);
  }
  const bool has_frontier =
      config.frontier.enabled && (frontier.given() || config.frontier.estimate);
  std::int64_t at = INT64_MAX;
  std::int64_t dense_from = INT64_MIN;
  if (has_frontier) {
    if (frontier.given()) {
      at = frontier.position();
    } else {
      std::int32_t peak = 0;
      for (std::int32_t j = 1; j < n; ++j) peak = importance[j] > importance[peak] ? j : peak;
      at = pos[peak];
    }
    const auto lookback = static_cast<std::int64_t>(
        std::ceil(static_cast<double>(config.frontier.lookback_ms) / frame_ms - 1e-6));
    dense_from = at - lookback;
  }
  if (config.coverage.enabled) {
    const auto quota = static_cast<std::int32_t>(
        std::floor(static_cast<double>(config.coverage.share) * std::max(keep - sinks, 0) + 1e-9));
    const auto segment = static_cast<std::int32_t>(std::max(
        1.0, std::ceil(static_cast<double>(config.coverage.segment_ms) / frame_ms - 1e-6)));
    reference_v1::mark_coverage_floor(pos, voice, raw, n, quota, segment, dense_from,
                                      has_frontier ? config.frontier.past_density : 1.0,
                                      config.coverage.silence_weight, tier,
                                      static_cast<std::uint8_t>(speech_tier::floor), at);
  }
  if (has_frontier) {
    for (std::int32_t j = 0; j < n; ++j) {
      if (tier[j] == rest && pos[j] >= dense_from) {
        tier[j] = static_cast<std::uint8_t>(speech_tier::ahead);
      }
    }
  }
  double scale = 0.0;
  for (std::int32_t j = 0; j < n; ++j) scale += std::fabs(static_cast<double>(raw[j]));
  scale = scale > 0.0 ? static_cast<double>(n) / scale : 0.0;
  for (std::int32_t j = 0; j < n; ++j) {
    const double x = static_cast<double>(raw[j]) * scale;
    score[j] = static_cast<float>(4.0 * tier[j] + 1.5 + 1.5 * x / (1.0 + std::fabs(x)));
  }
  return true;
}

}  // namespace reference_v1

using rng = std::mt19937_64;

std::int32_t uniform(rng& g, std::int32_t lo, std::int32_t hi) {
  return std::uniform_int_distribution<std::int32_t>(lo, hi)(g);
}
double unit(rng& g) { return std::uniform_real_distribution<double>(0.0, 1.0)(g); }
bool chance(rng& g, double p) { return unit(g) < p; }

/// Ascending positions from a random start: runs of consecutive frames, gaps of every size,
/// occasionally repeats (non-decreasing), sometimes near the ends of the int32 range.
std::vector<std::int32_t> positions(rng& g, std::int32_t n) {
  std::vector<std::int32_t> pos(static_cast<std::size_t>(n));
  const int style = uniform(g, 0, 9);
  std::int64_t p = style == 0   ? INT32_MIN + uniform(g, 0, 1000)
                   : style == 1 ? static_cast<std::int64_t>(INT32_MAX) - 4 * n - 300000
                                : uniform(g, -20000, 20000);
  for (std::int32_t j = 0; j < n; ++j) {
    pos[static_cast<std::size_t>(j)] = static_cast<std::int32_t>(p);
    const double r = unit(g);
    p += style == 2 ? uniform(g, 0, 1)  // repeats
         : r < 0.8  ? 1
         : r < 0.95 ? uniform(g, 2, 40)
         : r < 0.99 ? uniform(g, 41, 3000)
                    : uniform(g, 3001, 60000);
  }
  return pos;
}

/// Scores with ties, zeros, negatives and spread magnitudes.
std::vector<float> scores(rng& g, std::int32_t n) {
  std::vector<float> s(static_cast<std::size_t>(n));
  const int style = uniform(g, 0, 5);
  const float pool[] = {0.0f, 0.25f, 0.5f, 1.0f, -0.5f, 3.0f, 1e-30f, -0.0f};
  for (auto& v : s) {
    switch (style) {
      case 0:
        v = 0.0f;
        break;
      case 1:
        v = pool[uniform(g, 0, 7)];
        break;
      case 2:
        v = static_cast<float>(uniform(g, 0, 3));
        break;
      case 3:
        v = static_cast<float>(std::ldexp(unit(g), uniform(g, -40, 20)));
        break;
      case 4:
        v = static_cast<float>(unit(g) * 2.0 - 1.0);
        break;
      default:
        v = chance(g, 0.3) ? pool[uniform(g, 0, 7)] : static_cast<float>(unit(g));
        break;
    }
  }
  return s;
}

std::vector<float> voices(rng& g, std::int32_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  const int style = uniform(g, 0, 3);
  for (auto& x : v) {
    x = style == 0   ? 0.0f
        : style == 1 ? 1.0f
        : style == 2 ? static_cast<float>(uniform(g, 0, 1))
                     : static_cast<float>(unit(g));
  }
  return v;
}

float pick(rng& g, std::initializer_list<float> values) {
  return *(values.begin() + uniform(g, 0, static_cast<std::int32_t>(values.size()) - 1));
}

std::int32_t random_n(rng& g) {
  const double r = unit(g);
  return r < 0.1 ? uniform(g, 1, 8) : r < 0.7 ? uniform(g, 9, 600) : uniform(g, 601, 3000);
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, int trial,
                      const char* what) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
      << what << " differ in trial " << trial;
}

TEST(SpeechRulesEquivalence, ApplySpeechRulesMatchesTheFrozenCopyBitForBit) {
  rng g(20261203);
  int rewritten = 0, floors = 0, aheads = 0, sinks = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const std::int32_t n = random_n(g);
    const auto pos = positions(g, n);
    const auto voice = voices(g, n);
    const auto importance = scores(g, n);
    const auto input = scores(g, n);
    std::vector<std::uint8_t> prot;
    const bool with_protection = chance(g, 0.5);
    if (with_protection) {
      prot.resize(static_cast<std::size_t>(n));
      const double p = unit(g) * 0.3;
      for (auto& v : prot) v = chance(g, p) ? static_cast<std::uint8_t>(uniform(g, 0, 255)) : 0;
    }
    const auto kept_level = static_cast<std::uint8_t>(uniform(g, 0, 255));
    const std::int32_t keep = chance(g, 0.05) ? uniform(g, -5, 0) : uniform(g, 0, n);

    audiokv::speech_rules_config config;
    config.sinks.enabled = chance(g, 0.4);
    config.sinks.first = uniform(g, 0, 12);
    config.sinks.observed = uniform(g, 0, 24);
    config.sinks.max_share = pick(g, {0.0f, 1.0f, 0.25f, static_cast<float>(unit(g))});
    config.coverage.enabled = chance(g, 0.85);
    config.coverage.segment_ms = pick(g, {0.5f, 1.0f, 7.0f, 40.0f, 100.0f, 333.3f, 1000.0f, 1e5f});
    config.coverage.share = pick(g, {0.0f, 1.0f, 0.5f, static_cast<float>(unit(g))});
    config.coverage.silence_weight = pick(g, {0.0f, 1.0f, 0.25f, static_cast<float>(unit(g))});
    config.frontier.enabled = chance(g, 0.75);
    config.frontier.estimate = chance(g, 0.7);
    config.frontier.lookback_ms =
        pick(g, {0.0f, 1000.0f, 35.0f, static_cast<float>(unit(g) * 1e4)});
    config.frontier.past_density = pick(g, {0.0f, 1.0f, 0.25f, static_cast<float>(unit(g))});
    config.frontier.frontier_density = 0.0f;  // the frozen copy has one floor over all time
    config.coverage.segment_cells = 0;        // and the segment_ms floor, no age decay
    config.frontier.past_decay_floor = 0.0f;
    const float frame_ms = pick(g, {10.0f, 20.0f, 1.0f, 7.3f, 40.0f});
    audiokv::alignment_frontier frontier;
    if (chance(g, 0.35)) {
      frontier.set_position(chance(g, 0.8) ? pos[static_cast<std::size_t>(uniform(g, 0, n - 1))] +
                                                 uniform(g, -50, 50)
                                           : uniform(g, -100000, 100000));
    }

    std::vector<float> score_a = input, score_b = input, raw_a(n, -7.0f), raw_b(n, -7.0f);
    std::vector<std::uint8_t> tier_a(n, 9), tier_b(n, 9);
    std::vector<std::int32_t> order_a(n, -1), order_b(n, -1);
    const std::uint8_t* p = with_protection ? prot.data() : nullptr;
    const bool ra = reference_v1::apply_speech_rules(
        config, frame_ms, pos.data(), voice.data(), importance.data(), p, kept_level, n, keep,
        frontier, score_a.data(), raw_a.data(), tier_a.data(), order_a.data());
    const bool rb = audiokv::apply_speech_rules(
        config, frame_ms, pos.data(), voice.data(), importance.data(), p, kept_level, n, keep,
        frontier, score_b.data(), raw_b.data(), tier_b.data(), order_b.data());
    ASSERT_EQ(ra, rb) << "trial " << trial;
    expect_same_bits(score_a, score_b, trial, "scores");
    if (!ra) continue;
    ++rewritten;
    expect_same_bits(raw_a, raw_b, trial, "raw scores");
    ASSERT_EQ(tier_a, tier_b) << "trial " << trial;
    floors += std::count(tier_a.begin(), tier_a.end(), std::uint8_t{2}) > 0;
    aheads += std::count(tier_a.begin(), tier_a.end(), std::uint8_t{1}) > 0;
    sinks += config.sinks.enabled && std::count(tier_a.begin(), tier_a.end(), std::uint8_t{3}) > 0;
  }
  // The draw exercises every tier.
  EXPECT_GT(rewritten, 3000);
  EXPECT_GT(floors, 1000);
  EXPECT_GT(aheads, 1000);
  EXPECT_GT(sinks, 500);
}

TEST(SpeechRulesEquivalence, CoverageFloorMatchesTheFrozenCopy) {
  rng g(7);
  int marked_any = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const std::int32_t n = random_n(g);
    const auto pos = positions(g, n);
    const auto voice = voices(g, n);
    const auto score = scores(g, n);
    std::vector<std::uint8_t> tier(static_cast<std::size_t>(n), 0);
    const double kept = chance(g, 0.5) ? unit(g) * 0.2 : 0.0;
    for (auto& t : tier) t = chance(g, kept) ? static_cast<std::uint8_t>(uniform(g, 1, 3)) : 0;
    const std::int32_t floor = chance(g, 0.05) ? uniform(g, -3, 0) : uniform(g, 0, n + n / 2);
    const std::int32_t segment = chance(g, 0.05)  ? uniform(g, -2, 0)
                                 : chance(g, 0.3) ? uniform(g, 1, 3)
                                                  : uniform(g, 4, 400);
    const std::int64_t lo = pos.front(), hi = pos.back();
    const int dense_style = uniform(g, 0, 3);
    const std::int64_t dense_from =
        dense_style == 0   ? INT64_MIN
        : dense_style == 1 ? INT64_MAX
                           : lo + static_cast<std::int64_t>(unit(g) * (hi - lo + 200)) - 100;
    const int scored_style = uniform(g, 0, 2);
    const std::int64_t scored_until =
        scored_style == 0 ? INT64_MAX
                          : lo + static_cast<std::int64_t>(unit(g) * (hi - lo + 200)) - 100;
    const double past = pick(g, {0.0f, 1.0f, 0.25f, static_cast<float>(unit(g))});
    const double silence = pick(g, {0.0f, 1.0f, 0.25f, static_cast<float>(unit(g))});
    const auto floor_tier = static_cast<std::uint8_t>(uniform(g, 1, 200));
    std::vector<std::uint8_t> tier_a = tier, tier_b = tier;
    const std::int32_t ma = reference_v1::mark_coverage_floor(
        pos.data(), voice.data(), score.data(), n, floor, segment, dense_from, past, silence,
        tier_a.data(), floor_tier, scored_until);
    const std::int32_t mb = audiokv::mark_coverage_floor(pos.data(), voice.data(), score.data(), n,
                                                         floor, segment, dense_from, past, silence,
                                                         tier_b.data(), floor_tier, scored_until);
    ASSERT_EQ(ma, mb) << "trial " << trial;
    ASSERT_EQ(tier_a, tier_b) << "trial " << trial;
    marked_any += ma > 0;
  }
  EXPECT_GT(marked_any, 2500);
}

TEST(SpeechRulesEquivalence, AttentionSinksMatchTheFrozenCopy) {
  rng g(11);
  for (int trial = 0; trial < 3000; ++trial) {
    const std::int32_t n = random_n(g);
    const auto pos = positions(g, n);
    const auto importance = scores(g, n);
    std::vector<std::uint8_t> tier(static_cast<std::size_t>(n), 0);
    const double kept = chance(g, 0.5) ? unit(g) * 0.5 : 0.0;
    for (auto& t : tier) t = chance(g, kept) ? static_cast<std::uint8_t>(uniform(g, 1, 3)) : 0;
    audiokv::attention_sinks_config config;
    config.enabled = true;
    config.first = uniform(g, 0, 20);
    config.observed = chance(g, 0.2) ? uniform(g, 0, n) : uniform(g, 0, 30);
    config.max_share = pick(g, {0.0f, 1.0f, 0.25f, static_cast<float>(unit(g))});
    const std::int32_t keep = chance(g, 0.05) ? uniform(g, -5, 0) : uniform(g, 0, n);
    std::vector<std::uint8_t> tier_a = tier, tier_b = tier;
    std::vector<std::int32_t> order_a(n, -1), order_b(n, -1);
    const std::int32_t ma = reference_v1::mark_attention_sinks(
        config, pos.data(), importance.data(), n, keep, tier_a.data(), 3, order_a.data());
    const std::int32_t mb = audiokv::mark_attention_sinks(config, pos.data(), importance.data(), n,
                                                          keep, tier_b.data(), 3, order_b.data());
    ASSERT_EQ(ma, mb) << "trial " << trial;
    ASSERT_EQ(tier_a, tier_b) << "trial " << trial;
  }
}

}  // namespace
