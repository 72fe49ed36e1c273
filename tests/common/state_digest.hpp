// SPDX-License-Identifier: Apache-2.0
/// @file
/// The golden digest's record of a cache's run: an FNV-1a 64 hash over the bits of every
/// importance, speaker baseline, plan and final counter, in a fixed order. Two runs hash equal
/// only if all of these are bit-identical.
#pragma once

#include <audiokv/audiokv.hpp>
#include <cstdint>
#include <cstring>

namespace audiokv::test {

/// FNV-1a 64 over 32-bit words.
struct fnv1a {
  std::uint64_t value = 1469598103934665603ull;
  void add(std::uint32_t x) { value = (value ^ x) * 1099511628211ull; }
  void add_float(float f) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    add(bits);
  }
};

/// One step's state: the importance of every cell, then each speaker's baseline.
template <class Cache>
void digest_state(fnv1a& d, const Cache& cache, std::int32_t num_speakers) {
  for (std::int32_t j = 0; j < cache.num_cells(); ++j) d.add_float(cache.importance()[j]);
  for (std::int32_t s = 0; s < num_speakers; ++s) d.add_float(cache.speaker_baselines()[s]);
}

/// One plan: move map, scores, promotions, demotions, ratio and normalised entropy.
inline void digest_plan(fnv1a& d, const eviction_plan& plan) {
  for (std::int32_t j = 0; j < plan.n_kv_before; ++j) {
    d.add(static_cast<std::uint32_t>(plan.move_to[j]));
  }
  for (const float s : plan.scores) d.add_float(s);
  for (const std::int32_t j : plan.promote) d.add(static_cast<std::uint32_t>(j));
  for (const std::int32_t j : plan.demote) d.add(static_cast<std::uint32_t>(j));
  d.add_float(plan.ratio);
  d.add_float(plan.normalized_entropy);
}

/// The run's final counters.
inline void digest_stats(fnv1a& d, const audiokv_stats& s) {
  d.add(static_cast<std::uint32_t>(s.drift_resets));
  d.add(static_cast<std::uint32_t>(s.promotions));
  d.add(static_cast<std::uint32_t>(s.demotions));
  d.add(static_cast<std::uint32_t>(s.cells_evicted));
}

}  // namespace audiokv::test
