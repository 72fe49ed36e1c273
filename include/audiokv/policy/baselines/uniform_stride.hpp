// SPDX-License-Identifier: Apache-2.0
/// @file
/// Uniform stride: keep evenly spaced cells (a content-blind baseline).
#pragma once

#include <cstdint>

#include "baseline_policy.hpp"

namespace audiokv::policy::baselines {

/// @brief When num_cells = n > budget (or on plan_to(target)), keep the target cells at slots
///   k_i = floor(i * (n - 1) / (target - 1)),  i = 0 .. target - 1   (target >= 2)
/// so the oldest and the newest cell survive and the gaps differ by at most one; target 1
/// keeps the newest cell. Slots are strictly increasing because n > target. Attention is
/// validated and ignored.
class uniform_stride final : public baseline_policy {
 public:
  /// Validates `config` and allocates every per-cell array for its capacity; nothing allocates
  /// afterwards. Not thread-safe: one thread at a time per object.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit uniform_stride(const baseline_config& config)
      : baseline_policy("uniform_stride", config) {}

  const char* name() const noexcept override { return "uniform_stride"; }

 protected:
  void on_observe_rows(const float*, std::int32_t, gqa_reduce) override {}
  void select_evictions(std::int32_t target, std::uint8_t* mask) const override {
    const std::int32_t n = store().size();
    for (std::int32_t j = 0; j < n; ++j) mask[j] = 1;
    if (target == 1) mask[n - 1] = 0;
    if (target < 2) return;
    for (std::int64_t i = 0; i < target; ++i) {
      mask[static_cast<std::int32_t>(i * (n - 1) / (target - 1))] = 0;
    }
  }
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::uniform_stride;
}  // namespace audiokv
