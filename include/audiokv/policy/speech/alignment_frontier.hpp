// SPDX-License-Identifier: Apache-2.0
/// @file
/// The alignment frontier: the audio position a decoder is transcribing now. Decoding sweeps
/// the audio from start to end; the cross-attention (or audio-token attention) of the heads
/// that align text to audio peaks at the frame being transcribed. Frames well behind the
/// frontier have been transcribed and are needed only as context; frames at and ahead of it
/// are still to be read. The engine may give the position (set_position, e.g. from a model's
/// known alignment heads), or feed per-step peaks to observe_peak(), which filters them: the
/// running maximum of the median of the most-attended position over the last `filter` steps.
/// A cache given neither estimates the position when it plans (speech_rules.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "../../error.hpp"

namespace audiokv::policy::speech {

/// @brief Switches and parameters of the alignment-frontier rule.
struct alignment_frontier_config {
  /// Off: no cell is treated as ahead of or behind the frontier.
  bool enabled = true;
  /// Estimate the frontier when planning, from the cells' running attention, when the engine
  /// gives no position.
  bool estimate = true;
  /// Width (odd, 1..15) of alignment_frontier's median filter over the per-step peaks given to
  /// observe_peak(); it rejects single-step jumps of attention to sinks or to the end of the
  /// audio.
  std::int32_t filter = 5;
  /// Cells newer than frontier - lookback_ms count as not yet passed (the decoder's attention
  /// still reaches about a word back while it emits a word).
  float lookback_ms = 1000.0f;
  /// Relative time density of the coverage floor behind frontier - lookback_ms: 1 keeps the
  /// past as densely covered as the audio ahead, 0 leaves it to the scores alone (with
  /// past_decay_floor, only the decay's profile covers the past). 0 was chosen with the segment
  /// floor on the wide dev splits (benchmarks/results/quality_dev_wide_round3.md).
  float past_density = 0.0f;
  /// Age decay of the past's density (0: off, a constant past_density): a frame a frames behind
  /// frontier - lookback_ms counts at past_density + (1 - past_density) / (1 + a / T), T =
  /// ceil(past_decay_ms / frame_ms), the harmonic profile a uniform stride leaves behind when it
  /// is applied again at every chunk of a stream.
  float past_decay_ms = 0.0f;
  /// Age decay scaled to the floor (0: off): a frame a frames behind frontier - lookback_ms
  /// counts at past_density + (1 - past_density) exp(-a / T), T = past_decay_floor * F frames,
  /// F the coverage floor's cells. With F = B cells a uniform stride applied again at every
  /// chunk of a stream leaves the density exp(-age / B) (each chunk of c frames keeps B / (B +
  /// c) of every stretch), so 1 is that stride's profile, measured from the frontier. Cannot be
  /// combined with past_decay_ms. 1 was chosen on the wide dev splits
  /// (benchmarks/results/quality_dev_wide_round3.md) against 2 and no decay.
  float past_decay_floor = 1.0f;
  /// Frontier-first floor (0: off, one floor over all time): the coverage floor first covers
  /// [frontier - lookback_ms, newest] with at most frontier_density cells per frame (at most
  /// the whole floor), and only the floor cells left over are spread over the past by its
  /// weights. The decoder reads the audio at its frontier; a floor spread evenly over a long
  /// past thins exactly that stretch when the budget is small. 0.5 was chosen on the wide dev
  /// splits (benchmarks/results/quality_dev_wide.md) against 0 and 1.
  float frontier_density = 0.5f;

  /// Throws audiokv::error naming the first invalid field.
  void validate(const char* where) const {
    AUDIOKV_REQUIRE(filter >= 1 && filter <= 15 && filter % 2 == 1, where,
                    "config.speech.frontier.filter", filter, "must be odd and in [1, 15]");
    AUDIOKV_REQUIRE(std::isfinite(lookback_ms) && lookback_ms >= 0.0f && lookback_ms <= 1e9f, where,
                    "config.speech.frontier.lookback_ms", lookback_ms, "must be in [0, 1e9]");
    AUDIOKV_REQUIRE(std::isfinite(past_density) && past_density >= 0.0f && past_density <= 1.0f,
                    where, "config.speech.frontier.past_density", past_density,
                    "must be in [0, 1]");
    AUDIOKV_REQUIRE(std::isfinite(past_decay_ms) && past_decay_ms >= 0.0f && past_decay_ms <= 1e9f,
                    where, "config.speech.frontier.past_decay_ms", past_decay_ms,
                    "must be in [0, 1e9]");
    AUDIOKV_REQUIRE(
        std::isfinite(past_decay_floor) && past_decay_floor >= 0.0f && past_decay_floor <= 1e6f,
        where, "config.speech.frontier.past_decay_floor", past_decay_floor, "must be in [0, 1e6]");
    AUDIOKV_REQUIRE(past_decay_floor == 0.0f || past_decay_ms == 0.0f, where,
                    "config.speech.frontier.past_decay_floor", past_decay_floor,
                    "must be 0 when past_decay_ms is set");
    AUDIOKV_REQUIRE(
        std::isfinite(frontier_density) && frontier_density >= 0.0f && frontier_density <= 1.0f,
        where, "config.speech.frontier.frontier_density", frontier_density, "must be in [0, 1]");
  }
};

/// @brief Tracks the frontier of one cache. O(filter) per observed step, no allocation.
///
/// Estimate after each step: m = median of the last min(steps, filter) most-attended positions
/// (the lower middle for an even count), frontier = max(previous frontier, m), so a decoder
/// that looks back does not move the frontier back. A position given by the engine replaces
/// the estimate from then on.
class alignment_frontier {
 public:
  static constexpr std::int32_t max_filter = 15;

  explicit alignment_frontier(std::int32_t filter = 5)
      : filter_(std::clamp<std::int32_t>(filter, 1, max_filter)) {}

  /// One observed step's most-attended position.
  void observe_peak(std::int32_t pos) noexcept {
    ring_[next_] = pos;
    next_ = (next_ + 1) % filter_;
    if (count_ < filter_) ++count_;
    // Insertion sort of at most max_filter values.
    std::int32_t sorted[max_filter];
    for (std::int32_t i = 0; i < count_; ++i) {
      std::int32_t k = i;
      for (; k > 0 && sorted[k - 1] > ring_[i]; --k) sorted[k] = sorted[k - 1];
      sorted[k] = ring_[i];
    }
    const std::int32_t median = sorted[(count_ - 1) / 2];
    estimate_ = has_estimate_ ? std::max(estimate_, median) : median;
    has_estimate_ = true;
  }

  /// The engine's alignment position (e.g. from the model's alignment heads); it replaces the
  /// estimate from now on.
  void set_position(std::int32_t pos) noexcept {
    given_ = pos;
    has_given_ = true;
  }

  /// True when a position is known: given by the engine, or estimated when `use_estimate`.
  bool known(bool use_estimate) const noexcept {
    return has_given_ || (use_estimate && has_estimate_);
  }
  /// The engine's position when given, else the estimate; valid when known().
  std::int32_t position() const noexcept { return has_given_ ? given_ : estimate_; }
  /// True when the engine gave the position.
  bool given() const noexcept { return has_given_; }

 private:
  std::int32_t filter_;
  std::int32_t ring_[max_filter] = {};
  std::int32_t count_ = 0;
  std::int32_t next_ = 0;
  std::int32_t estimate_ = 0;
  bool has_estimate_ = false;
  std::int32_t given_ = 0;
  bool has_given_ = false;
};

}  // namespace audiokv::policy::speech

namespace audiokv {
using policy::speech::alignment_frontier;
using policy::speech::alignment_frontier_config;
}  // namespace audiokv
