// SPDX-License-Identifier: Apache-2.0
/// @file
/// kvpress budget arithmetic: compute_n_kept (int() truncation, clamped to >= 1), PyramidKV's
/// get_layer_budget (Python round = half-to-even) and AdaKV's safeguard count.
#pragma once

#include <cmath>
#include <cstdint>

#include "../../error.hpp"

namespace audiokv::policy::scores {

/// kvpress 0.5.5 `compute_n_kept(N, r)`: 0 when r >= 1, else max(1, int(N * (1 - r))), with the
/// product in double and int() truncation (not round): int(100 * (1 - 0.8)) == 19.
/// @throws audiokv::error when n < 0 or r is not in [0, 1].
inline std::int64_t kvpress_n_kept(std::int64_t n, double r) {
  AUDIOKV_REQUIRE(n >= 0, "scores::kvpress_n_kept", "n", n, "must be >= 0");
  AUDIOKV_REQUIRE(std::isfinite(r) && r >= 0.0 && r <= 1.0, "scores::kvpress_n_kept",
                  "compression_ratio", r, "must be in [0, 1]");
  if (r >= 1.0) return 0;
  const auto kept = static_cast<std::int64_t>(static_cast<double>(n) * (1.0 - r));
  return kept < 1 ? 1 : kept;
}

/// Python's round() on a double: half-to-even under the default rounding mode.
inline std::int64_t python_round(double x) { return static_cast<std::int64_t>(std::nearbyint(x)); }

/// @brief PyramidKV per-layer budget (kvpress `PyramidKVPress.get_layer_budget`), generalised to
/// a mean budget `kept_mean` = N(1 - r) that the caller computes in double.
///
///   cap = w + kept_mean; min_n = (cap - w) / beta; max_n = 2 (cap - w) - min_n
///   if max_n >= N - w: max_n = N - w; min_n = 2 (cap - w) - max_n
///   if not (N >= max_n >= min_n >= w): return max(1, round(kept_mean))   (uniform fallback)
///   step = (max_n - min_n) / (L - 1) if L > 1 else 0
///   return round(max_n - layer * step)
///
/// `n` may be +infinity for a streaming cache with no fixed prompt length (no clamp). With one
/// layer kvpress 0.5.5 sets step = 0 and keeps round(max_n), not the uniform N(1 - r): at
/// N = 1000, w = 3, r = 0.5 that is 975 (max_n clamped to N - w = 997 at r = 0.1). Rounding is
/// half-to-even.
inline std::int64_t pyramid_layer_budget_mean(double n, double kept_mean, std::int32_t window,
                                              std::int32_t beta, std::int32_t num_layers,
                                              std::int32_t layer) {
  constexpr const char* where = "scores::pyramid_layer_budget";
  AUDIOKV_REQUIRE(!std::isnan(n) && n >= 0.0, where, "n", n, "must be >= 0");
  AUDIOKV_REQUIRE(std::isfinite(kept_mean) && kept_mean >= 0.0, where, "kept_mean", kept_mean,
                  "must be finite and >= 0");
  AUDIOKV_REQUIRE(window >= 0, where, "window", window, "must be >= 0");
  AUDIOKV_REQUIRE(beta >= 1, where, "beta", beta, "must be >= 1");
  AUDIOKV_REQUIRE(num_layers >= 1, where, "num_layers", num_layers, "must be >= 1");
  AUDIOKV_REQUIRE(layer >= 0 && layer < num_layers, where, "layer", layer,
                  "must be in [0, num_layers)");
  const double w = window;
  const double cap = w + kept_mean;
  double min_n = (cap - w) / beta;
  double max_n = (cap - w) * 2.0 - min_n;
  if (max_n >= n - w) {
    max_n = n - w;
    min_n = (cap - w) * 2.0 - max_n;
  }
  if (!(n >= max_n && max_n >= min_n && min_n >= w)) {
    const std::int64_t uniform = python_round(kept_mean);
    return uniform < 1 ? 1 : uniform;
  }
  const double step = num_layers > 1 ? (max_n - min_n) / (num_layers - 1) : 0.0;
  return python_round(max_n - layer * step);
}

/// kvpress `get_layer_budget(N, r)` for a prompt of n tokens at compression ratio r.
inline std::int64_t pyramid_layer_budget(std::int64_t n, double r, std::int32_t window,
                                         std::int32_t beta, std::int32_t num_layers,
                                         std::int32_t layer) {
  AUDIOKV_REQUIRE(std::isfinite(r) && r >= 0.0 && r < 1.0, "scores::pyramid_layer_budget",
                  "compression_ratio", r, "must be in [0, 1)");
  AUDIOKV_REQUIRE(n >= 0, "scores::pyramid_layer_budget", "n", n, "must be >= 0");
  const double nd = static_cast<double>(n);
  return pyramid_layer_budget_mean(nd, nd * (1.0 - r), window, beta, num_layers, layer);
}

/// kvpress AdaKVPress safeguard: n_safe = max(1, int(n_kept * alpha)) when alpha > 0 and
/// n_kept > 0, else 0. Each head's top n_safe scores are always kept.
inline std::int64_t adakv_n_safe(std::int64_t n_kept, double alpha) {
  AUDIOKV_REQUIRE(n_kept >= 0, "scores::adakv_n_safe", "n_kept", n_kept, "must be >= 0");
  AUDIOKV_REQUIRE(std::isfinite(alpha) && alpha >= 0.0 && alpha <= 1.0, "scores::adakv_n_safe",
                  "alpha_safeguard", alpha, "must be in [0, 1]");
  if (alpha <= 0.0 || n_kept <= 0) return 0;
  const auto safe = static_cast<std::int64_t>(static_cast<double>(n_kept) * alpha);
  return safe < 1 ? 1 : safe;
}

}  // namespace audiokv::policy::scores

namespace audiokv {
namespace scores = policy::scores;
}  // namespace audiokv
