// SPDX-License-Identifier: Apache-2.0
/// @file
/// H2O, the official accumulate-plus-recent rule (FMInference/H2O
/// h2o_hf/utils_real_drop/modify_llama.py, H2OKVCache_LayerWise).
#pragma once

#include <cstdint>
#include <vector>

#include "../../error.hpp"
#include "baseline_policy.hpp"

namespace audiokv::policy::baselines {

/// @brief Configuration of h2o: budget = hh_size + recent_size.
struct h2o_config {
  /// Budget, capacity and speakers shared by every baseline.
  baseline_config base{};
  /// Recent cells always kept; the rest of the budget holds heavy hitters. -1 means
  /// budget / 2 (the paper's heavy_ratio = recent_ratio split; the class default is 4 + 512).
  std::int32_t recent_size = -1;

  /// The recent window: recent_size, or budget / 2 when it is -1.
  std::int32_t resolved_recent() const { return recent_size < 0 ? base.budget / 2 : recent_size; }
  /// Checks every field; `where` names the caller in the message.
  /// @throws audiokv::error naming the first invalid field (e.g. "config.budget").
  void validate(const char* where) const {
    AUDIOKV_REQUIRE(recent_size >= -1 && recent_size <= base.budget, where, "config.recent_size",
                    recent_size, "must be -1 (budget / 2) or in [0, budget]");
  }
};

/// @brief H2O: hh[j] accumulates every attention weight cell j receives (unnormalised column
/// sums, `_update_hh_score`); new cells start at 0 and get this step's weight on observe().
/// When num_cells > budget keep the last recent_size cells plus the top hh_size = budget -
/// recent_size of the older ones (`__call__`); survivors keep their sums. plan_to(target)
/// keeps min(recent_size, target) recent cells and the top rest. Ties evict the older cell.
/// A prefill is observed one query row at a time (rows are zero above the diagonal). For GQA,
/// observe_group reduces the group first (the official code is MHA-only).
class h2o final : public baseline_policy {
 public:
  /// Validates `config` and allocates every per-cell array for its capacity; nothing allocates
  /// afterwards. Not thread-safe: one thread at a time per object.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit h2o(const h2o_config& config)
      : baseline_policy("h2o", (config.validate("h2o"), config.base)),
        recent_size_(config.resolved_recent()),
        hh_(config.base.reserved_capacity()),
        row_(config.base.reserved_capacity()),
        order_(config.base.reserved_capacity()) {}

  const char* name() const noexcept override { return "h2o"; }
  /// Recent cells always kept.
  std::int32_t recent_size() const noexcept { return recent_size_; }
  /// Heavy-hitter cells kept: budget() - recent_size().
  std::int32_t hh_size() const noexcept { return budget() - recent_size_; }
  /// [num_cells()] accumulated attention of each cell.
  const double* accumulated() const noexcept { return hh_.data(); }

 protected:
  void on_append(std::int32_t first, std::int32_t count) override {
    for (std::int32_t j = first; j < first + count; ++j) hh_[j] = 0.0;
  }
  void on_observe_rows(const float* attention, std::int32_t rows, gqa_reduce mode) override {
    reduce_rows(attention, rows, mode, row_.data());
    for (std::int32_t j = 0; j < store().size(); ++j) hh_[j] += row_[j];
  }
  void select_evictions(std::int32_t target, std::uint8_t* mask) const override {
    const std::int32_t n = store().size();
    const std::int32_t recent = recent_size_ < target ? recent_size_ : target;
    const std::int32_t candidates = n - recent;
    for (std::int32_t j = 0; j < candidates; ++j) order_[j] = j;
    evict_lowest_by_hh(candidates, n - target, mask);
  }
  void on_apply(const eviction_plan& plan) override { policy::detail::compact_array(hh_, plan); }

 private:
  /// The lowest (hh, position) cells, compared in double so long streams never tie by float
  /// rounding.
  void evict_lowest_by_hh(std::int32_t size, std::int32_t count, std::uint8_t* mask) const {
    policy::detail::mark_lowest(hh_.data(), store().pos(), order_.data(), size, count, mask);
  }

  std::int32_t recent_size_;
  std::vector<double> hh_;                   // [capacity] accumulated attention
  std::vector<float> row_;                   // [capacity] reduced row scratch
  mutable std::vector<std::int32_t> order_;  // [capacity] candidate scratch
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::h2o;
using policy::baselines::h2o_config;
}  // namespace audiokv
