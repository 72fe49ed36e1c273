// SPDX-License-Identifier: Apache-2.0
/// @file
/// Every knob of the AudioKV policy, with the specification's defaults, and its validation.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../types/cache_limits.hpp"
#include "../types/pool_split.hpp"
#include "../types/prefetch_config.hpp"
#include "speech/speech_rules.hpp"

namespace audiokv::policy {

/// How a frame's prior enters its final score.
enum class prior_mode : std::uint8_t {
  add = 0,      // final += prior
  multiply = 1  // final *= 1 + prior
};

/// @brief Configuration of one AudioKV-managed (layer, KV head) cache.
struct audiokv_config {
  /// B: the number of cells the cache may hold, in [1, max_cache_cells]; append() beyond
  /// `capacity` throws.
  std::int32_t budget = 0;
  /// Physical slots (>= budget, at most max_cache_cells); 0 means budget. Headroom for bulk
  /// appends between evictions.
  /// With prefetch.enabled it is only the initial reservation and may be below the budget.
  std::int32_t capacity = 0;
  /// Pool fractions of the budget.
  pool_split split{};
  /// Eviction trigger: eviction is planned once num_cells >= ceil(trigger * budget).
  float trigger = 0.9f;
  /// Importance EMA: I = alpha * A + (1 - alpha) * I_prev.
  float alpha = 0.3f;
  /// Importance EMA: a new frame starts from its predecessor's importance (else from 0).
  bool neighbour_prior = true;
  /// A cell counts as evaluated once one step gives it attention >= evaluation_share / n (the
  /// uniform share times this factor). Cells not yet evaluated enter smoothing at the mean
  /// importance instead of their noise. 0 (default) treats every cell as evaluated.
  float evaluation_share = 0.0f;
  /// Text cells (frame_flag_text) pass through the smoothing pipeline like audio frames; false
  /// (the default): a text cell's smoothed score is its importance over its speaker's baseline
  /// (median and trend mix neighbouring positions, which for 20 ms audio frames share a sound
  /// and for text tokens do not). Chosen with text_recent_share on the llama.cpp dev text
  /// (docs/llama_cpp.md); audio cells are smoothed either way.
  bool smooth_text = false;
  /// Eviction ratio: r = base_rate + lambda * (1 - H / H_max). base_rate = 0.05: with 1 frame per
  /// step each eviction then frees about r * 0.27 B cells (2-7% of B), which amortises planning
  /// over dozens of steps yet keeps mean occupancy within 3% of the trigger level.
  float base_rate = 0.05f;
  float lambda = 0.2f;
  /// VAD weight: final = s * (1 + voice_weight * voice).
  float voice_weight = 0.5f;
  /// Boundary protection: cells within +-boundary_radius positions of a phoneme boundary are
  /// protected.
  std::int32_t boundary_radius = 10;
  /// Boundary protection: how long a boundary protects its neighbourhood. Boundaries arrive several
  /// times a second; protecting them forever would let them pin the whole cache in a long stream.
  float boundary_horizon_ms = 1000.0f;
  /// Recent window: the newest ceil(min_retention_ms / frame_ms) positions are never evicted.
  float min_retention_ms = 200.0f;
  /// Duration of one cached frame (10 ms in the specification, 20 ms for Whisper, 40 ms for
  /// Qwen2-Audio tokens).
  float frame_ms = 10.0f;
  /// Number of speakers; frame speaker ids must lie in [0, num_speakers).
  std::int32_t num_speakers = 1;
  /// Speaker baselines: weight of this step's speaker mean in the running baseline.
  float baseline_rate = 0.1f;
  /// Drift reset: reset baselines when std(last drift_window raw scores) > drift_factor *
  /// global_std, global_std being the running mean (rate baseline_rate) of that same recent std, so
  /// the test flags bursts rather than the steady recency bias of attention.
  std::int32_t drift_window = 10;
  float drift_factor = 2.0f;
  /// Per-frame prior: added to the score, or multiplied in as 1 + prior.
  prior_mode prior = prior_mode::add;
  /// Prefetch: rate-based reservation ahead of need (off by default; tiered_cache::prefetch()).
  /// Last, so aggregate initialisation of the fields above is unchanged.
  prefetch_config prefetch{};
  /// Speech rules of the selection (policy/speech/speech_rules.hpp): attention sinks, the temporal
  /// coverage floor and the alignment frontier, each with its own switch.
  speech_rules_config speech{};
  /// @brief Small budgets: whether the recent window may shrink to fit the budget.
  ///
  /// A plan at the trigger must get back below it, so the cells no plan may evict - the recent
  /// window (retention_frames() positions) and a full emergency pool (sinks included) - must
  /// stay below trigger_cells(). A short clip at a low retention gives budgets of a few cells
  /// where the default 200 ms window alone reaches the trigger. With true (the default) the
  /// cache then protects the newest recent_window_frames() = min(retention_frames(),
  /// trigger_cells() - 1 - floor(split.emergency x budget)) positions instead: the largest
  /// window that fits, down to 0 for a budget of 1, and tiered_cache::recent_window_frames()
  /// reports it. Nothing else shrinks: sinks and host-flagged frames keep the emergency pool's
  /// protection (append() rejects a sink that does not fit in it, see
  /// tiered_cache::emergency_pool_cells()), and a split whose emergency pool alone reaches the
  /// trigger is rejected either way. With false a window that does not fit is rejected by
  /// validate() (naming min_retention_ms or budget): for hosts that need min_retention_ms as
  /// set, whatever the budget. Last, so aggregate initialisation of the fields above is
  /// unchanged.
  bool shrink_recent_window = true;
  /// @brief Text recent window: text cells (frame_flag_text) among the newest
  /// text_recent_cells() positions are never evicted.
  ///
  /// A language model's next token leans on the contiguous text just before it (StreamingLLM's
  /// observation, arXiv 2309.17453), a 20 ms audio frame's score does not; so text keeps a
  /// window that grows with the budget: ceil(text_recent_share x budget) positions, at least
  /// the recent window and at most the room the protected set leaves below the trigger
  /// (trigger_cells() - 1 - floor(split.emergency x budget)). Audio cells in that span are
  /// left to the other rules. 0: text shares the audio's recent window. 0.75 (with
  /// smooth_text false) was the best of {0, 0.25, 0.5, 0.75} x smooth_text on 4,096 tokens of
  /// the llama.cpp dev text: at most 0.5% above the best baseline (TOVA) at 128-1024 cells
  /// (docs/llama_cpp.md). Last, so aggregate initialisation of the fields above is unchanged.
  float text_recent_share = 0.75f;

  /// Capacity actually reserved.
  std::int32_t reserved_capacity() const { return capacity > 0 ? capacity : budget; }
  /// ceil(trigger * budget), at least 1.
  std::int32_t trigger_cells() const {
    const auto t =
        static_cast<std::int32_t>(std::ceil(static_cast<double>(trigger) * budget - 1e-9));
    return t < 1 ? 1 : t;
  }
  /// trigger_cells() - 1 - floor(split.emergency x budget): the most positions a window may
  /// protect so that it and a full emergency pool stay below the trigger (may be <= 0).
  std::int64_t room_below_trigger() const {
    return static_cast<std::int64_t>(trigger_cells()) - 1 - split.emergency_cells(budget);
  }
  /// ceil(min_retention_ms / frame_ms): the recent window this configuration asks for.
  std::int32_t retention_frames() const { return ms_to_frames(min_retention_ms); }
  /// The recent window a cache protects: retention_frames(), or with shrink_recent_window, at
  /// most trigger_cells() - 1 - floor(split.emergency x budget) (at least 0), so that the
  /// window and a full emergency pool stay below the trigger. Positions at or after
  /// newest - recent_window_frames() + 1 are never evicted.
  std::int32_t recent_window_frames() const {
    const std::int32_t asked = retention_frames();
    if (!shrink_recent_window) return asked;
    const std::int64_t room = room_below_trigger();
    return room <= 0 ? 0 : static_cast<std::int32_t>(room < asked ? room : asked);
  }
  /// The text recent window in positions: max(recent_window_frames(),
  /// min(ceil(text_recent_share x budget), trigger_cells() - 1 - floor(split.emergency x
  /// budget))). Its union with the recent window spans the newest text_recent_cells()
  /// positions, so the protected set stays below the trigger as validate() requires.
  std::int32_t text_recent_cells() const {
    const std::int32_t window = recent_window_frames();
    const double asked = std::ceil(static_cast<double>(text_recent_share) * budget - 1e-9);
    const std::int64_t room = room_below_trigger();
    const double text = asked < static_cast<double>(room) ? asked : static_cast<double>(room);
    return text > window ? static_cast<std::int32_t>(text) : window;
  }
  /// ceil(boundary_horizon_ms / frame_ms).
  std::int32_t boundary_horizon_frames() const { return ms_to_frames(boundary_horizon_ms); }
  /// ceil(ms / frame_ms) without float drift.
  std::int32_t ms_to_frames(float ms) const { return static_cast<std::int32_t>(frames_for(ms)); }
  /// ceil(ms / frame_ms) in double, so validate() can bound it before any int conversion.
  double frames_for(float ms) const {
    return std::ceil(static_cast<double>(ms) / static_cast<double>(frame_ms) - 1e-6);
  }

  /// Throws audiokv::error naming the first invalid field.
  void validate() const {
    constexpr const char* where = "audiokv_config";
    types::detail::require_cell_count(where, "config.budget", budget, 1);
    types::detail::require_cell_count(where, "config.capacity", capacity, 0);
    if (prefetch.enabled) {
      AUDIOKV_REQUIRE(capacity >= 0, where, "config.capacity", capacity,
                      "must be >= 0 (with prefetch it is the initial reservation; 0: budget)");
    } else {
      AUDIOKV_REQUIRE(capacity == 0 || capacity >= budget, where, "config.capacity", capacity,
                      "must be 0 or >= budget");
    }
    split.validate(where);
    AUDIOKV_REQUIRE(std::isfinite(trigger) && trigger > 0.0f && trigger <= 1.0f, where,
                    "config.trigger", trigger, "must be in (0, 1]");
    AUDIOKV_REQUIRE(std::isfinite(alpha) && alpha > 0.0f && alpha <= 1.0f, where, "config.alpha",
                    alpha, "must be in (0, 1]");
    AUDIOKV_REQUIRE(std::isfinite(base_rate) && base_rate >= 0.0f && base_rate <= 1.0f, where,
                    "config.base_rate", base_rate, "must be in [0, 1]");
    AUDIOKV_REQUIRE(std::isfinite(evaluation_share) && evaluation_share >= 0.0f, where,
                    "config.evaluation_share", evaluation_share, "must be >= 0");
    AUDIOKV_REQUIRE(std::isfinite(lambda) && lambda >= 0.0f, where, "config.lambda", lambda,
                    "must be >= 0");
    AUDIOKV_REQUIRE(std::isfinite(voice_weight) && voice_weight >= 0.0f, where,
                    "config.voice_weight", voice_weight, "must be >= 0");
    AUDIOKV_REQUIRE(boundary_radius >= 0, where, "config.boundary_radius", boundary_radius,
                    "must be >= 0");
    AUDIOKV_REQUIRE(std::isfinite(frame_ms) && frame_ms > 0.0f, where, "config.frame_ms", frame_ms,
                    "must be > 0");
    AUDIOKV_REQUIRE(std::isfinite(boundary_horizon_ms) && boundary_horizon_ms >= 0.0f, where,
                    "config.boundary_horizon_ms", boundary_horizon_ms, "must be >= 0");
    AUDIOKV_REQUIRE(std::isfinite(min_retention_ms) && min_retention_ms >= 0.0f, where,
                    "config.min_retention_ms", min_retention_ms, "must be >= 0");
    constexpr double max_frames = 1 << 30;
    AUDIOKV_REQUIRE(frames_for(min_retention_ms) <= max_frames, where, "config.min_retention_ms",
                    min_retention_ms, "spans more than 2^30 frames of frame_ms");
    AUDIOKV_REQUIRE(frames_for(boundary_horizon_ms) <= max_frames, where,
                    "config.boundary_horizon_ms", boundary_horizon_ms,
                    "spans more than 2^30 frames of frame_ms");
    AUDIOKV_REQUIRE(num_speakers >= 1 && num_speakers <= 65536, where, "config.num_speakers",
                    num_speakers, "must be in [1, 65536]");
    AUDIOKV_REQUIRE(std::isfinite(baseline_rate) && baseline_rate > 0.0f && baseline_rate <= 1.0f,
                    where, "config.baseline_rate", baseline_rate, "must be in (0, 1]");
    AUDIOKV_REQUIRE(
        std::isfinite(text_recent_share) && text_recent_share >= 0.0f && text_recent_share <= 1.0f,
        where, "config.text_recent_share", text_recent_share, "must be in [0, 1]");
    AUDIOKV_REQUIRE(drift_window >= 2, where, "config.drift_window", drift_window, "must be >= 2");
    AUDIOKV_REQUIRE(std::isfinite(drift_factor) && drift_factor > 0.0f, where,
                    "config.drift_factor", drift_factor, "must be > 0");
    prefetch.validate(where);
    speech.validate(where);
    // The speech rules convert these to frames when planning; bound them here, before any int
    // conversion (a tiny frame_ms makes a millisecond span overflow).
    AUDIOKV_REQUIRE(
        !speech.frontier.enabled || frames_for(speech.frontier.lookback_ms) <= max_frames, where,
        "config.speech.frontier.lookback_ms", speech.frontier.lookback_ms,
        "spans more than 2^30 frames of frame_ms");
    AUDIOKV_REQUIRE(
        !speech.coverage.enabled || frames_for(speech.coverage.segment_ms) <= max_frames, where,
        "config.speech.coverage.segment_ms", speech.coverage.segment_ms,
        "spans more than 2^30 frames of frame_ms");
    validate_protected_set(where);
  }

  /// The always-protected set (the recent window plus a full emergency pool) must stay below
  /// the trigger level, or no eviction could ever get back under it. With
  /// shrink_recent_window the window shrinks to fit (recent_window_frames()), so only an
  /// emergency pool that alone reaches the trigger level is rejected. The error names the
  /// setting that breaks it: min_retention_ms when the recent window alone reaches the
  /// trigger level, split.emergency when the emergency pool alone does, else budget; the
  /// message gives every count.
  void validate_protected_set(const char* where) const {
    const std::int64_t recent = recent_window_frames();
    const std::int64_t emergency = split.emergency_cells(budget);
    const std::int64_t trigger_level = trigger_cells();
    if (recent + emergency < trigger_level) return;
    const std::string counts = ::audiokv::detail::describe(
        "the recent window (ceil(min_retention_ms / frame_ms) = ceil(", min_retention_ms, " / ",
        frame_ms, ") = ", recent,
        " frames) plus the emergency pool (floor(split.emergency x budget) = floor(",
        split.emergency, " x ", budget, ") = ", emergency, " cells) = ", recent + emergency,
        " protected cells must stay below the trigger level (ceil(trigger x budget) = ceil(",
        trigger, " x ", budget, ") = ", trigger_level, " cells)");
    if (recent >= trigger_level) {
      ::audiokv::detail::throw_invalid(
          where, "config.min_retention_ms", min_retention_ms,
          (counts + "; lower min_retention_ms (or raise budget)").c_str());
    }
    if (emergency >= trigger_level) {
      ::audiokv::detail::throw_invalid(
          where, "split.emergency", split.emergency,
          (counts + "; lower split.emergency (or raise trigger)").c_str());
    }
    ::audiokv::detail::throw_invalid(where, "config.budget", budget,
                                     (counts + "; raise budget (or lower min_retention_ms or "
                                               "split.emergency)")
                                         .c_str());
  }
};

}  // namespace audiokv::policy

namespace audiokv {
using policy::audiokv_config;
using policy::prior_mode;
}  // namespace audiokv
