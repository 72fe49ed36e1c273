// SPDX-License-Identifier: Apache-2.0
/// @file
/// ObservedAttention (kvpress ObservedAttentionPress) in streaming form: the mean attention a
/// cell has received since it was appended.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "baseline_policy.hpp"

namespace audiokv::policy::baselines {

/// @brief score[j] = (sum of the attention cell j received) / (number of rows observed since j
/// was appended). Appending one frame per observed query row reproduces kvpress's
/// sum_q A[q, j] / (N - j) exactly. GQA: observe_group reduces the group first (kvpress takes
/// the group mean of per-head scores; with mean reduction the two are equal). No window, no
/// sinks. Cells never observed score +inf (kept).
class observed_attention final : public baseline_policy {
 public:
  /// Validates `config` and allocates every per-cell array for its capacity; nothing allocates
  /// afterwards. Not thread-safe: one thread at a time per object.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit observed_attention(const baseline_config& config)
      : baseline_policy("observed_attention", config),
        sum_(config.reserved_capacity()),
        count_(config.reserved_capacity()),
        row_(config.reserved_capacity()),
        score_(config.reserved_capacity()),
        order_(config.reserved_capacity()) {}

  const char* name() const noexcept override { return "observed_attention"; }

  /// Score of cell `slot` (mean received attention; +inf before its first observation).
  float score(std::int32_t slot) const noexcept {
    return count_[slot] > 0 ? static_cast<float>(sum_[slot] / count_[slot])
                            : std::numeric_limits<float>::infinity();
  }

 protected:
  void on_append(std::int32_t first, std::int32_t count) override {
    for (std::int32_t j = first; j < first + count; ++j) {
      sum_[j] = 0.0;
      count_[j] = 0;
    }
  }
  void on_observe_rows(const float* attention, std::int32_t rows, gqa_reduce mode) override {
    reduce_rows(attention, rows, mode, row_.data());
    for (std::int32_t j = 0; j < store().size(); ++j) {
      sum_[j] += row_[j];
      ++count_[j];
    }
  }
  void select_evictions(std::int32_t target, std::uint8_t* mask) const override {
    const std::int32_t n = store().size();
    for (std::int32_t j = 0; j < n; ++j) {
      score_[j] = score(j);
      order_[j] = j;
    }
    evict_lowest_by_partition(score_.data(), order_.data(), n, n - target, mask);
  }
  void on_apply(const eviction_plan& plan) override {
    policy::detail::compact_array(sum_, plan);
    policy::detail::compact_array(count_, plan);
  }

 private:
  std::vector<double> sum_;                  // [capacity] received attention
  std::vector<std::int64_t> count_;          // [capacity] rows observed since append
  std::vector<float> row_;                   // [capacity] reduced row scratch
  mutable std::vector<float> score_;         // [capacity] scratch
  mutable std::vector<std::int32_t> order_;  // [capacity] scratch
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::observed_attention;
}  // namespace audiokv
