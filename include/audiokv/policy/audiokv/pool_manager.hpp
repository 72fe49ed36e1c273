// SPDX-License-Identifier: Apache-2.0
/// @file
/// The AudioKV policy's tiers: which pool a new cell enters, the nominal pool sizes and the
/// trigger, emergency-pool overflow, and promotion of buffer cells into the base pool.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../types/frame.hpp"
#include "../../types/pool_split.hpp"
#include "../audiokv_config.hpp"
#include "../detail/cell_store.hpp"
#include "../detail/radix_select.hpp"
#include "protection_rules.hpp"

namespace audiokv::policy::detail {

/// Gathers the slots j in [0, n) with pred(j) into `order` (ascending); returns their count.
/// Without a branch on pred (tiers and levels interleave unpredictably): every slot is written
/// at order[count], which is at most j, and kept by advancing count.
template <class Pred>
std::int32_t gather_slots(std::int32_t n, std::int32_t* order, Pred pred) {
  std::int32_t count = 0;
  for (std::int32_t j = 0; j < n; ++j) {
    order[count] = j;
    count += pred(j) ? 1 : 0;
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
    const std::int32_t emergency = gather_slots(
        store.size(), order, [&](std::int32_t j) { return tier_after[j] == pool_tier::emergency; });
    std::int32_t overflow = emergency - emergency_cells_;
    for (std::int32_t i = 0; i < emergency && overflow > 0 && (use_ratio || needed > 0); ++i) {
      const std::int32_t j = order[i];
      if ((store.flags_of(j) & frame_flag_sink) || protection[j] == protect_always) continue;
      mask[j] = 1;
      --overflow;
      --needed;
    }
  }

  /// Promotions on tier_after: buffer cells that are not always-protected ("ready"), best
  /// first, fill the base pool's room, then replace base cells that score lower (those return
  /// to the buffer), pair by pair (k-th best incoming against k-th weakest base cell) until an
  /// incoming cell no longer beats its partner.
  ///
  /// Because both lists are sorted, the cells that end in the base pool are exactly the best
  /// T = base + clamp(room, 0, ready) of ready and base together (by (score, position), the
  /// order of core/selection.hpp): every kept base cell beats every rejected incoming one where
  /// the pairing stopped, and every promoted one beat the base cell it replaced. So one radix
  /// select of the lowest |ready + base| - T cells computes it in linear time, without sorting.
  /// `order`: [n] scratch; `key_bits`: [n] scratch; `mask`: the evict mask, neither read nor
  /// written (the tiers are written from the radix select's cut directly).
  void plan_promotions(const cell_store& store, const float* final_scores,
                       const std::uint8_t* protection, pool_tier* tier_after, std::int32_t* order,
                       std::uint32_t* key_bits, [[maybe_unused]] std::uint8_t* mask) const {
    // The contenders (ready or base cells), ascending, with their keys and the keys' range,
    // gathered in one pass without a branch (every slot is written at the count).
    std::int32_t ready = 0, base = 0, contenders = 0;
    std::uint32_t lowest = 0xFFFFFFFFu, highest = 0u;
    const std::int32_t n = store.size();
    for (std::int32_t j = 0; j < n; ++j) {
      const bool is_ready =
          (tier_after[j] == pool_tier::buffer) & (protection[j] != protect_always);
      const bool is_base = tier_after[j] == pool_tier::base;
      const bool contends = is_ready | is_base;
      const std::uint32_t key = core::ordered_score_bits(final_scores[j]);
      order[contenders] = j;
      key_bits[contenders] = key;
      lowest = contends & (key < lowest) ? key : lowest;
      highest = contends & (key > highest) ? key : highest;
      ready += is_ready;
      base += is_base;
      contenders += contends;
    }
    const std::int32_t room = std::max(0, std::min(base_cells_ - base, ready));
    const std::int32_t rejected = contenders - (base + room);
    if (rejected <= 0) {
      for (std::int32_t i = 0; i < contenders; ++i) tier_after[order[i]] = pool_tier::base;
      return;
    }
    // The rejected contenders (the lowest by (score, position)) return to or stay in the
    // buffer pool, the others end in the base pool: one pass without a branch.
    const radix_cut cut = radix_threshold_of_keys(key_bits, contenders, rejected, lowest, highest);
    std::int32_t ties = cut.ties;
    for (std::int32_t i = 0; i < contenders; ++i) {
      const bool tie = key_bits[i] == cut.threshold;
      const bool out = (key_bits[i] < cut.threshold) | (tie & (ties > 0));
      ties -= static_cast<std::int32_t>(tie);
      tier_after[order[i]] = out ? pool_tier::buffer : pool_tier::base;
    }
  }

 private:
  std::int32_t base_cells_ = 0;
  std::int32_t emergency_cells_ = 0;
  std::int32_t trigger_cells_ = 0;
};

}  // namespace audiokv::policy::detail
