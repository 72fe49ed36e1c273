// SPDX-License-Identifier: Apache-2.0
/// @file
/// The invariant of a stable move map (eviction_plan::move_to, the slot tables' cell maps):
/// every entry is -1 (evicted) or the number of kept entries before it. One check, used by
/// every consumer of a move map before it moves anything.
#pragma once

#include <cstdint>

#include "../core/compaction.hpp"
#include "../error.hpp"

namespace audiokv::types {

namespace detail {

/// Checks that `move_to[0, n)` is a stable move map: every entry is core::evicted_slot or the
/// number of kept entries before it (so kept cells keep their order and move_to[i] <= i).
/// Returns the number of kept entries. Reads only; allocates only to build an error.
/// @throws audiokv::error naming `argument[i]` for the first entry that breaks the rule.
inline std::int32_t require_stable_move_map(const char* where, const char* argument,
                                            const std::int32_t* move_to, std::int32_t n) {
  std::int32_t kept = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t to = move_to[i];
    AUDIOKV_REQUIRE(to == core::evicted_slot || to == kept, where,
                    ::audiokv::detail::indexed(argument, i), to,
                    "must be -1 or the number of kept cells before it");
    if (to != core::evicted_slot) ++kept;
  }
  return kept;
}

}  // namespace detail

}  // namespace audiokv::types
