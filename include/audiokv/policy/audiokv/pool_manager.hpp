// SPDX-License-Identifier: Apache-2.0
/// @file
/// The AudioKV policy's tiers: which pool a new cell enters, the nominal pool sizes and the
/// trigger, emergency-pool overflow, and promotion of buffer cells into the base pool.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../../core/selection_key.hpp"
#include "../../detail/describe.hpp"
#include "../../error.hpp"
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

  /// Checks that the sinks among `count` frames (`frames`), added to those `store` holds, fit
  /// in the emergency pool; throws from `where` naming the first frame one too many.
  void require_sinks_fit(const char* where, const cell_store& store, const frame_meta* frames,
                         std::int32_t count) const {
    std::int32_t sinks = 0;
    for (std::int32_t j = 0; j < store.size(); ++j)
      sinks += (store.flags_of(j) & frame_flag_sink) != 0;
    for (std::int32_t i = 0; i < count; ++i) {
      if (frames[i].flags & frame_flag_sink) ++sinks;
      AUDIOKV_REQUIRE(sinks <= emergency_cells_, where,
                      ::audiokv::detail::indexed("frames", i) + ".flags",
                      static_cast<int>(frames[i].flags),
                      "one sink too many: sinks must fit in the emergency pool");
    }
  }

  /// Cells no plan may evict now (tiered_cache::protected_cells()): those `rules` always keep
  /// (recent window, text window, sinks) and the emergency cells beyond the pool's overflow. O(n),
  /// no scratch.
  std::int32_t protected_cells(const cell_store& store,
                               const protection_rules& rules) const noexcept {
    const std::int32_t n = store.size();
    const std::int64_t recent_from = rules.recent_from(store);
    const std::int64_t text_recent_from = rules.text_recent_from(store);
    const std::int32_t* pos = store.pos();
    const pool_tier* tier = store.tier();
    std::int32_t kept = 0, emergency = 0, emergency_evictable = 0;
    for (std::int32_t j = 0; j < n; ++j) {
      const bool always =
          protection_rules::always_kept(pos[j], store.flags_of(j), recent_from, text_recent_from);
      const bool in_emergency = tier[j] == pool_tier::emergency;
      kept += always ? 1 : 0;
      emergency += in_emergency ? 1 : 0;
      emergency_evictable += in_emergency && !always ? 1 : 0;
    }
    const std::int32_t overflow = std::max(0, emergency - emergency_cells_);
    // Kept: the always-protected cells and the emergency cells the overflow does not reach.
    return kept + emergency_evictable - std::min(overflow, emergency_evictable);
  }

  /// True when a plan may evict cell `slot` (< store.size()) only as a last resort: kept
  /// always, in the emergency pool, or a boundary-protected buffer cell.
  static bool last_resort(const cell_store& store, const protection_rules& rules,
                          std::int32_t slot) noexcept {
    const pool_tier tier = store.tier()[slot];
    const protection_level level = rules.level_of(store, slot);
    return level == protect_always || tier == pool_tier::emergency ||
           (level == protect_boundary && tier == pool_tier::buffer);
  }
  std::int32_t trigger_cells() const noexcept { return trigger_cells_; }

  /// Cells of `store` currently in `tier`.
  static std::int32_t count(const cell_store& store, pool_tier tier) noexcept {
    std::int32_t total = 0;
    for (std::int32_t j = 0; j < store.size(); ++j) total += store.tier()[j] == tier;
    return total;
  }

  /// Marks the emergency pool's overflow, oldest first and skipping sinks and always-protected
  /// cells, in `mask`; an explicit target (use_ratio false) stops once `needed` reaches 0.
  /// `order`: unused. Decrements `needed` per marked cell.
  ///
  /// The emergency cells are counted first (a pass that vectorises); the slots are walked only
  /// when the pool overflows, which the count decides.
  void mark_emergency_overflow(const cell_store& store, const pool_tier* tier_after,
                               const std::uint8_t* protection, bool use_ratio,
                               [[maybe_unused]] std::int32_t* order, std::uint8_t* mask,
                               std::int32_t& needed) const noexcept {
    const std::int32_t n = store.size();
    std::int32_t emergency = 0;
    for (std::int32_t j = 0; j < n; ++j) {
      emergency += static_cast<std::int32_t>(tier_after[j] == pool_tier::emergency);
    }
    std::int32_t overflow = emergency - emergency_cells_;
    for (std::int32_t j = 0; j < n && overflow > 0 && (use_ratio || needed > 0); ++j) {
      if (tier_after[j] != pool_tier::emergency) continue;
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
  ///
  /// The select runs over all n slots in place, without gathering the contenders: a cell that
  /// does not contend gets the key highest + 1 (highest: the contenders' highest key, at most
  /// ordered_score_bits(FLT_MAX) < 0xFFFFFFFF), above every contender, so it is never among the
  /// rejected (fewer than the contenders) and never a tie; slots ascend, so the ties at the
  /// threshold are the earliest contenders as in the gathered order. Every pass is over arrays
  /// indexed by slot (no indirection), and all but the select's histograms vectorise.
  /// `order`: unused; `key_bits`: [n] scratch; `mask`: the evict mask, neither read nor
  /// written (the tiers are written from the radix select's cut directly).
  void plan_promotions(const cell_store& store, const float* final_scores,
                       const std::uint8_t* protection, pool_tier* tier_after,
                       [[maybe_unused]] std::int32_t* order, std::uint32_t* key_bits,
                       [[maybe_unused]] std::uint8_t* mask) const {
    // Keys (0xFFFFFFFF where a cell does not contend), their range over the contenders and the
    // pool counts, in one pass without a branch.
    const std::int32_t n = store.size();
    std::int32_t ready = 0, base = 0;
    std::uint32_t lowest = 0xFFFFFFFFu, highest = 0u;
    for (std::int32_t j = 0; j < n; ++j) {
      const auto tier = static_cast<std::uint32_t>(tier_after[j]);
      const std::uint32_t is_ready =
          static_cast<std::uint32_t>(tier == static_cast<std::uint32_t>(pool_tier::buffer)) &
          static_cast<std::uint32_t>(protection[j] != protect_always);
      const auto is_base =
          static_cast<std::uint32_t>(tier == static_cast<std::uint32_t>(pool_tier::base));
      const std::uint32_t contends = 0u - (is_ready | is_base);  // all ones or zero
      const std::uint32_t key = score_key(final_scores[j]);
      const std::uint32_t stored = key | ~contends;
      key_bits[j] = stored;
      lowest = stored < lowest ? stored : lowest;
      const std::uint32_t high = key & contends;
      highest = high > highest ? high : highest;
      ready += static_cast<std::int32_t>(is_ready);
      base += static_cast<std::int32_t>(is_base);
    }
    const std::int32_t contenders = ready + base;
    const std::int32_t room = std::max(0, std::min(base_cells_ - base, ready));
    const std::int32_t rejected = contenders - (base + room);
    if (rejected <= 0) {
      for (std::int32_t j = 0; j < n; ++j) {
        tier_after[j] = key_bits[j] != 0xFFFFFFFFu ? pool_tier::base : tier_after[j];
      }
      return;
    }
    const std::uint32_t outside = highest + 1u;
    for (std::int32_t j = 0; j < n; ++j) {
      key_bits[j] = key_bits[j] > highest ? outside : key_bits[j];
    }
    // The rejected contenders (the lowest by (score, position)) return to or stay in the
    // buffer pool, the others end in the base pool. The first cut.ties keys equal to the
    // threshold are rejected: they end before slot `ties_end`, so each tier is a function of
    // the slot's key and index alone.
    const radix_cut cut = radix_threshold_of_keys(key_bits, n, rejected, lowest, outside);
    const std::uint32_t threshold = cut.threshold;
    std::int32_t ties_end = n;
    if (cut.ties < cut.equal) {
      std::int32_t seen = 0;
      for (ties_end = 0; seen < cut.ties; ++ties_end) {
        seen += static_cast<std::int32_t>(key_bits[ties_end] == threshold);
      }
    }
    for (std::int32_t j = 0; j < n; ++j) {
      const std::uint32_t key = key_bits[j];
      const bool out = (key < threshold) | ((key == threshold) & (j < ties_end));
      const pool_tier in = key <= highest ? pool_tier::base : tier_after[j];
      tier_after[j] = out ? pool_tier::buffer : in;
    }
  }

 private:
  /// core::ordered_score_bits(score) as integer operations on its bits (core::ordered_key_of_bits),
  /// without a branch or a float compare, so the key pass vectorises.
  static std::uint32_t score_key(float score) noexcept {
    std::uint32_t u = 0;
    std::memcpy(&u, &score, sizeof u);
    return core::ordered_key_of_bits(u);
  }

  std::int32_t base_cells_ = 0;
  std::int32_t emergency_cells_ = 0;
  std::int32_t trigger_cells_ = 0;
};

}  // namespace audiokv::policy::detail
