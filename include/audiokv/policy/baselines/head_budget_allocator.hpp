// SPDX-License-Identifier: Apache-2.0
/// @file
/// Split one layer's cell budget across its KV heads, favouring audio-critical heads (the
/// published AudioKV's head-level budgeting, with an offline head profile).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../../error.hpp"

namespace audiokv::policy::baselines {

/// @brief Per-head budgets that sum exactly to a layer total.
///
///   budget_h = floor_cells + share_h,  share_h = largest-remainder rounding of
///              (total - H * floor_cells) * weight_h / sum(weight)
///
/// with weight_h = critical_h ? critical_weight : 1 (allocate), or any positive weights
/// (allocate_weighted; attention_perplexity_weights derives them from what each head attends).
/// Largest remainder (Hamilton) keeps the total exact; remainders that tie go to critical heads
/// first (allocate) or to the larger weight (allocate_weighted), then to the lower head index.
/// Deterministic, no floating drift in the total.
struct head_budget_allocator {
  /// Weight of an audio-critical head relative to a regular one (>= 1 favours them).
  double critical_weight = 2.0;
  /// Minimum cells of every head (the AdaKV-style safeguard).
  std::int32_t floor_cells = 0;

  /// @param total_budget cells of the whole layer, >= num_heads * floor_cells.
  /// @param critical     [num_heads] 1 marks an audio-critical head.
  /// @return [num_heads] budgets summing to total_budget, each >= floor_cells.
  std::vector<std::int32_t> allocate(std::int64_t total_budget,
                                     const std::vector<std::uint8_t>& critical) const {
    constexpr const char* where = "head_budget_allocator::allocate";
    AUDIOKV_REQUIRE(std::isfinite(critical_weight) && critical_weight > 0.0, where,
                    "critical_weight", critical_weight, "must be finite and > 0");
    std::vector<double> weight(critical.size());
    for (std::size_t h = 0; h < critical.size(); ++h)
      weight[h] = critical[h] ? critical_weight : 1.0;
    return distribute(where, "critical.size()", total_budget, weight, critical);
  }

  /// @param total_budget cells of the whole layer, >= num_heads * floor_cells.
  /// @param weight       [num_heads] finite weights > 0.
  /// @return [num_heads] budgets summing to total_budget, each >= floor_cells.
  std::vector<std::int32_t> allocate_weighted(std::int64_t total_budget,
                                              const std::vector<double>& weight) const {
    constexpr const char* where = "head_budget_allocator::allocate_weighted";
    for (const double w : weight) {
      AUDIOKV_REQUIRE(std::isfinite(w) && w > 0.0, where, "weight", w, "must be finite and > 0");
    }
    return distribute(where, "weight.size()", total_budget, weight, {});
  }

 private:
  /// The rounding above; `critical` (empty: none) breaks ties before the weights do.
  std::vector<std::int32_t> distribute(const char* where, const char* heads_name,
                                       std::int64_t total_budget, const std::vector<double>& weight,
                                       const std::vector<std::uint8_t>& critical) const {
    const auto heads = static_cast<std::int64_t>(weight.size());
    AUDIOKV_REQUIRE(heads >= 1, where, heads_name, heads, "must be >= 1 (one per KV head)");
    AUDIOKV_REQUIRE(floor_cells >= 0, where, "floor_cells", floor_cells, "must be >= 0");
    AUDIOKV_REQUIRE(total_budget >= heads * floor_cells && total_budget <= INT32_MAX * heads, where,
                    "total_budget", total_budget,
                    "must be >= num_heads * floor_cells (and fit int32 per head)");
    double weight_sum = 0.0;
    for (const double w : weight) weight_sum += w;
    const std::int64_t spare = total_budget - heads * floor_cells;
    std::vector<std::int32_t> budget(heads);
    std::vector<double> remainder(heads);
    std::int64_t given = 0;
    for (std::int64_t h = 0; h < heads; ++h) {
      const double exact = static_cast<double>(spare) * weight[h] / weight_sum;
      const auto whole = static_cast<std::int64_t>(std::floor(exact));
      budget[h] = static_cast<std::int32_t>(floor_cells + whole);
      remainder[h] = exact - static_cast<double>(whole);
      given += whole;
    }
    std::vector<std::int64_t> order(heads);
    for (std::int64_t h = 0; h < heads; ++h) order[h] = h;
    std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
      if (remainder[a] != remainder[b]) return remainder[a] > remainder[b];
      if (!critical.empty() && critical[a] != critical[b]) return critical[a] > critical[b];
      if (weight[a] != weight[b]) return weight[a] > weight[b];
      return a < b;
    });
    // floor() of each share can undershoot by < 1 per head, so 0 <= left < heads.
    std::int64_t left = spare - given;
    for (std::int64_t i = 0; left > 0; i = (i + 1) % heads, --left) ++budget[order[i]];
    for (std::int64_t i = 0; left < 0; i = (i + 1) % heads, ++left) --budget[order[heads - 1 - i]];
    return budget;
  }
};

/// Head weights from what each head attends: weight_h = exp(exponent * H_h) = P_h^exponent,
/// where H_h is head h's mean attention entropy per decode step, in nats, and P_h = exp(H_h) the
/// number of cells it reads at once (its attention perplexity). exponent > 0 favours heads that
/// spread their attention, exponent < 0 heads that read a few cells at a time; 0 gives equal
/// weights.
/// @throws audiokv::error naming "exponent" unless finite, or "mean_entropy" for a value that is
/// not finite or below 0.
inline std::vector<double> attention_perplexity_weights(const std::vector<double>& mean_entropy,
                                                        double exponent) {
  constexpr const char* where = "attention_perplexity_weights";
  AUDIOKV_REQUIRE(std::isfinite(exponent), where, "exponent", exponent, "must be finite");
  std::vector<double> weight(mean_entropy.size());
  // Relative to the head the exponent weights least (weight 1), so that no weight underflows
  // to 0 and the allocator's weights stay > 0.
  double reference = 0.0;
  for (std::size_t h = 0; h < mean_entropy.size(); ++h) {
    AUDIOKV_REQUIRE(std::isfinite(mean_entropy[h]) && mean_entropy[h] >= 0.0, where, "mean_entropy",
                    mean_entropy[h], "must be finite and >= 0 (nats)");
    const double e = mean_entropy[h];
    reference = h == 0 ? e : (exponent >= 0.0 ? std::min(reference, e) : std::max(reference, e));
  }
  for (std::size_t h = 0; h < mean_entropy.size(); ++h)
    weight[h] = std::exp(exponent * (mean_entropy[h] - reference));
  return weight;
}

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::attention_perplexity_weights;
using policy::baselines::head_budget_allocator;
}  // namespace audiokv
