// SPDX-License-Identifier: Apache-2.0
/// @file
/// The one bound on the size of a cache that every policy and configuration checks: budgets and
/// capacities hold at most max_cache_cells cells, with one message for all of them.
#pragma once

#include <cstdint>

#include "../detail/describe.hpp"
#include "../error.hpp"

namespace audiokv::types {

/// Most cells a budget or a capacity of one (sequence, layer, KV head) cache may name: 2^30.
/// Slots, counts and move maps are int32; a bound of 2^30 leaves room for the headroom policies
/// and hosts add to a budget (a baseline's budget + 1 slots, twice the budget for bulk appends)
/// without overflow, and it rejects a budget such as 2^31 - 1 up front, where allocating it
/// would fail or exhaust memory later.
inline constexpr std::int32_t max_cache_cells = std::int32_t{1} << 30;

namespace detail {

/// Throws audiokv::error naming `argument` (e.g. "config.budget") unless
/// lowest <= value <= max_cache_cells: "must be >= <lowest>" below, and above the one message
/// every policy gives, "must be <= 1073741824 (max_cache_cells, 2^30)".
inline void require_cell_count(const char* where, const char* argument, std::int64_t value,
                               std::int64_t lowest) {
  AUDIOKV_REQUIRE(value >= lowest, where, argument, value,
                  ::audiokv::detail::describe("must be >= ", lowest).c_str());
  AUDIOKV_REQUIRE(value <= max_cache_cells, where, argument, value,
                  "must be <= 1073741824 (max_cache_cells, 2^30)");
}

}  // namespace detail
}  // namespace audiokv::types

namespace audiokv {
using types::max_cache_cells;
}  // namespace audiokv
