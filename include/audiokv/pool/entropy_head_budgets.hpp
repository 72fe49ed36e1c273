// SPDX-License-Identifier: Apache-2.0
/// @file
/// Head budgets from attention: a layer's budget split over its KV heads at a one-shot
/// compression by what each head was seen to attend, with no model knowledge.
///
///   H_h    = mean over the observed steps of the entropy of head h's attention, in nats
///   w_h    = exp(exponent * H_h) = P_h^exponent, P_h = exp(H_h) the cells h reads at once
///   budget = head_budget_allocator::allocate_weighted(layer budget, w), exact total
///
/// exponent < 0 favours the heads that read few cells at a step (a Whisper decoder's alignment
/// heads among them). -0.25 was chosen on Whisper tiny.en's dev clips, offline protocol, and
/// confirmed on fresh ones; -0.5 then replaced it on clips neither had seen (fewer word errors
/// and runaways at 10%, the same at 20% and 40%; benchmarks/results/quality_dev_head_entropy.md).
/// exponent > 0 ran away there. An engine observes every head of a layer at each step, then plans
/// each head down to its share (eviction_policy::plan_to) once, when it compresses;
/// pool::tiered_layer does both for AudioKV heads.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../core/entropy.hpp"
#include "../error.hpp"
#include "../policy/baselines/head_budget_allocator.hpp"
#include "../span.hpp"

namespace audiokv::pool {

/// @brief Accumulates each head's attention entropy per step and splits a layer's budget by it.
///
/// observe() allocates nothing; split() returns a new vector (a one-shot compression's call).
class entropy_head_budgets {
 public:
  /// G chosen on the dev clips (see the file comment).
  static constexpr double default_exponent = -0.5;

  /// @param num_heads KV heads of the layer (>= 1).
  /// @param exponent  G of w_h = P_h^G (finite; 0 gives equal budgets).
  /// @throws audiokv::error naming "num_heads" or "exponent".
  explicit entropy_head_budgets(std::int32_t num_heads, double exponent = default_exponent)
      : exponent_(exponent) {
    constexpr const char* where = "entropy_head_budgets";
    AUDIOKV_REQUIRE(num_heads >= 1, where, "num_heads", num_heads, "must be >= 1");
    AUDIOKV_REQUIRE(std::isfinite(exponent), where, "exponent", exponent, "must be finite");
    entropy_sum_.assign(static_cast<std::size_t>(num_heads), 0.0);
    steps_.assign(static_cast<std::size_t>(num_heads), 0);
  }

  /// Heads of the layer.
  std::int32_t num_heads() const noexcept { return static_cast<std::int32_t>(steps_.size()); }
  /// The exponent G.
  double exponent() const noexcept { return exponent_; }
  /// Steps head `head` has observed since construction or reset().
  std::int32_t steps(std::int32_t head) const {
    check_head("entropy_head_budgets::steps", head);
    return steps_[static_cast<std::size_t>(head)];
  }

  /// True when every head has observed at least one step (split() needs it).
  bool all_observed() const noexcept {
    for (const std::int32_t n : steps_)
      if (n == 0) return false;
    return true;
  }

  /// One decode step of head `head`: its attention probabilities over its cells (negative
  /// values count as 0; the row need not sum to 1).
  /// @throws audiokv::error naming "head" when out of range; nothing changes then.
  void observe(std::int32_t head, span<const float> attention) {
    check_head("entropy_head_budgets::observe", head);
    core::entropy_accumulator step;
    for (const float p : attention) step.add(p);
    entropy_sum_[static_cast<std::size_t>(head)] += step.entropy();
    ++steps_[static_cast<std::size_t>(head)];
  }

  /// Mean attention entropy per observed step of each head, in nats.
  /// @throws audiokv::error naming "steps" when a head has observed no step.
  std::vector<double> mean_entropy() const {
    std::vector<double> mean(steps_.size());
    for (std::size_t h = 0; h < steps_.size(); ++h) {
      AUDIOKV_REQUIRE(steps_[h] > 0, "entropy_head_budgets::mean_entropy", "steps", steps_[h],
                      "must be > 0 for every head: observe() each head before splitting");
      mean[h] = entropy_sum_[h] / steps_[h];
    }
    return mean;
  }

  /// Budgets summing exactly to `layer_budget`, each >= `floor_cells`, by P_h^G.
  /// @throws audiokv::error naming "steps" (a head observed nothing), "total_budget" (below
  /// num_heads * floor_cells) or "floor_cells" (negative).
  std::vector<std::int32_t> split(std::int64_t layer_budget, std::int32_t floor_cells = 1) const {
    policy::baselines::head_budget_allocator allocator;
    allocator.floor_cells = floor_cells;
    return allocator.allocate_weighted(
        layer_budget, policy::baselines::attention_perplexity_weights(mean_entropy(), exponent_));
  }

  /// split() once every head has observed a step; before that the same allocation with equal
  /// weights (equal shares, the remainder to the lowest heads). What a compression uses.
  /// @throws audiokv::error naming "total_budget" or "floor_cells" as split() does.
  std::vector<std::int32_t> shares(std::int64_t layer_budget, std::int32_t floor_cells = 1) const {
    if (all_observed()) return split(layer_budget, floor_cells);
    policy::baselines::head_budget_allocator allocator;
    allocator.floor_cells = floor_cells;
    return allocator.allocate_weighted(layer_budget, std::vector<double>(steps_.size(), 1.0));
  }

  /// Forgets every observed step (a new sequence).
  void reset() noexcept {
    for (double& sum : entropy_sum_) sum = 0.0;
    for (std::int32_t& n : steps_) n = 0;
  }

 private:
  void check_head(const char* where, std::int32_t head) const {
    AUDIOKV_REQUIRE(head >= 0 && head < num_heads(), where, "head", head,
                    "must be in [0, num_heads())");
  }

  double exponent_;
  std::vector<double> entropy_sum_;  // [heads] sum of per-step entropies, nats
  std::vector<std::int32_t> steps_;  // [heads] steps observed
};

}  // namespace audiokv::pool

namespace audiokv {
using pool::entropy_head_budgets;
}  // namespace audiokv
