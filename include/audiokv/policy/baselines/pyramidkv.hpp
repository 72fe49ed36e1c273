// SPDX-License-Identifier: Apache-2.0
/// @file
/// PyramidKV in streaming form: SnapKV scores with a per-layer budget from the kvpress
/// get_layer_budget schedule (more cells in lower layers, fewer in higher ones).
#pragma once

#include <cstdint>
#include <limits>

#include "../../error.hpp"
#include "../../types/cache_limits.hpp"
#include "../scores/budget.hpp"
#include "snapkv.hpp"

namespace audiokv::policy::baselines {

/// @brief Configuration of pyramidkv. snap.base.budget is the MEAN budget over layers (the
/// kvpress N(1 - r)); this layer's budget is pyramid_layer_budget_mean(inf, mean, w, beta, L, l).
struct pyramidkv_config {
  /// The SnapKV scoring; snap.base.budget is the mean budget over layers.
  snapkv_config snap{};
  /// This layer's index in [0, num_layers).
  std::int32_t layer = 0;
  /// Layers in the pyramid.
  std::int32_t num_layers = 1;
  /// Pyramid steepness (kvpress beta): the top layer keeps mean / beta.
  std::int32_t beta = 20;

  /// This layer's budget. A streaming cache has no fixed prompt length N, so the clamp
  /// max_n <= N - w never fires (N = infinity); the uniform fallback applies when
  /// min_n = mean / beta < window. With one layer the budget is the mean itself: kvpress keeps
  /// round(max_n) there, which is bounded only by that clamp (at N = infinity it would be
  /// (2 - 1 / beta) * mean, about twice the configured cells). scores::pyramid_layer_budget, for
  /// a prompt of known length, follows kvpress.
  std::int32_t layer_budget() const {
    if (num_layers == 1) return snap.base.budget;
    return static_cast<std::int32_t>(scores::pyramid_layer_budget_mean(
        std::numeric_limits<double>::infinity(), static_cast<double>(snap.base.budget), snap.window,
        beta, num_layers, layer));
  }
  /// snap with base.budget replaced by the layer budget (capacity 0 still means budget + 1).
  snapkv_config resolved(const char* where) const {
    // The mean first: the schedule of a budget above the bound could overflow int32.
    types::detail::require_cell_count(where, "config.budget", snap.base.budget, 1);
    AUDIOKV_REQUIRE(num_layers >= 1, where, "config.num_layers", num_layers, "must be >= 1");
    AUDIOKV_REQUIRE(layer >= 0 && layer < num_layers, where, "config.layer", layer,
                    "must be in [0, num_layers)");
    AUDIOKV_REQUIRE(beta >= 1, where, "config.beta", beta, "must be >= 1");
    AUDIOKV_REQUIRE(snap.window >= 1, where, "config.window", snap.window, "must be >= 1");
    snapkv_config out = snap;
    out.base.budget = layer_budget();
    AUDIOKV_REQUIRE(snap.base.capacity == 0 || snap.base.capacity >= out.base.budget, where,
                    "config.capacity", snap.base.capacity,
                    "must be 0 or >= this layer's pyramid budget");
    return out;
  }
};

/// @brief Streaming PyramidKV: snapkv with budget() = this layer's pyramid budget.
class pyramidkv final : public snapkv {
 public:
  /// Validates `config` and allocates every per-cell array for its capacity; nothing allocates
  /// afterwards. Not thread-safe: one thread at a time per object.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit pyramidkv(const pyramidkv_config& config)
      : snapkv("pyramidkv", config.resolved("pyramidkv")), mean_budget_(config.snap.base.budget) {}

  const char* name() const noexcept override { return "pyramidkv"; }
  /// The mean budget over layers the schedule was built from.
  std::int32_t mean_budget() const noexcept { return mean_budget_; }

 private:
  std::int32_t mean_budget_;
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::pyramidkv;
using policy::baselines::pyramidkv_config;
}  // namespace audiokv
