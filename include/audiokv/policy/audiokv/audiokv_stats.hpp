// SPDX-License-Identifier: Apache-2.0
/// @file
/// The counters a tiered_cache keeps of what it has done, for monitoring, tests and snapshots.
#pragma once

#include <cstdint>

namespace audiokv::policy {

/// @brief Counters of what the cache has done, for monitoring and tests.
struct audiokv_stats {
  std::int64_t steps = 0;  ///< observe(), observe_group() calls and caches observe_heads() observed
  std::int64_t evictions = 0;             ///< applied plans that evicted at least one cell
  std::int64_t cells_evicted = 0;         ///< cells evicted by applied plans
  std::int64_t promotions = 0;            ///< buffer -> base
  std::int64_t demotions = 0;             ///< base -> buffer (replaced by a better candidate)
  std::int64_t emergency_evictions = 0;   ///< emergency-pool overflow, oldest first
  std::int64_t protections_released = 0;  ///< boundary protections released to meet a target
  std::int64_t drift_resets = 0;          ///< speaker baselines reset on drift
  std::int64_t reservations = 0;          ///< reserve() calls that grew the capacity
};

}  // namespace audiokv::policy

namespace audiokv {
using policy::audiokv_stats;
}  // namespace audiokv
