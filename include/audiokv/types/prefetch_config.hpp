// SPDX-License-Identifier: Apache-2.0
/// @file
/// Prefetch: the switch and the parameters of rate-based prefetch (core/prefetch.hpp has the
/// formulas they enter).
#pragma once

#include <cmath>
#include <cstdint>

#include "../error.hpp"

namespace audiokv::types {

/// @brief Parameters of capacity_forecast and the switch that lets tiered_cache::prefetch()
/// act on them. Off by default: the cache then keeps the capacity of its configuration.
struct prefetch_config {
  /// Off (default): prefetch() does nothing and config.capacity must be 0 or >= budget.
  /// On: config.capacity is only the initial reservation (it may be below the budget) and
  /// prefetch() grows it to the forecast.
  bool enabled = false;
  /// EMA weight of this step's frames in the rate: rate' = (1 - beta) rate + beta x.
  float beta = 0.1f;
  /// Per-step decay of the burst peak: peak' = max(x, decay peak). 0.95 remembers a burst for
  /// about 20 steps, i.e. across the next pauses of the same stretch of speech.
  float decay = 0.95f;
  /// Steps ahead the reservation covers, so prefetch() may skip up to horizon_steps - 1 steps.
  std::int32_t horizon_steps = 2;
  /// Relative headroom on each step's estimate: e = max(rate, peak, min_burst_frames)
  /// (1 + margin).
  float margin = 0.25f;
  /// Floor of the per-step estimate, in frames: the burst the reservation covers before any has
  /// been seen (e.g. the frames of one decode step plus the longest pause to absorb). 0 (default)
  /// is pure prediction, which misses the first burst larger than the history.
  std::int32_t min_burst_frames = 0;
  /// Reservations are rounded up to a multiple of this many cells, so reserve() calls (which
  /// allocate and copy every per-cell array) stay rare.
  std::int32_t granularity = 64;

  /// Throws audiokv::error naming the first invalid field ("prefetch.beta", ...).
  void validate(const char* where) const {
    AUDIOKV_REQUIRE(std::isfinite(beta) && beta > 0.0f && beta <= 1.0f, where, "prefetch.beta",
                    beta, "must be in (0, 1]");
    AUDIOKV_REQUIRE(std::isfinite(decay) && decay >= 0.0f && decay <= 1.0f, where, "prefetch.decay",
                    decay, "must be in [0, 1]");
    AUDIOKV_REQUIRE(horizon_steps >= 1, where, "prefetch.horizon_steps", horizon_steps,
                    "must be >= 1");
    AUDIOKV_REQUIRE(std::isfinite(margin) && margin >= 0.0f, where, "prefetch.margin", margin,
                    "must be finite and >= 0");
    AUDIOKV_REQUIRE(min_burst_frames >= 0, where, "prefetch.min_burst_frames", min_burst_frames,
                    "must be >= 0");
    AUDIOKV_REQUIRE(granularity >= 1, where, "prefetch.granularity", granularity, "must be >= 1");
  }
};

}  // namespace audiokv::types

namespace audiokv {
using types::prefetch_config;
}  // namespace audiokv
