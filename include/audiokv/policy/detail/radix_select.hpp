// SPDX-License-Identifier: Apache-2.0
/// @file
/// Host selection of the k lowest cells by (score, slot) — the order of core/selection_key.hpp —
/// as a three-digit (11, 11, 10 bit) radix select over ordered score bits: four linear passes,
/// no comparisons, no allocation. Ties at the threshold go to the earliest entries of the input,
/// so an input in ascending slot order reproduces the tie rule exactly.
#pragma once

#include <cstdint>

#include "../../core/selection_key.hpp"

namespace audiokv::detail {

/// @brief Marks in `mask` (indexed by slot) the `k` lowest of the cells `slots[0..n)`, by
/// (score[slot], slot). @pre slots ascend; 0 <= k <= n. Never allocates.
inline void radix_select_lowest(const float* score, const std::int32_t* slots, std::int32_t n,
                                std::int32_t k, std::uint32_t* bits, std::uint8_t* mask) {
  if (k <= 0) return;
  for (std::int32_t i = 0; i < n; ++i) bits[i] = core::ordered_score_bits(score[slots[i]]);
  constexpr int shifts[3] = {21, 10, 0};
  constexpr int widths[3] = {11, 11, 10};
  std::uint32_t prefix = 0, prefix_mask = 0;
  std::int32_t remaining = k;  // how many to take from the bucket chain still open
  for (int digit = 0; digit < 3; ++digit) {
    std::int32_t histogram[1 << 11] = {};
    const std::uint32_t digit_mask = (1u << widths[digit]) - 1u;
    for (std::int32_t i = 0; i < n; ++i) {
      if ((bits[i] & prefix_mask) == prefix) ++histogram[(bits[i] >> shifts[digit]) & digit_mask];
    }
    std::uint32_t bucket = 0;
    for (; histogram[bucket] < remaining; ++bucket) remaining -= histogram[bucket];
    prefix |= bucket << shifts[digit];
    prefix_mask |= digit_mask << shifts[digit];
  }
  // Every cell below the threshold goes; `remaining` cells equal to it go, earliest first.
  for (std::int32_t i = 0; i < n; ++i) {
    if (bits[i] < prefix || (bits[i] == prefix && remaining-- > 0)) mask[slots[i]] = 1;
  }
}

}  // namespace audiokv::detail
