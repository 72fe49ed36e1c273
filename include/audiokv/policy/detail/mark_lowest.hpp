// SPDX-License-Identifier: Apache-2.0
/// @file
/// The baselines' one selection routine: mark the k entries that come first in the eviction
/// order (lowest value, then lowest key) with a partition (std::nth_element). The AudioKV
/// planner selects the same order with a radix select (radix_select.hpp).
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../core/selection.hpp"

namespace audiokv::policy::detail {

/// @brief Marks in `mask` the `count` entries of order[0, size) that come first in the order
/// (value, key) ascending: core::evicts_before_by (NaN lowest) for any value type. Keys are
/// unique, so the marked set is unique. Rearranges `order`; never allocates.
/// @return the number marked: count clamped to [0, size].
template <class Value, class Key>
std::int32_t mark_lowest(const Value* value, const Key* key, std::int32_t* order, std::int32_t size,
                         std::int32_t count, std::uint8_t* mask) {
  count = std::min(count, size);
  if (count <= 0) return 0;
  auto before = [value, key](std::int32_t a, std::int32_t b) {
    return core::evicts_before_by(value[a], key[a], value[b], key[b]);
  };
  if (count < size) std::nth_element(order, order + count - 1, order + size, before);
  for (std::int32_t i = 0; i < count; ++i) mask[order[i]] = 1;
  return count;
}

}  // namespace audiokv::policy::detail
