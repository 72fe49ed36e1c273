// SPDX-License-Identifier: Apache-2.0
/// @file
/// LRU, project-defined (no reference implementation exists in kvpress or the official repos):
/// evict the cell whose last "use" is oldest, where a use is a step whose attention on the cell
/// reaches a threshold tau.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../../error.hpp"
#include "baseline_policy.hpp"

namespace audiokv::policy::baselines {

/// @brief Configuration of lru.
struct lru_config {
  /// Budget, capacity and speakers shared by every baseline.
  baseline_config base{};
  /// Hit threshold. With tau_per_cell (default) a cell is used at a step when its attention
  /// >= tau / num_cells, i.e. at least tau times the uniform share; the default tau = 1 counts
  /// every above-average weight as a use, which keeps the rule meaningful from 100 to 128k
  /// cells. With tau_per_cell = false the threshold is the absolute weight tau.
  float tau = 1.0f;
  /// Whether tau is relative to the uniform share (tau / num_cells) or absolute.
  bool tau_per_cell = true;

  /// Checks every field; `where` names the caller in the message.
  /// @throws audiokv::error naming the first invalid field (e.g. "config.budget").
  void validate(const char* where) const {
    AUDIOKV_REQUIRE(std::isfinite(tau) && tau >= 0.0f, where, "config.tau", tau,
                    "must be finite and >= 0");
  }
};

/// @brief LRU: last_use[j] is the step (1-based count of observe calls) of the latest hit on
/// cell j; appending counts as a use at the current step. When num_cells > budget the cells
/// with the oldest last_use go; ties evict the older position first.
class lru final : public baseline_policy {
 public:
  /// Validates `config` and allocates every per-cell array for its capacity; nothing allocates
  /// afterwards. Not thread-safe: one thread at a time per object.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit lru(const lru_config& config)
      : baseline_policy("lru", (config.validate("lru"), config.base)),
        tau_(config.tau),
        tau_per_cell_(config.tau_per_cell),
        last_use_(config.base.reserved_capacity()),
        row_(config.base.reserved_capacity()),
        order_(config.base.reserved_capacity()) {}

  const char* name() const noexcept override { return "lru"; }
  /// [num_cells()] step of each cell's latest use.
  const std::int64_t* last_use() const noexcept { return last_use_.data(); }

 protected:
  void on_append(std::int32_t first, std::int32_t count) override {
    for (std::int32_t j = first; j < first + count; ++j) last_use_[j] = steps();
  }
  void on_observe_rows(const float* attention, std::int32_t rows, gqa_reduce mode) override {
    const std::int32_t n = store().size();
    reduce_rows(attention, rows, mode, row_.data());
    const float threshold = tau_per_cell_ && n > 0 ? tau_ / static_cast<float>(n) : tau_;
    const std::int64_t step = steps() + 1;
    for (std::int32_t j = 0; j < n; ++j) {
      if (row_[j] >= threshold) last_use_[j] = step;
    }
  }
  void select_evictions(std::int32_t target, std::uint8_t* mask) const override {
    const std::int32_t n = store().size();
    const std::int32_t* pos = store().pos();
    for (std::int32_t j = 0; j < n; ++j) order_[j] = j;
    policy::detail::mark_lowest(last_use_.data(), pos, order_.data(), n, n - target, mask);
  }
  void on_apply(const eviction_plan& plan) override {
    policy::detail::compact_array(last_use_, plan);
  }

 private:
  float tau_;
  bool tau_per_cell_;
  std::vector<std::int64_t> last_use_;       // [capacity]
  std::vector<float> row_;                   // [capacity] reduced row scratch
  mutable std::vector<std::int32_t> order_;  // [capacity] scratch
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::lru;
using policy::baselines::lru_config;
}  // namespace audiokv
