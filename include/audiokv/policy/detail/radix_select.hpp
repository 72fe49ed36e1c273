// SPDX-License-Identifier: Apache-2.0
/// @file
/// Host selection of the k lowest cells by (score, slot) — the order of core/selection_key.hpp —
/// as a radix select (11-bit digits) over ordered score bits relative to the lowest: linear
/// passes, no comparisons, no allocation. Ties at the threshold go to the earliest entries of the
/// input, so an input in ascending slot order reproduces the tie rule exactly.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../core/selection_key.hpp"

namespace audiokv::policy::detail {

/// The k-th lowest key of a radix_threshold() call and how many keys equal to it are among the
/// k lowest (the earliest entries with that key).
struct radix_cut {
  std::uint32_t threshold;  ///< the k-th lowest ordered_score_bits key
  std::int32_t ties;        ///< entries with key == threshold among the k lowest, >= 1
  std::int32_t equal;       ///< entries with key == threshold in all, >= ties
};

/// @brief The cut of the k lowest of the cells `slots[0..n)` by (score[slot], slot): the
/// entries i with bits[i] < threshold, and the first `ties` entries with bits[i] == threshold.
/// Writes bits[i] = core::ordered_score_bits(score[slots[i]]). @pre 1 <= k <= n. Never
/// allocates.
///
/// The digits are taken from key - (lowest key), over the width of the keys' range, so the
/// first digit's 2048 buckets spread over the values present (final scores crowd into a few
/// octaves, where a fixed first digit of sign, exponent and two mantissa bits leaves most keys
/// in one bucket). Once the keys sharing the prefix fit in a stack buffer they are gathered
/// there and the later digits count only them.
inline radix_cut radix_threshold_of_keys(const std::uint32_t* bits, std::int32_t n, std::int32_t k,
                                         std::uint32_t lowest, std::uint32_t highest);

inline radix_cut radix_threshold(const float* score, const std::int32_t* slots, std::int32_t n,
                                 std::int32_t k, std::uint32_t* bits) {
  // The keys and their range.
  std::uint32_t lowest = 0xFFFFFFFFu, highest = 0u;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::uint32_t key = core::ordered_score_bits(score[slots[i]]);
    bits[i] = key;
    lowest = key < lowest ? key : lowest;
    highest = key > highest ? key : highest;
  }
  return radix_threshold_of_keys(bits, n, k, lowest, highest);
}

/// @brief radix_threshold() of keys already computed: bits[0..n) with `lowest` and `highest`
/// their minimum and maximum. @pre 1 <= k <= n. Never allocates.
inline radix_cut radix_threshold_of_keys(const std::uint32_t* bits, std::int32_t n, std::int32_t k,
                                         std::uint32_t lowest, std::uint32_t highest) {
  const std::uint32_t range = highest - lowest;
  int width = 0;  // bits of key - lowest that can differ
  while (width < 32 && (range >> width) != 0u) ++width;
  constexpr int digit_bits = 11;
  constexpr std::int32_t buffer_size = 4096;
  // Four partial histograms on long inputs, summed after each pass: crowded keys would make
  // consecutive increments of one counter wait on each other's stores.
  std::int32_t partial[4][1 << digit_bits];
  std::uint32_t buffer[buffer_size];  // offsets of the keys that share the prefix, once few
  std::int32_t buffered = -1;         // their count; -1 while the keys are counted in `bits`
  std::uint32_t prefix = 0, prefix_mask = 0;  // over key - lowest
  std::int32_t remaining = k;                 // how many to take from the bucket chain still open
  std::int32_t sharing = n;                   // keys sharing the prefix so far
  for (int shift = width; shift > 0;) {
    const int digit = shift < digit_bits ? shift : digit_bits;
    shift -= digit;
    const std::uint32_t digit_mask = (1u << digit) - 1u;
    const bool from_buffer = buffered >= 0;
    const std::int32_t ways = !from_buffer && n >= 4096 ? 4 : 1;
    for (std::int32_t w = 0; w < ways; ++w) std::fill(partial[w], partial[w] + digit_mask + 1, 0);
    if (from_buffer) {
      // Every buffered offset shares the prefix of the digits before.
      for (std::int32_t i = 0; i < buffered; ++i) ++partial[0][(buffer[i] >> shift) & digit_mask];
    } else {
      // Counted without a branch: whether a key shares the prefix is unpredictable.
      auto count = [&](std::int32_t i, std::int32_t* histogram) {
        const std::uint32_t offset = bits[i] - lowest;
        histogram[(offset >> shift) & digit_mask] +=
            static_cast<std::int32_t>((offset & prefix_mask) == prefix);
      };
      std::int32_t i = 0;
      if (ways == 4) {
        for (; i + 4 <= n; i += 4) {
          count(i, partial[0]);
          count(i + 1, partial[1]);
          count(i + 2, partial[2]);
          count(i + 3, partial[3]);
        }
      }
      for (; i < n; ++i) count(i, partial[0]);
      for (std::int32_t w = 1; w < ways; ++w) {
        for (std::uint32_t d = 0; d <= digit_mask; ++d) partial[0][d] += partial[w][d];
      }
    }
    const std::int32_t* histogram = partial[0];
    std::uint32_t bucket = 0;
    for (; histogram[bucket] < remaining; ++bucket) remaining -= histogram[bucket];
    sharing = histogram[bucket];
    prefix |= bucket << shift;
    prefix_mask |= digit_mask << shift;
    if (shift == 0) break;
    // The keys that share the longer prefix, gathered without a branch (every entry is written
    // at the count, which advances on a match): from the buffer in place, or from all keys
    // once they fit.
    if (from_buffer) {
      std::int32_t kept = 0;
      for (std::int32_t i = 0; i < buffered; ++i) {
        buffer[kept] = buffer[i];
        kept += static_cast<std::int32_t>((buffer[i] & prefix_mask) == prefix);
      }
      buffered = kept;
    } else if (sharing < buffer_size) {
      std::int32_t kept = 0;
      auto gather = [&](std::int32_t from, std::int32_t to) {
        for (std::int32_t i = from; i < to; ++i) {
          const std::uint32_t offset = bits[i] - lowest;
          buffer[kept] = offset;
          kept += static_cast<std::int32_t>((offset & prefix_mask) == prefix);
        }
      };
      // Few keys share the prefix (often a handful of 32k): blocks without one are skipped
      // after a test that vectorises.
      constexpr std::int32_t block = 32;
      std::int32_t i = 0;
      if (sharing <= n / block) {
        for (; i + block <= n; i += block) {
          std::uint32_t any = 0;
          for (std::int32_t b = 0; b < block; ++b) {
            any |= static_cast<std::uint32_t>(((bits[i + b] - lowest) & prefix_mask) == prefix);
          }
          if (any != 0u) gather(i, i + block);
        }
      }
      gather(i, n);
      buffered = kept;
    }
  }
  return radix_cut{lowest + prefix, remaining, sharing};
}

/// @brief Marks in `mask` (indexed by slot) the `k` lowest of the cells `slots[0..n)`, by
/// (score[slot], slot) (radix_threshold()). @pre slots ascend; 0 <= k <= n. Never allocates.
inline void radix_select_lowest(const float* score, const std::int32_t* slots, std::int32_t n,
                                std::int32_t k, std::uint32_t* bits, std::uint8_t* mask) {
  if (k <= 0) return;
  const radix_cut cut = radix_threshold(score, slots, n, k, bits);
  const std::uint32_t threshold = cut.threshold;
  std::int32_t remaining = cut.ties;
  // Every cell below the threshold goes; `remaining` cells equal to it go, earliest first.
  // When many go (a promotion rejects about as many contenders as it keeps), without a branch:
  // every entry's mask byte is or-ed with whether it goes.
  if (k < n / 4) {
    for (std::int32_t i = 0; i < n; ++i) {
      if (bits[i] < threshold || (bits[i] == threshold && remaining-- > 0)) mask[slots[i]] = 1;
    }
    return;
  }
  for (std::int32_t i = 0; i < n; ++i) {
    const bool tie = bits[i] == threshold;
    const bool take = (bits[i] < threshold) | (tie & (remaining > 0));
    remaining -= static_cast<std::int32_t>(tie);
    mask[slots[i]] = static_cast<std::uint8_t>(mask[slots[i]] | static_cast<std::uint8_t>(take));
  }
}

}  // namespace audiokv::policy::detail
