// SPDX-License-Identifier: Apache-2.0
/// @file
/// Prefetch: forecasts, from the rhythm of arriving frames, how many cells a cache will need
/// over the next decode steps, so that capacity can be reserved before the steps run.
///
/// Per decode step the engine appends x >= 0 frames. Speech arrives in runs separated by
/// pauses; a decoder that emits a token per stretch of speech receives the frames of a pause in
/// one burst at the next step, so x is bursty. Two estimates track it:
///   - flow:  rate' = (1 - beta) * rate + beta * x            (EMA of frames per step);
///   - burst: peak' = max(x, decay * peak)                    (decaying maximum).
/// The peak remembers a burst for about 1 / (1 - decay) steps, so the reservation covers the
/// next pause's burst; the rate is the floor once the peak has decayed (when decay < 1 - beta
/// the peak can fall below the EMA of the same history). Both start at 0.
///
/// Per-step allowance: e = max(rate, peak, floor) * (1 + margin). The floor (frames, 0 for pure
/// prediction) is prior knowledge the history cannot give: a stream's first pause after a long
/// stretch of continuous speech brings a burst no estimate has seen yet.
/// Cells held right after the append of step h = 1..H, with n cells now and c the most cells an
/// eviction leaves (a trigger-driven policy evicts back below its trigger whenever it reaches
/// it; c = INT32_MAX when the policy does not evict on its own):
///   before append of step h: at most min(n + (h - 1) e, max(n, c));
///   need_h = min(n + (h - 1) e, max(n, c)) + e,
/// increasing in h, so the forecast over a horizon of H steps is need_H, i.e.
///   need = ceil(min(n + (H - 1) e, max(n, c)) + e), clamped to [n, INT32_MAX].
/// Without the ceiling (c = INT32_MAX) this is n + ceil(H e). Reservations are rounded up to a
/// granularity g: ceil(need / g) * g, clamped to INT32_MAX.
///
/// Everything is host/device, allocation-free and exception-free; arithmetic is in double and
/// every result is bounded, so no input can overflow an int32.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "math.hpp"

namespace audiokv::core {

/// Largest cell count any forecast returns.
inline constexpr std::int32_t max_forecast_cells = 2147483647;

/// rate' = (1 - beta) * rate + beta * frames: the EMA of frames per step.
AUDIOKV_HOST_DEVICE float frame_rate_update(float rate, std::int32_t frames, float beta) {
  return (1.0f - beta) * rate + beta * static_cast<float>(frames);
}

/// peak' = max(frames, decay * peak): the decaying maximum of frames per step.
AUDIOKV_HOST_DEVICE float burst_peak_update(float peak, std::int32_t frames, float decay) {
  return max_of(static_cast<float>(frames), decay * peak);
}

/// e = max(rate, peak, floor) * (1 + margin): cells to allow for one step.
AUDIOKV_HOST_DEVICE double step_allowance(float rate, float peak, float floor, float margin) {
  return static_cast<double>(max_of(max_of(rate, peak), floor)) *
         (1.0 + static_cast<double>(margin));
}

/// ceil(x), clamped to [0, max_forecast_cells]; NaN gives 0.
AUDIOKV_HOST_DEVICE std::int32_t ceil_to_cells(double x) {
  if (!(x > 0.0)) return 0;  // also NaN
  if (!(x < static_cast<double>(max_forecast_cells))) return max_forecast_cells;
  const auto whole = static_cast<std::int64_t>(x);
  return static_cast<std::int32_t>(static_cast<double>(whole) < x ? whole + 1 : whole);
}

/// need = ceil(min(n + (H - 1) e, max(n, c)) + e), clamped to [n, INT32_MAX] (file comment).
/// A NaN or negative allowance counts as 0: the forecast then asks for nothing beyond n, so a
/// corrupt estimate shows as a failing append rather than a huge reservation.
/// @param num_cells n >= 0, cells held now.
/// @param allowance e, cells per step (step_allowance).
/// @param horizon_steps H >= 1.
/// @param settle_cells c, cells an eviction leaves at most (max_forecast_cells: no ceiling).
AUDIOKV_HOST_DEVICE std::int32_t forecast_cells(std::int32_t num_cells, double allowance,
                                                std::int32_t horizon_steps,
                                                std::int32_t settle_cells) {
  const double n = static_cast<double>(max_of(num_cells, 0));
  const double e = allowance > 0.0 ? allowance : 0.0;  // NaN fails the comparison
  const double h = static_cast<double>(max_of(horizon_steps, 1));
  // (H - 1) e only when H > 1: 0 * inf would be NaN for an infinite allowance.
  const double growth = h > 1.0 ? (h - 1.0) * e : 0.0;
  const double before_last = min_of(n + growth, max_of(n, static_cast<double>(settle_cells)));
  return max_of(ceil_to_cells(before_last + e), static_cast<std::int32_t>(n));
}

/// ceil(cells / granularity) * granularity, clamped to INT32_MAX; granularity < 1 counts as 1.
AUDIOKV_HOST_DEVICE std::int32_t round_up_cells(std::int32_t cells, std::int32_t granularity) {
  const std::int64_t g = max_of(granularity, 1);
  const std::int64_t c = max_of(cells, 0);
  const std::int64_t rounded = (c + g - 1) / g * g;
  return rounded > max_forecast_cells ? max_forecast_cells : static_cast<std::int32_t>(rounded);
}

}  // namespace audiokv::core
