// SPDX-License-Identifier: Apache-2.0
/// @file
/// The AudioKV policy's tiers: which pool a new cell enters, the nominal pool sizes and the
/// trigger, emergency-pool overflow, and promotion of buffer cells into the base pool.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../core/selection.hpp"
#include "../../types/frame.hpp"
#include "../../types/pool_split.hpp"
#include "../audiokv_config.hpp"
#include "../detail/cell_store.hpp"
#include "protection_rules.hpp"

namespace audiokv::detail {

/// Gathers the slots j in [0, n) with pred(j) into `order` (ascending); returns their count.
template <class Pred>
std::int32_t gather_slots(std::int32_t n, std::int32_t* order, Pred pred) {
  std::int32_t count = 0;
  for (std::int32_t j = 0; j < n; ++j) {
    if (pred(j)) order[count++] = j;
  }
  return count;
}

/// @brief Pool sizes from the split and the tier transitions a plan makes.
class pool_manager {
 public:
  pool_manager() = default;
  explicit pool_manager(const audiokv_config& config)
      : base_cells_(config.split.base_cells(config.budget)),
        emergency_cells_(config.split.emergency_cells(config.budget)),
        trigger_cells_(config.trigger_cells()) {}

  /// The pool a new frame enters: emergency when it carries one of emergency_flags (segment
  /// start, critical, sink), else the buffer pool.
  static pool_tier entry_tier(const frame_meta& frame) noexcept {
    return (frame.flags & emergency_flags) ? pool_tier::emergency : pool_tier::buffer;
  }

  std::int32_t base_cells() const noexcept { return base_cells_; }
  std::int32_t emergency_cells() const noexcept { return emergency_cells_; }
  std::int32_t trigger_cells() const noexcept { return trigger_cells_; }

  /// Cells of `store` currently in `tier`.
  static std::int32_t count(const cell_store& store, pool_tier tier) noexcept {
    std::int32_t total = 0;
    for (std::int32_t j = 0; j < store.size(); ++j) total += store.tier()[j] == tier;
    return total;
  }

  /// Marks the emergency pool's overflow, oldest first and skipping sinks and always-protected
  /// cells, in `mask`; an explicit target (use_ratio false) stops once `needed` reaches 0.
  /// `order`: [n] scratch. Decrements `needed` per marked cell.
  void mark_emergency_overflow(const cell_store& store, const pool_tier* tier_after,
                               const std::uint8_t* protection, bool use_ratio, std::int32_t* order,
                               std::uint8_t* mask, std::int32_t& needed) const noexcept {
    const std::uint8_t* flags = store.flags();
    const std::int32_t emergency = gather_slots(
        store.size(), order, [&](std::int32_t j) { return tier_after[j] == pool_tier::emergency; });
    std::int32_t overflow = emergency - emergency_cells_;
    for (std::int32_t i = 0; i < emergency && overflow > 0 && (use_ratio || needed > 0); ++i) {
      const std::int32_t j = order[i];
      if ((flags[j] & frame_flag_sink) || protection[j] == protect_always) continue;
      mask[j] = 1;
      --overflow;
      --needed;
    }
  }

  /// Promotions on tier_after: buffer cells that are not always-protected, best first, fill the
  /// base pool's room, then replace base cells that score lower (those return to the buffer).
  /// `order`, `order_b`: [n] scratch.
  void plan_promotions(const cell_store& store, const float* final_scores,
                       const std::uint8_t* protection, pool_tier* tier_after, std::int32_t* order,
                       std::int32_t* order_b) const {
    const std::int32_t n = store.size();
    const std::int32_t* pos = store.pos();
    const std::int32_t ready = gather_slots(n, order, [&](std::int32_t j) {
      return tier_after[j] == pool_tier::buffer && protection[j] != protect_always;
    });
    std::sort(order, order + ready, [&](std::int32_t a, std::int32_t b) {
      return core::evicts_before(final_scores[b], pos[b], final_scores[a], pos[a]);
    });
    const std::int32_t base =
        gather_slots(n, order_b, [&](std::int32_t j) { return tier_after[j] == pool_tier::base; });
    std::int32_t next = 0;
    for (std::int32_t room = base_cells_ - base; next < ready && room > 0; ++next, --room) {
      tier_after[order[next]] = pool_tier::base;
    }
    std::sort(order_b, order_b + base, [&](std::int32_t a, std::int32_t b) {
      return core::evicts_before(final_scores[a], pos[a], final_scores[b], pos[b]);
    });
    for (std::int32_t weakest = 0; next < ready && weakest < base; ++next, ++weakest) {
      const std::int32_t incoming = order[next], outgoing = order_b[weakest];
      if (!core::evicts_before(final_scores[outgoing], pos[outgoing], final_scores[incoming],
                               pos[incoming])) {
        break;
      }
      tier_after[incoming] = pool_tier::base;
      tier_after[outgoing] = pool_tier::buffer;
    }
  }

 private:
  std::int32_t base_cells_ = 0;
  std::int32_t emergency_cells_ = 0;
  std::int32_t trigger_cells_ = 0;
};

}  // namespace audiokv::detail
