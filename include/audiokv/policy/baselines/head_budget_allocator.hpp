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
///   weight_h = critical_h ? critical_weight : 1
///   budget_h = floor_cells + share_h,  share_h = largest-remainder rounding of
///              (total - H * floor_cells) * weight_h / sum(weight)
///
/// Largest remainder (Hamilton) keeps the total exact; remainders that tie go to critical
/// heads first, then to the lower head index. Deterministic, no floating drift in the total.
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
    const auto heads = static_cast<std::int64_t>(critical.size());
    AUDIOKV_REQUIRE(heads >= 1, where, "critical.size()", heads, "must be >= 1 (one per KV head)");
    AUDIOKV_REQUIRE(std::isfinite(critical_weight) && critical_weight > 0.0, where,
                    "critical_weight", critical_weight, "must be finite and > 0");
    AUDIOKV_REQUIRE(floor_cells >= 0, where, "floor_cells", floor_cells, "must be >= 0");
    AUDIOKV_REQUIRE(total_budget >= heads * floor_cells && total_budget <= INT32_MAX * heads, where,
                    "total_budget", total_budget,
                    "must be >= num_heads * floor_cells (and fit int32 per head)");
    double weight_sum = 0.0;
    for (const std::uint8_t c : critical) weight_sum += c ? critical_weight : 1.0;
    const std::int64_t spare = total_budget - heads * floor_cells;
    std::vector<std::int32_t> budget(heads);
    std::vector<double> remainder(heads);
    std::int64_t given = 0;
    for (std::int64_t h = 0; h < heads; ++h) {
      const double exact =
          static_cast<double>(spare) * (critical[h] ? critical_weight : 1.0) / weight_sum;
      const auto whole = static_cast<std::int64_t>(std::floor(exact));
      budget[h] = static_cast<std::int32_t>(floor_cells + whole);
      remainder[h] = exact - static_cast<double>(whole);
      given += whole;
    }
    std::vector<std::int64_t> order(heads);
    for (std::int64_t h = 0; h < heads; ++h) order[h] = h;
    std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
      if (remainder[a] != remainder[b]) return remainder[a] > remainder[b];
      if (critical[a] != critical[b]) return critical[a] > critical[b];
      return a < b;
    });
    // floor() of each share can undershoot by < 1 per head, so 0 <= left < heads.
    std::int64_t left = spare - given;
    for (std::int64_t i = 0; left > 0; i = (i + 1) % heads, --left) ++budget[order[i]];
    for (std::int64_t i = 0; left < 0; i = (i + 1) % heads, ++left) --budget[order[heads - 1 - i]];
    return budget;
  }
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::head_budget_allocator;
}  // namespace audiokv
