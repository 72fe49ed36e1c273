// SPDX-License-Identifier: Apache-2.0
/// @file
/// Attention sinks: cells a model's heads dump attention on whatever the content (the first
/// tokens of a decoder-only model; for Whisper the last frames of the 30 s window). Removing
/// them moves that mass onto content cells and derails decoding, so they are kept first,
/// inside the budget: the oldest `first` cells, and the `observed` cells of highest
/// accumulated attention (the sinks each head shows in its own attention).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "../../core/selection.hpp"
#include "../../error.hpp"

namespace audiokv::policy::speech {

/// @brief Switches and counts of the attention-sink rule.
struct attention_sinks_config {
  /// Off: no cell is kept as a sink by this rule (frames flagged frame_flag_sink still are).
  /// Off by default: on Whisper tiny.en (dev split) sinks kept at full density while the audio
  /// around them is thinned draw attention from the audio (see attention_mass.hpp) and cost
  /// more than they save; the recent window already keeps the newest cells.
  bool enabled = false;
  /// The oldest cells kept as sinks.
  std::int32_t first = 4;
  /// Cells of highest importance kept as sinks.
  std::int32_t observed = 8;
  /// Sinks never take more than this share of the kept cells.
  float max_share = 0.25f;

  /// Throws audiokv::error naming the first invalid field.
  void validate(const char* where) const {
    AUDIOKV_REQUIRE(first >= 0, where, "config.speech.sinks.first", first, "must be >= 0");
    AUDIOKV_REQUIRE(observed >= 0, where, "config.speech.sinks.observed", observed, "must be >= 0");
    AUDIOKV_REQUIRE(std::isfinite(max_share) && max_share >= 0.0f && max_share <= 1.0f, where,
                    "config.speech.sinks.max_share", max_share, "must be in [0, 1]");
  }
};

/// @brief Marks tier[j] = sink_tier for the unmarked cells among the `first` oldest, then for
/// the min(observed, cap - those) unmarked cells of highest importance (ties: the newer), at
/// most cap = floor(max_share * keep) in all. Cells already marked (tier != 0) are kept anyway
/// and do not count. `order` is scratch of n ints.
/// @return the number of cells marked.
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
    order[count] = j;  // written always, kept when unmarked: no branch on the tiers
    count += tier[j] == 0 ? 1 : 0;
  }
  const std::int32_t take = std::min(want, count);
  // Highest (importance, position) first: the reverse of the eviction order.
  auto higher = [&](std::int32_t a, std::int32_t b) {
    return core::evicts_before(importance[b], pos[b], importance[a], pos[a]);
  };
  std::nth_element(order, order + take - (take > 0 ? 1 : 0), order + count, higher);
  for (std::int32_t i = 0; i < take; ++i) tier[order[i]] = sink_tier;
  return marked + take;
}

}  // namespace audiokv::policy::speech

namespace audiokv {
using policy::speech::attention_sinks_config;
using policy::speech::mark_attention_sinks;
}  // namespace audiokv
