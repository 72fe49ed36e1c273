// SPDX-License-Identifier: Apache-2.0
/// @file
/// Prefetch: the per-cache state of rate-based prefetch: frame-rate and burst estimates, and the
/// capacity they forecast (formulas in core/prefetch.hpp).
#pragma once

#include <cstdint>

#include "../../core/prefetch.hpp"
#include "../../error.hpp"
#include "../../types/prefetch_config.hpp"

namespace audiokv::policy {

/// @brief Forecast of the cells a cache needs over the next horizon_steps decode steps, from
/// the frames appended at each past step. Allocates nothing; `prefetch_config::enabled` is not
/// read here (the owner decides whether to act on the forecast).
class capacity_forecast {
 public:
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit capacity_forecast(const prefetch_config& config = prefetch_config{})
      : config_((config.validate("capacity_forecast"), config)) {}

  /// The validated configuration.
  const prefetch_config& config() const noexcept { return config_; }
  /// EMA of frames per step.
  float rate() const noexcept { return rate_; }
  /// Decaying maximum of frames per step.
  float peak() const noexcept { return peak_; }
  /// Steps observed so far.
  std::int64_t steps() const noexcept { return steps_; }

  /// Sets the estimates to values a forecast with this configuration reached before (a
  /// restored snapshot): rate and peak finite and >= 0, steps >= 0, which the caller checked.
  void restore_state(float rate, float peak, std::int64_t steps) noexcept {
    rate_ = rate;
    peak_ = peak;
    steps_ = steps;
  }

  /// Records that one decode step appended `frames_appended` frames. No allocation.
  /// @throws audiokv::error when frames_appended < 0 (nothing changes).
  void observe_step(std::int32_t frames_appended) {
    AUDIOKV_REQUIRE(frames_appended >= 0, "capacity_forecast::observe_step", "frames_appended",
                    frames_appended, "must be >= 0");
    rate_ = core::frame_rate_update(rate_, frames_appended, config_.beta);
    peak_ = core::burst_peak_update(peak_, frames_appended, config_.decay);
    ++steps_;
  }

  /// Cells to hold to run the next horizon_steps steps without exceeding capacity, unrounded:
  /// ceil(min(n + (H - 1) e, max(n, c)) + e) with e = max(rate, peak, min_burst_frames)
  /// (1 + margin).
  /// @param num_cells n, cells held now (>= 0).
  /// @param settle_cells c, cells an eviction leaves at most (a trigger-driven policy: its
  ///        trigger - 1); the default assumes no eviction within the horizon.
  std::int32_t forecast(std::int32_t num_cells,
                        std::int32_t settle_cells = core::max_forecast_cells) const {
    AUDIOKV_REQUIRE(num_cells >= 0, "capacity_forecast::forecast", "num_cells", num_cells,
                    "must be >= 0");
    const double allowance = core::step_allowance(
        rate_, peak_, static_cast<float>(config_.min_burst_frames), config_.margin);
    return core::forecast_cells(num_cells, allowance, config_.horizon_steps, settle_cells);
  }

  /// The capacity to reserve: forecast(num_cells, settle_cells) rounded up to the granularity.
  std::int32_t cells_to_reserve(std::int32_t num_cells,
                                std::int32_t settle_cells = core::max_forecast_cells) const {
    return core::round_up_cells(forecast(num_cells, settle_cells), config_.granularity);
  }

  /// True when `capacity` is below the (unrounded) forecast. Comparing with the unrounded
  /// value leaves the rounding as slack, so a reservation lasts until the estimate outgrows it.
  bool needs_reserve(std::int32_t num_cells, std::int32_t capacity,
                     std::int32_t settle_cells = core::max_forecast_cells) const {
    return capacity < forecast(num_cells, settle_cells);
  }

 private:
  prefetch_config config_;
  float rate_ = 0.0f;
  float peak_ = 0.0f;
  std::int64_t steps_ = 0;
};

}  // namespace audiokv::policy

namespace audiokv {
using policy::capacity_forecast;
}  // namespace audiokv
