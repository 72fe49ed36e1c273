// SPDX-License-Identifier: Apache-2.0
/// @file
/// Shared rows and int8 rows: how one eviction plan over logical cells changes the physical rows
/// behind them.
#pragma once

#include <cstdint>
#include <vector>

namespace audiokv::types {

/// Storage precision of a physical row.
enum class row_precision : std::uint8_t {
  full = 0,  ///< the engine's K/V precision (float in the CPU store)
  int8 = 1   ///< int8 with one float scale per row
};

/// A physical row: its arena and its index there.
struct row_ref {
  /// Index of the row in its arena.
  std::int32_t row = 0;
  /// The arena: full precision or int8.
  row_precision precision = row_precision::full;
};

/// @brief The physical side of one plan, applied to K and V (and the int8 scales) in four steps
/// that never read a row after it was overwritten:
///  1. quantise the full rows `demote_rows[k]` into int8 rows `int8_before + k` (staging);
///  2. compact the full arena by `full_move` ([full_before]; -1 drops the row);
///  3. dequantise the int8 rows `promote_rows[k]` into full rows `full_kept + k`;
///  4. compact the int8 arena by `int8_move` ([int8_before + demote_rows.size()]).
/// Both move maps are stable (a kept row moves to the number of kept rows before it), so
/// cpu::compact-style forward passes apply them in place.
struct row_transition {
  std::vector<std::int32_t> demote_rows;   ///< full rows leaving for the int8 arena
  std::vector<std::int32_t> full_move;     ///< [full_before]
  std::vector<std::int32_t> promote_rows;  ///< int8 rows leaving for the full arena
  std::vector<std::int32_t> int8_move;     ///< [int8_before + demote_rows.size()]
  /// Full rows before the transition.
  std::int32_t full_before = 0;
  /// int8 rows before the transition (staged rows follow them).
  std::int32_t int8_before = 0;
  std::int32_t full_kept = 0;   ///< full rows kept in place by step 2
  std::int32_t full_after = 0;  ///< full_kept + promote_rows.size()
  /// int8 rows after step 4.
  std::int32_t int8_after = 0;
  /// State of the table the transition was made for; apply() rejects a stale one.
  std::uint64_t generation = 0;

  /// Reserves every array so later transitions never allocate.
  void reserve(std::int32_t full_rows, std::int32_t int8_rows) {
    demote_rows.reserve(full_rows);
    full_move.reserve(full_rows);
    promote_rows.reserve(int8_rows);
    int8_move.reserve(int8_rows);
  }
};

}  // namespace audiokv::types

namespace audiokv {
using types::row_precision;
using types::row_ref;
using types::row_transition;
}  // namespace audiokv
