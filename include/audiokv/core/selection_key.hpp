// SPDX-License-Identifier: Apache-2.0
/// @file
/// The selection order of core/selection.hpp (ascending score, NaN lowest, ties by ascending
/// slot) as one unsigned integer key, so a radix sort or radix select on the GPU picks exactly
/// the set the CPU picks with evicts_before(), for every float score. Key = [segment | ordered
/// score bits | slot], most significant first. Slots stand for positions: cells are kept in time
/// order (move_to[i] <= i), so slot order is position order within a segment.
#pragma once

#include <cstdint>
#include <cstring>

#include "../config.hpp"

namespace audiokv::core {

/// Score bits of a cell that is not a candidate: above every score key (the highest is
/// ordered_score_bits(+inf) = 0xFF800000).
inline constexpr std::uint32_t excluded_score_bits = 0xFFFFFFFFu;

/// Raw IEEE-754 bits of x.
AUDIOKV_HOST_DEVICE std::uint32_t float_bits(float x) {
#if defined(AUDIOKV_DEVICE_PASS)
  return __float_as_uint(x);
#else
  std::uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

/// ordered_score_bits() of the float with IEEE-754 bits `u`, in integer operations only (no
/// float compare, no branch once compiled: the vectorised key passes use it): 0 for any NaN,
/// 0x80000000 for -0 and +0, the complemented bits of a negative number and the bits with the
/// sign bit set of a positive one.
AUDIOKV_HOST_DEVICE constexpr std::uint32_t ordered_key_of_bits(std::uint32_t u) {
  const std::uint32_t magnitude = u & 0x7FFFFFFFu;
  const std::uint32_t v = magnitude == 0u ? 0u : u;  // -0 as +0
  const std::uint32_t key = v ^ ((0u - (v >> 31)) | 0x80000000u);
  return magnitude > 0x7F800000u ? 0u : key;  // NaN: exponent all ones, mantissa not 0
}

/// The order of core/selection.hpp on scores as a map float -> uint32: for any floats a, b
/// (NaN included), ordered_score_bits(a) < ordered_score_bits(b) exactly when a is evicted
/// before b regardless of position, and the keys are equal exactly when neither is. Every NaN
/// maps to 0, below -inf (0x007FFFFF); -0 and +0 map to 0x80000000; +inf to 0xFF800000, below
/// excluded_score_bits.
AUDIOKV_HOST_DEVICE std::uint32_t ordered_score_bits(float score) {
  return ordered_key_of_bits(float_bits(score));
}

/// Smallest b with 2^b >= count (0 for count <= 1): the bits a slot index below count needs.
AUDIOKV_HOST_DEVICE constexpr std::int32_t bits_for(std::uint32_t count) {
  std::int32_t b = 0;
  while (b < 32 && (std::uint64_t{1} << b) < count) ++b;
  return b;
}

/// Key of (segment, score bits, slot); valid when 32 + slot_bits + segment bits <= 64.
AUDIOKV_HOST_DEVICE constexpr std::uint64_t selection_key(std::uint32_t segment,
                                                          std::uint32_t score_bits,
                                                          std::uint32_t slot,
                                                          std::int32_t slot_bits) {
  return (static_cast<std::uint64_t>(segment) << (32 + slot_bits)) |
         (static_cast<std::uint64_t>(score_bits) << slot_bits) | slot;
}

/// Slot stored in a key.
AUDIOKV_HOST_DEVICE constexpr std::int32_t key_slot(std::uint64_t key, std::int32_t slot_bits) {
  return static_cast<std::int32_t>(key & ((std::uint64_t{1} << slot_bits) - 1u));
}

/// Score bits stored in a key.
AUDIOKV_HOST_DEVICE constexpr std::uint32_t key_score_bits(std::uint64_t key,
                                                           std::int32_t slot_bits) {
  return static_cast<std::uint32_t>(key >> slot_bits);
}

/// True when the keys of num_segments segments of num_cells cells fit in 64 bits.
AUDIOKV_HOST_DEVICE constexpr bool selection_key_fits(std::uint32_t num_segments,
                                                      std::uint32_t num_cells) {
  return 32 + bits_for(num_cells) + bits_for(num_segments) <= 64;
}

}  // namespace audiokv::core
