// SPDX-License-Identifier: Apache-2.0
/// @file
/// Random eviction (kvpress RandomPress analogue), seeded and deterministic.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "baseline_policy.hpp"

namespace audiokv::policy::baselines {

/// @brief Configuration of random_eviction.
struct random_config {
  /// Budget, capacity and speakers shared by every baseline.
  baseline_config base{};
  /// Seed of the per-plan hash; equal seeds give equal plans.
  std::uint64_t seed = 0;
};

/// @brief Evicts uniformly random cells. Each cell's key is splitmix64(seed, generation, pos);
/// the lowest keys go. The choice depends only on the seed, the cache generation (append and
/// apply count) and the positions, so plan() is const, repeatable and identical across runs.
class random_eviction final : public baseline_policy {
 public:
  /// Validates `config` and allocates every per-cell array for its capacity; nothing allocates
  /// afterwards. Not thread-safe: one thread at a time per object.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit random_eviction(const random_config& config)
      : baseline_policy("random", config.base),
        seed_(config.seed),
        key_(config.base.reserved_capacity()),
        order_(config.base.reserved_capacity()) {}

  const char* name() const noexcept override { return "random"; }

  /// splitmix64 finaliser (Steele, Lea, Flood 2014).
  static std::uint64_t mix(std::uint64_t x) noexcept {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }

 protected:
  void on_observe_rows(const float*, std::int32_t, gqa_reduce) override {}
  void select_evictions(std::int32_t target, std::uint8_t* mask) const override {
    const std::int32_t n = store().size();
    const std::int32_t* pos = store().pos();
    const std::uint64_t base = mix(seed_ ^ mix(generation()));
    for (std::int32_t j = 0; j < n; ++j) {
      key_[j] = mix(base ^ static_cast<std::uint32_t>(pos[j]));
      order_[j] = j;
    }
    policy::detail::mark_lowest(key_.data(), pos, order_.data(), n, n - target, mask);
  }

 private:
  std::uint64_t seed_;
  mutable std::vector<std::uint64_t> key_;   // [capacity] scratch
  mutable std::vector<std::int32_t> order_;  // [capacity] scratch
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::random_config;
using policy::baselines::random_eviction;
}  // namespace audiokv
