// SPDX-License-Identifier: Apache-2.0
/// @file
/// Tiered pools: the split of a budget B into the base, buffer and emergency pools.
#pragma once

#include <cmath>
#include <cstdint>

#include "../error.hpp"

namespace audiokv::types {

/// The pool a cell lives in.
enum class pool_tier : std::uint8_t { buffer = 0, base = 1, emergency = 2 };

/// @brief Fractions of the budget per pool (each >= 0, sum 1) and the cell counts they give.
struct pool_split {
  /// Fraction for the base pool: the highest-ranked cells, never evicted directly.
  float base = 0.6f;
  /// Fraction for the buffer pool: the eviction candidates.
  float buffer = 0.3f;
  /// Fraction for the emergency pool: sinks, boundary markers and host-flagged cells.
  float emergency = 0.1f;

  /// Throws audiokv::error naming the bad fraction.
  void validate(const char* where) const {
    AUDIOKV_REQUIRE(std::isfinite(base) && base >= 0.0f, where, "split.base", base, "must be >= 0");
    AUDIOKV_REQUIRE(std::isfinite(buffer) && buffer >= 0.0f, where, "split.buffer", buffer,
                    "must be >= 0");
    AUDIOKV_REQUIRE(std::isfinite(emergency) && emergency >= 0.0f, where, "split.emergency",
                    emergency, "must be >= 0");
    const float sum = base + buffer + emergency;
    AUDIOKV_REQUIRE(std::fabs(sum - 1.0f) <= 1e-4f, where,
                    "split.base + split.buffer + split.emergency", sum, "must be 1");
  }
  /// floor(base * B): the base pool never holds more.
  std::int32_t base_cells(std::int32_t budget) const {
    return static_cast<std::int32_t>(std::floor(static_cast<double>(base) * budget + 1e-9));
  }
  /// floor(emergency * B): beyond this the oldest emergency cells are evicted.
  std::int32_t emergency_cells(std::int32_t budget) const {
    return static_cast<std::int32_t>(std::floor(static_cast<double>(emergency) * budget + 1e-9));
  }
  /// The rest: new frames wait here for evaluation.
  std::int32_t buffer_cells(std::int32_t budget) const {
    return budget - base_cells(budget) - emergency_cells(budget);
  }
};

}  // namespace audiokv::types

namespace audiokv {
using types::pool_split;
using types::pool_tier;
}  // namespace audiokv
