// SPDX-License-Identifier: Apache-2.0
/// @file
/// xorshift64*: a fast, allocation-free, deterministic generator for test streams that run
/// inside allocation-counted loops (std:: distributions may allocate and differ across
/// standard libraries).
#pragma once

#include <cstdint>

namespace audiokv::test {

class xorshift64 {
 public:
  explicit xorshift64(std::uint64_t seed) : state_(seed | 1u) {}

  std::uint64_t next() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 2685821657736338717ull;
  }
  /// Uniform in [0, 1) with 24 bits.
  float unit() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  /// Uniform integer in [lo, hi].
  std::int32_t range(std::int32_t lo, std::int32_t hi) {
    return lo + static_cast<std::int32_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }

 private:
  std::uint64_t state_;
};

}  // namespace audiokv::test
