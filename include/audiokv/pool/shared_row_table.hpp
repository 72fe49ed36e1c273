// SPDX-License-Identifier: Apache-2.0
/// @file
/// Shared rows and int8 rows: the slot table between logical cells (what a policy ranks, in time
/// order) and the physical K/V rows behind them, kept in two arenas: full precision and int8.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "../core/compaction.hpp"
#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../types/move_map.hpp"
#include "../types/pool_split.hpp"
#include "../types/row_transition.hpp"

namespace audiokv::pool {

/// @brief Logical cell -> physical row map with per-row multiplicity.
///
/// A row may stand for several cells (shared rows: a run of repeated frames); its multiplicity is
/// the number of cells that reference it. With an int8 arena, a row is int8 while every cell behind
/// it is in the buffer pool and full precision as soon as one is in the base or emergency pool.
/// Invariants: every cell references a live row; every live row has multiplicity >= 1 and equals
/// the number of cells referencing it; rows are dense in [0, num_rows(p)) of each arena. Metadata
/// only: the K/V bytes live wherever the engine keeps them (cpu::head_kv_store is the reference
/// store). Never allocates after construction.
class shared_row_table {
 public:
  /// @param cell_capacity  logical cells (the policy's capacity)
  /// @param full_rows      rows of the full-precision arena
  /// @param int8_rows      rows of the int8 arena; 0 disables int8 rows (every row stays full)
  shared_row_table(std::int32_t cell_capacity, std::int32_t full_rows, std::int32_t int8_rows)
      : cell_capacity_(cell_capacity),
        full_capacity_(full_rows),
        int8_capacity_(int8_rows),
        int8_arena_(int8_rows > 0) {
    constexpr const char* where = "shared_row_table";
    AUDIOKV_REQUIRE(cell_capacity >= 1, where, "cell_capacity", cell_capacity, "must be >= 1");
    AUDIOKV_REQUIRE(full_rows >= 1, where, "full_rows", full_rows, "must be >= 1");
    AUDIOKV_REQUIRE(int8_rows >= 0, where, "int8_rows", int8_rows, "must be >= 0");
    cell_ref_.resize(cell_capacity);
    multiplicity_[0].resize(full_rows);
    multiplicity_[1].resize(int8_rows);
    row_to_[0].resize(full_rows);
    row_to_[1].resize(int8_rows);
    kept_cells_[0].resize(full_rows);
    kept_cells_[1].resize(int8_rows);
    wants_full_[0].resize(full_rows);
    wants_full_[1].resize(int8_rows);
  }

  /// An independent table with the same cells and rows.
  shared_row_table(const shared_row_table&) = default;
  /// Copy assignment: see the copy constructor.
  shared_row_table& operator=(const shared_row_table&) = default;
  /// Takes every cell and row; `other` is left an empty table of capacity 0 in both arenas
  /// (it keeps whether it has an int8 arena; its generation advances, so transitions planned
  /// before are stale), which reserve() makes usable again.
  shared_row_table(shared_row_table&& other) noexcept
      : cell_capacity_(std::exchange(other.cell_capacity_, 0)),
        full_capacity_(std::exchange(other.full_capacity_, 0)),
        int8_capacity_(std::exchange(other.int8_capacity_, 0)),
        int8_arena_(other.int8_arena_),
        cell_ref_(std::move(other.cell_ref_)),
        multiplicity_{std::move(other.multiplicity_[0]), std::move(other.multiplicity_[1])},
        row_to_{std::move(other.row_to_[0]), std::move(other.row_to_[1])},
        kept_cells_{std::move(other.kept_cells_[0]), std::move(other.kept_cells_[1])},
        wants_full_{std::move(other.wants_full_[0]), std::move(other.wants_full_[1])},
        num_rows_{std::exchange(other.num_rows_[0], 0), std::exchange(other.num_rows_[1], 0)},
        num_cells_(std::exchange(other.num_cells_, 0)),
        generation_(other.generation_++) {}
  /// Move assignment, with the moved-from state of the move constructor.
  shared_row_table& operator=(shared_row_table&& other) noexcept {
    if (this != &other) {
      cell_capacity_ = std::exchange(other.cell_capacity_, 0);
      full_capacity_ = std::exchange(other.full_capacity_, 0);
      int8_capacity_ = std::exchange(other.int8_capacity_, 0);
      int8_arena_ = other.int8_arena_;
      cell_ref_ = std::move(other.cell_ref_);
      for (int a = 0; a < 2; ++a) {
        multiplicity_[a] = std::move(other.multiplicity_[a]);
        row_to_[a] = std::move(other.row_to_[a]);
        kept_cells_[a] = std::move(other.kept_cells_[a]);
        wants_full_[a] = std::move(other.wants_full_[a]);
        num_rows_[a] = std::exchange(other.num_rows_[a], 0);
      }
      num_cells_ = std::exchange(other.num_cells_, 0);
      generation_ = other.generation_++;
    }
    return *this;
  }
  ~shared_row_table() = default;

  /// Prefetch: grows the table to at least the given capacities, preserving every cell and row
  /// (smaller requests leave a capacity as it is). Allocates: call it between decode steps.
  /// An int8 arena cannot be added to a table made without one.
  /// @throws audiokv::error on a negative capacity or int8_rows > 0 without an int8 arena.
  void reserve(std::int32_t cell_capacity, std::int32_t full_rows, std::int32_t int8_rows) {
    constexpr const char* where = "shared_row_table::reserve";
    AUDIOKV_REQUIRE(cell_capacity >= 0, where, "cell_capacity", cell_capacity, "must be >= 0");
    AUDIOKV_REQUIRE(full_rows >= 0, where, "full_rows", full_rows, "must be >= 0");
    AUDIOKV_REQUIRE(int8_rows == 0 || int8_arena_, where, "int8_rows", int8_rows,
                    "this table has no int8 arena");
    const std::int32_t cells = cell_capacity > cell_capacity_ ? cell_capacity : cell_capacity_;
    const std::int32_t rows[2] = {full_rows > full_capacity_ ? full_rows : full_capacity_,
                                  int8_rows > int8_capacity_ ? int8_rows : int8_capacity_};
    cell_ref_.resize(cells);
    for (int a = 0; a < 2; ++a) {
      multiplicity_[a].resize(rows[a]);
      row_to_[a].resize(rows[a]);
      kept_cells_[a].resize(rows[a]);
      wants_full_[a].resize(rows[a]);
    }
    // Last, so a std::bad_alloc above leaves the capacities (the observable state) unchanged.
    cell_capacity_ = cells;
    full_capacity_ = rows[0];
    int8_capacity_ = rows[1];
  }

  /// Logical cells mapped to rows.
  std::int32_t num_cells() const noexcept { return num_cells_; }
  /// Cells the table holds without allocating.
  std::int32_t cell_capacity() const noexcept { return cell_capacity_; }
  /// Rows in use in the arena of precision `p`.
  std::int32_t num_rows(row_precision p) const noexcept { return num_rows_[arena(p)]; }
  /// Rows the arena of precision `p` holds without allocating.
  std::int32_t row_capacity(row_precision p) const noexcept {
    return p == row_precision::full ? full_capacity_ : int8_capacity_;
  }
  /// True when the table was configured with an int8 arena.
  bool has_int8_arena() const noexcept { return int8_arena_; }
  /// Changes on every mutation; a transition made for another generation is rejected.
  std::uint64_t generation() const noexcept { return generation_; }

  /// [num_cells()] the row behind each cell.
  const row_ref* cell_rows() const noexcept { return cell_ref_.data(); }
  /// [num_rows(p)] cells behind each row of arena p.
  const std::int32_t* multiplicity(row_precision p) const noexcept {
    return multiplicity_[arena(p)].data();
  }

  /// Appends a cell backed by a new row at the end of arena `p`; returns that row.
  row_ref append_row(row_precision p) {
    constexpr const char* where = "shared_row_table::append_row";
    require_room(where);
    AUDIOKV_REQUIRE(num_rows_[arena(p)] < row_capacity(p), where, "precision", static_cast<int>(p),
                    "that arena is full");
    const row_ref ref{num_rows_[arena(p)]++, p};
    multiplicity_[arena(p)][ref.row] = 1;
    cell_ref_[num_cells_++] = ref;
    ++generation_;
    return ref;
  }

  /// Appends a cell that shares the newest cell's row; returns that row.
  row_ref append_shared() {
    constexpr const char* where = "shared_row_table::append_shared";
    AUDIOKV_REQUIRE(num_cells_ > 0, where, "num_cells()", num_cells_,
                    "there is no previous cell to share a row with");
    require_room(where);
    const row_ref ref = cell_ref_[num_cells_ - 1];
    ++multiplicity_[arena(ref.precision)][ref.row];
    cell_ref_[num_cells_++] = ref;
    ++generation_;
    return ref;
  }

  /// @brief The row transition of a cell plan.
  /// @param move_to     [n_kv_before] the cell plan's stable move map (-1 = evicted)
  /// @param tiers_after [n_kv_after] pool of each kept cell after the plan, in new slots; null
  ///                    keeps every row's precision
  /// @throws audiokv::error on a malformed move map or when an arena would overflow.
  void plan(const std::int32_t* move_to, std::int32_t n_kv_before, const pool_tier* tiers_after,
            row_transition& out) const {
    constexpr const char* where = "shared_row_table::plan";
    validate_move_map(where, move_to, n_kv_before);
    count_kept(move_to, tiers_after);
    out.demote_rows.clear();
    out.promote_rows.clear();
    out.full_move.resize(num_rows_[0]);
    out.full_before = num_rows_[0];
    out.int8_before = num_rows_[1];
    const std::int32_t full_kept =
        plan_arena(row_precision::full, tiers_after, out.full_move.data(), out.demote_rows);
    const auto staged = static_cast<std::int32_t>(out.demote_rows.size());
    if (num_rows_[1] + staged > int8_capacity_) {
      ::audiokv::detail::throw_invalid_part(
          where, "tiers_after",
          ::audiokv::detail::describe("its ", staged,
                                      " demotions to the buffer pool overflow the int8 arena (",
                                      num_rows_[1], " of ", int8_capacity_, " rows used)"));
    }
    out.int8_move.resize(num_rows_[1] + staged);
    std::int32_t int8_kept =
        plan_arena(row_precision::int8, tiers_after, out.int8_move.data(), out.promote_rows);
    for (std::int32_t k = 0; k < staged; ++k) out.int8_move[num_rows_[1] + k] = int8_kept++;
    out.full_kept = full_kept;
    out.full_after = full_kept + static_cast<std::int32_t>(out.promote_rows.size());
    out.int8_after = int8_kept;
    if (out.full_after > full_capacity_) {
      ::audiokv::detail::throw_invalid_part(
          where, "tiers_after",
          ::audiokv::detail::describe(
              "it leaves ", out.full_after, " full-precision rows, more than the full arena's ",
              full_capacity_, " (size it for the base and emergency pools)"));
    }
    out.generation = generation_;
  }

  /// Commits a transition made by plan() for the same `move_to`, after the K/V rows moved.
  void apply(const std::int32_t* move_to, std::int32_t n_kv_before, const row_transition& t) {
    constexpr const char* where = "shared_row_table::apply";
    AUDIOKV_REQUIRE(t.generation == generation_ && t.full_before == num_rows_[0] &&
                        t.int8_before == num_rows_[1],
                    where, "transition.generation", t.generation,
                    "stale transition: it was made for another state of this table");
    validate_move_map(where, move_to, n_kv_before);
    map_rows(t);
    std::int32_t kept = 0;
    for (std::int32_t i = 0; i < n_kv_before; ++i) {
      if (move_to[i] == core::evicted_slot) continue;
      const row_ref old = cell_ref_[i];
      cell_ref_[move_to[i]] = row_to_[arena(old.precision)][old.row];
      ++kept;
    }
    num_cells_ = kept;
    num_rows_[0] = t.full_after;
    num_rows_[1] = t.int8_after;
    for (int a = 0; a < 2; ++a) {
      for (std::int32_t r = 0; r < num_rows_[a]; ++r) multiplicity_[a][r] = 0;
    }
    for (std::int32_t c = 0; c < num_cells_; ++c) {
      ++multiplicity_[arena(cell_ref_[c].precision)][cell_ref_[c].row];
    }
    ++generation_;
  }

 private:
  static int arena(row_precision p) noexcept { return p == row_precision::full ? 0 : 1; }

  /// Throws naming "num_cells()" unless one more cell fits.
  void require_room(const char* where) const {
    AUDIOKV_REQUIRE(num_cells_ < cell_capacity_, where, "num_cells()", num_cells_,
                    cell_capacity_ == 0 ? "the table has no cell slots (moved from: reserve() them)"
                                        : "the table is full (apply an eviction first)");
  }

  void validate_move_map(const char* where, const std::int32_t* move_to,
                         std::int32_t n_kv_before) const {
    AUDIOKV_REQUIRE(n_kv_before == num_cells_, where, "n_kv_before", n_kv_before,
                    "must equal num_cells()");
    AUDIOKV_REQUIRE(n_kv_before == 0 || move_to != nullptr, where, "move_to", "nullptr",
                    "must point to n_kv_before slots");
    types::detail::require_stable_move_map(where, "move_to", move_to, n_kv_before);
  }

  /// Scratch: kept_cells_[a][r] = kept cells behind row r of arena a; wants_full_ = one of
  /// them is outside the buffer pool after the plan.
  void count_kept(const std::int32_t* move_to, const pool_tier* tiers_after) const {
    for (int a = 0; a < 2; ++a) {
      for (std::int32_t r = 0; r < num_rows_[a]; ++r) {
        kept_cells_[a][r] = 0;
        wants_full_[a][r] = 0;
      }
    }
    for (std::int32_t i = 0; i < num_cells_; ++i) {
      if (move_to[i] == core::evicted_slot) continue;
      const row_ref ref = cell_ref_[i];
      ++kept_cells_[arena(ref.precision)][ref.row];
      if (tiers_after != nullptr && tiers_after[move_to[i]] != pool_tier::buffer) {
        wants_full_[arena(ref.precision)][ref.row] = 1;
      }
    }
  }

  /// Stable move map of the rows that stay in arena `p` (kept rows leaving it are appended to
  /// `leaving`); returns how many stay.
  std::int32_t plan_arena(row_precision p, const pool_tier* tiers_after, std::int32_t* move,
                          std::vector<std::int32_t>& leaving) const {
    std::int32_t stay = 0;
    for (std::int32_t r = 0; r < num_rows_[arena(p)]; ++r) {
      const bool kept = kept_cells_[arena(p)][r] > 0;
      const bool stays = kept && target(p, r, tiers_after) == p;
      move[r] = core::compaction_target(stays, stay);
      stay += stays;
      if (kept && !stays) leaving.push_back(r);
    }
    return stay;
  }

  /// Precision of a kept row after the plan.
  row_precision target(row_precision now, std::int32_t row, const pool_tier* tiers_after) const {
    if (!int8_arena_) return row_precision::full;
    if (tiers_after == nullptr) return now;
    return wants_full_[arena(now)][row] ? row_precision::full : row_precision::int8;
  }

  /// row_to_[a][r]: where old row r of arena a lives after the transition (row -1: dropped).
  void map_rows(const row_transition& t) {
    for (std::int32_t r = 0; r < t.full_before; ++r) {
      row_to_[0][r] = {t.full_move[r], row_precision::full};
    }
    for (std::int32_t r = 0; r < t.int8_before; ++r) {
      row_to_[1][r] = {t.int8_move[r], row_precision::int8};
    }
    const auto demoted = static_cast<std::int32_t>(t.demote_rows.size());
    for (std::int32_t k = 0; k < demoted; ++k) {
      row_to_[0][t.demote_rows[k]] = {t.int8_move[t.int8_before + k], row_precision::int8};
    }
    const auto promoted = static_cast<std::int32_t>(t.promote_rows.size());
    for (std::int32_t k = 0; k < promoted; ++k) {
      row_to_[1][t.promote_rows[k]] = {t.full_kept + k, row_precision::full};
    }
  }

  std::int32_t cell_capacity_;
  std::int32_t full_capacity_;
  std::int32_t int8_capacity_;
  bool int8_arena_;                // made with an int8 arena (kept when moved from, at capacity 0)
  std::vector<row_ref> cell_ref_;  // [cell_capacity]
  std::vector<std::int32_t> multiplicity_[2];        // [arena rows]
  std::vector<row_ref> row_to_[2];                   // [arena rows] scratch of apply()
  mutable std::vector<std::int32_t> kept_cells_[2];  // [arena rows] scratch
  mutable std::vector<std::uint8_t> wants_full_[2];  // [arena rows] scratch
  std::int32_t num_rows_[2] = {0, 0};
  std::int32_t num_cells_ = 0;
  std::uint64_t generation_ = 1;
};

}  // namespace audiokv::pool

namespace audiokv {
using pool::shared_row_table;
}  // namespace audiokv
