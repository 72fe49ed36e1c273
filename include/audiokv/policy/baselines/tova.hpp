// SPDX-License-Identifier: Apache-2.0
/// @file
/// TOVA (schwartz-lab-NLP/TOVA src/tova_cache.py, TOVACache.reduce): keep the cells the last
/// query attends to most, averaged over all query heads of the layer.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "baseline_policy.hpp"

namespace audiokv::policy::baselines {

/// @brief Configuration of tova.
struct tova_config {
  /// Budget, capacity and speakers shared by every baseline.
  baseline_config base{};
  /// kvpress TOVAPress variant: the newest cell is always kept (max + 1 pad). The official
  /// code (default) forces nothing, so a new token can be evicted at once.
  bool force_last = false;
};

/// @brief TOVA: the score of a cell is the last observed row, averaged over the rows passed to
/// observe_group (pass ALL query heads of the layer, mode mean). One tova object decides the
/// set of a whole layer; the engine applies its plan to every KV head (the official code
/// gathers every KV head with the same indices). When num_cells > budget, keep the top budget
/// by that row. Cells appended after the last observe() score +inf (kept) until observed.
class tova final : public baseline_policy {
 public:
  /// Validates `config` and allocates every per-cell array for its capacity; nothing allocates
  /// afterwards. Not thread-safe: one thread at a time per object.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit tova(const tova_config& config)
      : baseline_policy("tova", config.base),
        force_last_(config.force_last),
        last_(config.base.reserved_capacity()),
        order_(config.base.reserved_capacity()) {}

  const char* name() const noexcept override { return "tova"; }
  /// [num_cells()] the last observed (head-mean) row.
  const float* last_row() const noexcept { return last_.data(); }

 protected:
  void on_append(std::int32_t first, std::int32_t count) override {
    for (std::int32_t j = first; j < first + count; ++j) {
      last_[j] = std::numeric_limits<float>::infinity();
    }
  }
  void on_observe_rows(const float* attention, std::int32_t rows, gqa_reduce mode) override {
    reduce_rows(attention, rows, mode, last_.data());
  }
  void select_evictions(std::int32_t target, std::uint8_t* mask) const override {
    const std::int32_t n = store().size();
    const std::int32_t candidates = force_last_ && target >= 1 ? n - 1 : n;
    for (std::int32_t j = 0; j < candidates; ++j) order_[j] = j;
    evict_lowest_by_partition(last_.data(), order_.data(), candidates, n - target, mask);
  }
  void on_apply(const eviction_plan& plan) override { policy::detail::compact_array(last_, plan); }

 private:
  bool force_last_;
  std::vector<float> last_;                  // [capacity] last observed row
  mutable std::vector<std::int32_t> order_;  // [capacity] scratch
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::tova;
using policy::baselines::tova_config;
}  // namespace audiokv
