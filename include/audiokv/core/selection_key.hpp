// SPDX-License-Identifier: Apache-2.0
/// @file
/// The selection order of core/selection.hpp (ascending score, ties by ascending slot) as one
/// unsigned integer key, so a radix sort or radix select on the GPU picks exactly the set the
/// CPU picks with evicts_before(). Key = [segment | ordered score bits | slot], most significant
/// first. Slots stand for positions: cells are kept in time order (move_to[i] <= i), so slot
/// order is position order within a segment.
#pragma once

#include <cstdint>
#include <cstring>

#include "../config.hpp"

namespace audiokv::core {

/// Score bits of a cell that is not a candidate: above every finite or infinite score.
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

/// Monotone map float -> uint32: a < b  <=>  ordered_score_bits(a) < ordered_score_bits(b) for
/// non-NaN a, b; -0 and +0 map to the same key (they compare equal). NaN is not a valid score.
AUDIOKV_HOST_DEVICE std::uint32_t ordered_score_bits(float score) {
  const std::uint32_t u = float_bits(score == 0.0f ? 0.0f : score);
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
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
