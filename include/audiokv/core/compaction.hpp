// SPDX-License-Identifier: Apache-2.0
/// @file
/// Compaction: stable compaction targets. Cell i keeps time order: its new slot is the number of
/// kept cells before it, an exclusive prefix sum of the keep mask. New slot <= old slot, so a
/// forward in-place pass never overwrites a row it still has to read.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "row_copy.hpp"

namespace audiokv::core {

/// move_to value for a cell that the plan drops.
inline constexpr std::int32_t evicted_slot = -1;

/// New slot of cell i: the exclusive prefix sum of kept cells, or evicted_slot.
AUDIOKV_HOST_DEVICE std::int32_t compaction_target(bool kept, std::int32_t kept_before) {
  return kept ? kept_before : evicted_slot;
}

/// Copies one row of `bytes` bytes from slot `from` to slot `to` (row_stride bytes apart) by
/// the row copy (core/row_copy.hpp), one thread. A no-op when the slots are equal; otherwise
/// the rows do not overlap (bytes <= row_stride), or to < from.
AUDIOKV_HOST_DEVICE void move_row(unsigned char* base, std::int64_t row_stride, std::int64_t bytes,
                                  std::int32_t from, std::int32_t to) {
  if (from == to) return;
  copy_row(base + static_cast<std::int64_t>(to) * row_stride,
           base + static_cast<std::int64_t>(from) * row_stride, bytes);
}

}  // namespace audiokv::core
