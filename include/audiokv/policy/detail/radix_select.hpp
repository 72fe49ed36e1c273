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
  constexpr int shifts[3] = {21, 10, 0};
  constexpr int widths[3] = {11, 11, 10};
  std::uint32_t prefix = 0, prefix_mask = 0;
  std::int32_t remaining = k;  // how many to take from the bucket chain still open
  for (int digit = 0; digit < 3; ++digit) {
    std::int32_t histogram[1 << 11] = {};
    const std::uint32_t digit_mask = (1u << widths[digit]) - 1u;
    if (digit == 0) {
      // The keys and the first digit's histogram in one pass.
      for (std::int32_t i = 0; i < n; ++i) {
        bits[i] = core::ordered_score_bits(score[slots[i]]);
        ++histogram[bits[i] >> shifts[0]];
      }
    } else {
      // Counted without a branch: the scores crowd into few buckets of the first digits, so
      // whether a key shares the prefix is unpredictable.
      for (std::int32_t i = 0; i < n; ++i) {
        histogram[(bits[i] >> shifts[digit]) & digit_mask] +=
            static_cast<std::int32_t>((bits[i] & prefix_mask) == prefix);
      }
    }
    std::uint32_t bucket = 0;
    for (; histogram[bucket] < remaining; ++bucket) remaining -= histogram[bucket];
    prefix |= bucket << shifts[digit];
    prefix_mask |= digit_mask << shifts[digit];
  }
  // Every cell below the threshold goes; `remaining` cells equal to it go, earliest first.
  // Branch-free (a promotion rejects about as many contenders as it keeps): every entry's mask
  // byte is or-ed with whether it goes.
  for (std::int32_t i = 0; i < n; ++i) {
    const bool tie = bits[i] == prefix;
    const bool take = (bits[i] < prefix) | (tie & (remaining > 0));
    remaining -= static_cast<std::int32_t>(tie);
    mask[slots[i]] = static_cast<std::uint8_t>(mask[slots[i]] | static_cast<std::uint8_t>(take));
  }
}

}  // namespace audiokv::detail
