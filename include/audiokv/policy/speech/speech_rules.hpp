// SPDX-License-Identifier: Apache-2.0
/// @file
/// The speech rules of the AudioKV selection, as tiers over the scores: attention sinks (kept
/// first), the temporal-coverage floor, the audio at and ahead of the alignment frontier, then
/// everything else; inside a tier the scores decide. Selection of the lowest final scores then
/// evicts the past beyond its strided floor first, the unreached audio beyond its floor next,
/// and the floor and the sinks last.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "../../core/selection.hpp"
#include "../../core/trend.hpp"
#include "alignment_frontier.hpp"
#include "attention_sinks.hpp"
#include "temporal_coverage.hpp"

namespace audiokv::policy::speech {

/// @brief Every speech rule, each with its own switch (an ablation turns one off).
struct speech_rules_config {
  attention_sinks_config sinks{};
  temporal_coverage_config coverage{};
  alignment_frontier_config frontier{};

  /// True when any rule is on.
  bool any() const noexcept { return sinks.enabled || coverage.enabled || frontier.enabled; }
  /// Throws audiokv::error naming the first invalid field.
  void validate(const char* where) const {
    sinks.validate(where);
    coverage.validate(where);
    frontier.validate(where);
  }
};

/// Tiers of apply_speech_rules(), lowest evicted first.
enum class speech_tier : std::uint8_t { rest = 0, ahead = 1, floor = 2, sink = 3 };

/// @brief apply_speech_rules()'s scale sums of `rows` <= core::trend_lanes score rows:
/// sums[r] = sum_k |scores[r][k]| over k in [0, n[r]) in index order, as a double, the same
/// additions as apply_speech_rules() makes. Each row's sum is a chain of dependent additions;
/// the rows' chains advance side by side in one loop.
inline void speech_scale_sums(const float* const* scores, const std::int32_t* n, std::int32_t rows,
                              double* sums) noexcept {
  constexpr std::int32_t lanes = core::trend_lanes;
  if (rows <= 0) return;
  const float* row[lanes];
  double sum[lanes];
  std::int32_t common = n[0];
  for (std::int32_t a = 0; a < lanes; ++a) {
    // An unused lane re-reads row 0 (at least `common` values) and its sum is dropped.
    row[a] = scores[a < rows ? a : 0];
    sum[a] = 0.0;
    if (a < rows) common = std::min(common, n[a]);
  }
  for (std::int32_t k = 0; k < common; ++k) {
    for (std::int32_t a = 0; a < lanes; ++a) sum[a] += std::fabs(static_cast<double>(row[a][k]));
  }
  for (std::int32_t a = 0; a < rows; ++a) {
    for (std::int32_t k = common; k < n[a]; ++k) {
      sum[a] += std::fabs(static_cast<double>(row[a][k]));
    }
    sums[a] = sum[a];
  }
}

/// @brief Rewrites one plan's scores by tier in O(n), without sorting:
///   score[j] = 4 tier_j + 1.5 + 1.5 x_j / (1 + |x_j|),  x_j = raw_j / mean_k |raw_k|
/// (x_j = 0 when every raw score is 0). The second term is non-decreasing in raw_j and lies in
/// (0, 3), so selecting the lowest evicts tier by tier and by raw score inside a tier (scores
/// that the squash makes equal tie, and ties evict the older cell). Does nothing (and returns
/// false) when no rule is on.
///
/// protected: [n] or null; cells with protected[j] >= kept_level are kept whatever the scores
/// (the cache's protections): they get the sink tier, count toward the coverage of their time,
/// and `keep` counts only the other cells. keep: the cells the plan keeps besides those. Sinks
/// (at most sinks.max_share * keep) come first; the coverage floor takes floor(share * (keep -
/// sinks)) cells (placed by core::mark_segment_floor when coverage.segment_cells > 0: segments
/// sized by the budget, each keeping its best cells); with a known frontier f, positions before
/// f - ceil(lookback_ms / frame_ms)
/// count at past_density in the floor (decaying with age when frontier.past_decay_ms > 0 or
/// frontier.past_decay_floor > 0, the default; with segment_cells 0 the positions from
/// f - lookback on are covered first when frontier.frontier_density > 0), floor
/// cells after f are chosen by position only, and
/// cells from f - lookback on that are neither sinks nor floor form the `ahead` tier. The
/// frontier is the engine's position when it gave one; else, when frontier.estimate, the
/// position of the cell of highest importance (the running attention, whose peak follows the
/// decoder's alignment in the heads that align).
///
/// text: [n] or null (every cell audio); cells with text[j] != 0 are text tokens
/// (frame_flag_text): sinks and the cache's protections apply to them, the coverage floor and
/// the frontier do not. They are left in the lowest tier, ranked by their scores; the floor
/// quota shrinks to the audio cells' share of the cells not yet kept, the frontier is
/// estimated over audio cells only, and only audio cells enter the `ahead` tier.
///
/// Scratch, each [n]: raw receives the scores before the rewrite; tier and order are work
/// space. scale_sum: null, or sum_k |score_k| as speech_scale_sums() computes it (the rules
/// then do not sum again). Allocates nothing.
inline bool apply_speech_rules(const speech_rules_config& config, float frame_ms,
                               const std::int32_t* pos, const float* voice, const float* importance,
                               const std::uint8_t* protected_cells, std::uint8_t kept_level,
                               std::int32_t n, std::int32_t keep,
                               const alignment_frontier& frontier, float* score, float* raw,
                               std::uint8_t* tier, std::int32_t* order,
                               const double* scale_sum = nullptr,
                               const std::uint8_t* text = nullptr) {
  if (!config.any() || n <= 0) return false;
  constexpr auto rest = static_cast<std::uint8_t>(speech_tier::rest);
  constexpr auto sink = static_cast<std::uint8_t>(speech_tier::sink);
  if (protected_cells != nullptr) {
    for (std::int32_t j = 0; j < n; ++j) tier[j] = protected_cells[j] >= kept_level ? sink : rest;
  } else {
    std::fill(tier, tier + n, rest);
  }
  // Text cells hold a tier of their own while the floor and the frontier are placed, so
  // neither chooses them (the coverage floor counts them as covering their time); they return
  // to the lowest tier before the rewrite.
  constexpr std::uint8_t held_text = 4;
  std::int32_t audio_cells = n;
  if (text != nullptr) {
    for (std::int32_t j = 0; j < n; ++j) audio_cells -= text[j] != 0 ? 1 : 0;
  }
  const bool has_frontier =
      config.frontier.enabled && audio_cells > 0 && (frontier.given() || config.frontier.estimate);
  // scale = sum_k |raw_k| in index order (the rounding of the sum is part of the result); when
  // the frontier is estimated, the same pass finds the first cell of highest importance (two
  // independent dependency chains side by side).
  double scale = 0.0;
  std::int32_t peak = 0;
  if (has_frontier && !frontier.given() && text != nullptr) {
    // The peak over audio cells; the sum over every cell, as below.
    float top = -INFINITY;
    for (std::int32_t j = 0; j < n; ++j) {
      raw[j] = score[j];
      if (scale_sum == nullptr) scale += std::fabs(static_cast<double>(score[j]));
      if (text[j] == 0 && importance[j] > top) {
        top = importance[j];
        peak = j;
      }
    }
  } else if (has_frontier && !frontier.given()) {
    float top = importance[0];
    if (scale_sum != nullptr) {
      for (std::int32_t j = 0; j < n; ++j) {
        raw[j] = score[j];
        if (importance[j] > top) {
          top = importance[j];
          peak = j;
        }
      }
    } else {
      for (std::int32_t j = 0; j < n; ++j) {
        raw[j] = score[j];
        scale += std::fabs(static_cast<double>(score[j]));
        if (importance[j] > top) {
          top = importance[j];
          peak = j;
        }
      }
    }
  } else if (scale_sum != nullptr) {
    std::copy(score, score + n, raw);
  } else {
    for (std::int32_t j = 0; j < n; ++j) {
      raw[j] = score[j];
      scale += std::fabs(static_cast<double>(score[j]));
    }
  }
  if (scale_sum != nullptr) scale = *scale_sum;
  std::int32_t sinks = 0;
  if (config.sinks.enabled) {
    sinks = mark_attention_sinks(config.sinks, pos, importance, n, keep, tier, sink, order);
  }
  std::int64_t at = INT64_MAX;  // the frontier's position
  std::int64_t dense_from = INT64_MIN;
  if (has_frontier) {
    at = frontier.given() ? frontier.position() : pos[peak];
    const auto lookback = static_cast<std::int64_t>(
        std::ceil(static_cast<double>(config.frontier.lookback_ms) / frame_ms - 1e-6));
    dense_from = at - lookback;
  }
  std::int64_t free_cells = 0, free_audio = 0;  // cells not yet kept, and their audio part
  if (text != nullptr) {
    for (std::int32_t j = 0; j < n; ++j) {
      const bool unkept = tier[j] == rest;
      free_cells += unkept ? 1 : 0;
      free_audio += unkept && text[j] == 0 ? 1 : 0;
      if (unkept && text[j] != 0) tier[j] = held_text;
    }
  }
  if (config.coverage.enabled && audio_cells > 0) {
    // quota = floor(share x (keep - sinks) [x free audio / free cells with text cells]).
    const double audio_share =
        text == nullptr || free_cells == 0
            ? 1.0
            : static_cast<double>(free_audio) / static_cast<double>(free_cells);
    const auto quota = static_cast<std::int32_t>(std::floor(
        static_cast<double>(config.coverage.share) * std::max(keep - sinks, 0) * audio_share +
        1e-9));
    const auto segment = static_cast<std::int32_t>(std::max(
        1.0, std::ceil(static_cast<double>(config.coverage.segment_ms) / frame_ms - 1e-6)));
    constexpr auto floor_tier = static_cast<std::uint8_t>(speech_tier::floor);
    const double past = has_frontier ? config.frontier.past_density : 1.0;
    const bool exponential = has_frontier && config.frontier.past_decay_floor > 0.0f;
    const double decay =
        exponential ? std::max(1.0, static_cast<double>(config.frontier.past_decay_floor) * quota)
        : has_frontier && config.frontier.past_decay_ms > 0.0f
            ? std::max(
                  1.0,
                  std::ceil(static_cast<double>(config.frontier.past_decay_ms) / frame_ms - 1e-6))
            : 0.0;
    const double silence = config.coverage.silence_weight;
    // Ahead of a known frontier the decoder has not attended yet: the floor goes by position.
    if (config.coverage.segment_cells > 0) {
      core::segment_floor_params sp;
      sp.floor = quota;
      sp.segment_cells = config.coverage.segment_cells;
      sp.dense_from = dense_from;
      sp.past_density = past;
      sp.decay = decay;
      sp.exponential = exponential;
      sp.silence_weight = silence;
      sp.scored_until = at;
      sp.phase = config.coverage.phase;
      core::mark_segment_floor(pos, voice, raw, n, sp, tier, floor_tier);
    } else if (has_frontier && config.frontier.frontier_density > 0.0f &&
               dense_from <= pos[n - 1]) {
      // Frontier first: the cells from dense_from on (a suffix, positions ascend) get up to
      // floor(frontier_density * their frames) floor cells, all of their unkept cells when
      // that many; the floor cells left over cover the cells before them.
      const std::int32_t k = static_cast<std::int32_t>(
          std::lower_bound(pos, pos + n, dense_from,
                           [](std::int32_t p, std::int64_t v) { return p < v; }) -
          pos);
      const std::int64_t frames =
          static_cast<std::int64_t>(pos[n - 1]) + 1 - std::max<std::int64_t>(dense_from, pos[k]);
      const auto dense_quota = static_cast<std::int32_t>(
          std::min<double>(quota, std::floor(static_cast<double>(config.frontier.frontier_density) *
                                                 static_cast<double>(frames) +
                                             1e-9)));
      std::int32_t unkept = 0;
      for (std::int32_t j = k; j < n; ++j) unkept += tier[j] == rest ? 1 : 0;
      std::int32_t dense = 0;
      if (dense_quota >= unkept) {
        for (std::int32_t j = k; j < n; ++j) tier[j] = tier[j] == rest ? floor_tier : tier[j];
        dense = unkept;
      } else {
        dense = mark_coverage_floor(pos + k, voice + k, raw + k, n - k, dense_quota, segment,
                                    dense_from, 1.0, silence, tier + k, floor_tier, at);
      }
      mark_coverage_floor(pos, voice, raw, k, quota - dense, segment, dense_from, past, silence,
                          tier, floor_tier, at, decay, exponential, config.coverage.centre_band);
    } else {
      mark_coverage_floor(pos, voice, raw, n, quota, segment, dense_from, past, silence, tier,
                          floor_tier, at, decay, exponential, config.coverage.centre_band);
    }
  }
  if (has_frontier && dense_from <= INT32_MAX) {
    // pos >= dense_from, compared in 32 bits: dense_from clamped to the positions' range.
    const auto from = static_cast<std::int32_t>(std::max<std::int64_t>(dense_from, INT32_MIN));
    constexpr auto ahead = static_cast<std::uint8_t>(speech_tier::ahead);
    static_assert(rest == 0, "an unmarked cell's tier is 0: tier | ahead is ahead");
    for (std::int32_t j = 0; j < n; ++j) {
      const auto unmarked = static_cast<std::uint8_t>(tier[j] == rest);
      const auto reached = static_cast<std::uint8_t>(pos[j] >= from);
      tier[j] = static_cast<std::uint8_t>(tier[j] | (unmarked & reached & ahead));
    }
  }
  if (text != nullptr) {
    for (std::int32_t j = 0; j < n; ++j) tier[j] = tier[j] == held_text ? rest : tier[j];
  }
  scale = scale > 0.0 ? static_cast<double>(n) / scale : 0.0;
  for (std::int32_t j = 0; j < n; ++j) {
    const double x = static_cast<double>(raw[j]) * scale;
    score[j] = static_cast<float>(4.0 * tier[j] + 1.5 + 1.5 * x / (1.0 + std::fabs(x)));
  }
  return true;
}

}  // namespace audiokv::policy::speech

namespace audiokv {
using policy::speech::apply_speech_rules;
using policy::speech::speech_rules_config;
using policy::speech::speech_scale_sums;
using policy::speech::speech_tier;
}  // namespace audiokv
