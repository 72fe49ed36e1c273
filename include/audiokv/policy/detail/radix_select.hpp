// SPDX-License-Identifier: Apache-2.0
/// @file
/// Host selection of the k lowest cells by (score, slot) — the order of core/selection_key.hpp —
/// as a three-digit (11, 11, 10 bit) radix select over ordered score bits: four linear passes,
/// no comparisons, no allocation. Ties at the threshold go to the earliest entries of the input,
/// so an input in ascending slot order reproduces the tie rule exactly.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../core/selection_key.hpp"

namespace audiokv::policy::detail {

/// @brief Marks in `mask` (indexed by slot) the `k` lowest of the cells `slots[0..n)`, by
/// (score[slot], slot). @pre slots ascend; 0 <= k <= n. Never allocates.
inline void radix_select_lowest(const float* score, const std::int32_t* slots, std::int32_t n,
                                std::int32_t k, std::uint32_t* bits, std::uint8_t* mask) {
  if (k <= 0) return;
  constexpr int shifts[3] = {21, 10, 0};
  constexpr int widths[3] = {11, 11, 10};
  std::uint32_t prefix = 0, prefix_mask = 0;
  std::int32_t remaining = k;  // how many to take from the bucket chain still open
  std::int32_t sharing = n;    // keys that share the prefix
  // Four partial histograms on long inputs, summed after each pass: the scores crowd into few
  // buckets, and consecutive increments of one counter would wait on each other's stores.
  const std::int32_t ways = n >= 4096 ? 4 : 1;
  std::int32_t partial[4][1 << 11];
  for (int digit = 0; digit < 3; ++digit) {
    const std::uint32_t digit_mask = (1u << widths[digit]) - 1u;
    const bool sparse = digit > 0 && sharing < n / 8;
    const std::int32_t used = sparse ? 1 : ways;
    for (std::int32_t w = 0; w < used; ++w) std::fill(partial[w], partial[w] + digit_mask + 1, 0);
    auto count = [&](std::int32_t i, std::int32_t* histogram) {
      histogram[(bits[i] >> shifts[digit]) & digit_mask] +=
          static_cast<std::int32_t>((bits[i] & prefix_mask) == prefix);
    };
    std::int32_t i = 0;
    if (digit == 0) {
      // The keys and the first digit's histogram in one pass.
      for (; i < n; ++i) {
        bits[i] = core::ordered_score_bits(score[slots[i]]);
        ++partial[i & (ways - 1)][bits[i] >> shifts[0]];
      }
    } else if (sparse) {
      // Few keys share the prefix: the branch predicts well and skips the others.
      for (; i < n; ++i) {
        if ((bits[i] & prefix_mask) == prefix)
          ++partial[0][(bits[i] >> shifts[digit]) & digit_mask];
      }
    } else {
      // Counted without a branch: whether a key shares the prefix is unpredictable.
      if (ways == 4) {
        for (; i + 4 <= n; i += 4) {
          count(i, partial[0]);
          count(i + 1, partial[1]);
          count(i + 2, partial[2]);
          count(i + 3, partial[3]);
        }
      }
      for (; i < n; ++i) count(i, partial[0]);
    }
    std::int32_t* histogram = partial[0];
    for (std::int32_t w = 1; w < used; ++w) {
      for (std::uint32_t d = 0; d <= digit_mask; ++d) histogram[d] += partial[w][d];
    }
    std::uint32_t bucket = 0;
    for (; histogram[bucket] < remaining; ++bucket) remaining -= histogram[bucket];
    sharing = histogram[bucket];
    prefix |= bucket << shifts[digit];
    prefix_mask |= digit_mask << shifts[digit];
  }
  // Every cell below the threshold goes; `remaining` cells equal to it go, earliest first.
  // When many go (a promotion rejects about as many contenders as it keeps), without a branch:
  // every entry's mask byte is or-ed with whether it goes.
  if (k < n / 4) {
    for (std::int32_t i = 0; i < n; ++i) {
      if (bits[i] < prefix || (bits[i] == prefix && remaining-- > 0)) mask[slots[i]] = 1;
    }
    return;
  }
  for (std::int32_t i = 0; i < n; ++i) {
    const bool tie = bits[i] == prefix;
    const bool take = (bits[i] < prefix) | (tie & (remaining > 0));
    remaining -= static_cast<std::int32_t>(tie);
    mask[slots[i]] = static_cast<std::uint8_t>(mask[slots[i]] | static_cast<std::uint8_t>(take));
  }
}

}  // namespace audiokv::policy::detail
