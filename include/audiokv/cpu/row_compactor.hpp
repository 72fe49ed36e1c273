// SPDX-License-Identifier: Apache-2.0
/// @file
/// Phase 5 of the CPU eviction step (cpu/eviction_step.hpp): one row's compaction after its
/// evictions, by hole filling or stably, with K, V, importance and position moving with their
/// row, and the scratch it needs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../core/compaction.hpp"
#include "../core/hole_filling.hpp"
#include "../types/eviction_step_config.hpp"

namespace audiokv::cpu {

/// @brief Compacts one row of an eviction step (the CPU reference of the device step's
/// compaction kernels): the time-order targets by core::compaction_target, then, by
/// step_compaction::hole_fill, the kept slots at or above the new live count into the holes
/// below it (the r-th such slot into the r-th hole: core::hole_rank, core::mover_rank), or, by
/// step_compaction::stable, every kept row down to its rank. Scratch is sized at construction;
/// compact() never allocates.
class row_compactor {
 public:
  /// Kept cells and row copies of one compact() call.
  struct result {
    std::int32_t kept;   ///< the row's new live count
    std::int32_t moves;  ///< row copies (each one K row and one V row)
  };

  /// No scratch: compacts rows of capacity 0 (a moved-from step).
  row_compactor() = default;
  /// Scratch for rows of `capacity` slots.
  explicit row_compactor(std::int32_t capacity) {
    const auto c = static_cast<std::size_t>(capacity);
    keep_logical_.assign(c, 0);
    keep_physical_.assign(c, 0);
    kept_before_.assign(c + 1, 0);
    move_logical_.assign(c, 0);
    move_physical_.assign(c, 0);
    hole_of_rank_.assign(c, 0);
    new_order_.assign(c, 0);
  }

  /// Frees the scratch (a moved-from step).
  void clear() noexcept {
    keep_logical_.clear();
    keep_physical_.clear();
    kept_before_.clear();
    move_logical_.clear();
    move_physical_.clear();
    hole_of_rank_.clear();
    new_order_.clear();
  }

  /// @brief Compacts a row of `live` cells whose time-order cells evicted[i] != 0 go.
  /// @param importance, position  [capacity] per slot; kept rows' values move with them
  /// @param order   [capacity] slot of the i-th oldest live cell; rewritten for the kept ones
  /// @param src, dst  [capacity] the hole-filling copies src[m] -> dst[m] (hole_fill only)
  /// @param k_row, v_row  the row's K and V bytes (`rb` per slot), or nullptr (not moved)
  /// @param rb      bytes of one K or V row
  result compact(step_compaction mode, std::int32_t live, const std::uint8_t* evicted,
                 float* importance, std::int32_t* position, std::int32_t* order, std::int32_t* src,
                 std::int32_t* dst, unsigned char* k_row, unsigned char* v_row, std::int64_t rb) {
    // Logical (time-order) targets, then the physical moves.
    std::int32_t kept = 0;
    for (std::int32_t i = 0; i < live; ++i) {
      keep_logical_[i] = evicted[i] == 0 ? 1 : 0;
      move_logical_[i] = core::compaction_target(keep_logical_[i] != 0, kept);
      kept += keep_logical_[i];
    }
    const std::int32_t n_after = kept;
    if (mode == step_compaction::stable) {
      // order is the identity: slot i holds the i-th oldest cell; move_to[i] <= i, so a
      // forward pass never overwrites a row it still has to read.
      std::int32_t moved = 0;
      for (std::int32_t i = 0; i < live; ++i) {
        const std::int32_t to = move_logical_[i];
        if (to == core::evicted_slot || to == i) continue;
        if (k_row != nullptr) core::move_row(k_row, rb, rb, i, to);
        if (v_row != nullptr) core::move_row(v_row, rb, rb, i, to);
        importance[to] = importance[i];
        position[to] = position[i];
        ++moved;
      }
      return {n_after, moved};
    }
    for (std::int32_t i = 0; i < live; ++i) keep_physical_[order[i]] = keep_logical_[i];
    kept_before_[0] = 0;
    for (std::int32_t p = 0; p < live; ++p)
      kept_before_[p + 1] = kept_before_[p] + keep_physical_[p];
    const std::int32_t kept_before_end = kept_before_[n_after];
    for (std::int32_t p = 0; p < n_after; ++p) {
      if (keep_physical_[p] == 0) hole_of_rank_[core::hole_rank(p, kept_before_[p])] = p;
    }
    for (std::int32_t p = 0; p < live; ++p) {
      if (keep_physical_[p] == 0) {
        move_physical_[p] = core::evicted_slot;
      } else if (p < n_after) {
        move_physical_[p] = p;
      } else {
        const std::int32_t rank = core::mover_rank(kept_before_[p], kept_before_end);
        move_physical_[p] = hole_of_rank_[rank];
        src[rank] = p;
        dst[rank] = hole_of_rank_[rank];
      }
    }
    const std::int32_t n_moves = n_after - kept_before_end;
    for (std::int32_t m = 0; m < n_moves; ++m) {
      if (k_row != nullptr) core::move_row(k_row, rb, rb, src[m], dst[m]);
      if (v_row != nullptr) core::move_row(v_row, rb, rb, src[m], dst[m]);
      importance[dst[m]] = importance[src[m]];
      position[dst[m]] = position[src[m]];
    }
    for (std::int32_t i = 0; i < live; ++i) {
      if (move_logical_[i] != core::evicted_slot)
        new_order_[move_logical_[i]] = move_physical_[order[i]];
    }
    std::copy(new_order_.begin(), new_order_.begin() + n_after, order);
    return {n_after, n_moves};
  }

 private:
  std::vector<std::int32_t> keep_logical_, keep_physical_, kept_before_;
  std::vector<std::int32_t> move_logical_, move_physical_, hole_of_rank_, new_order_;
};

}  // namespace audiokv::cpu
