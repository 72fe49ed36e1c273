// SPDX-License-Identifier: Apache-2.0
/// @file
/// Hole-filling compaction (llama.cpp's KV defragmentation): the kept rows that lie beyond the
/// new end move into the holes the eviction left below it, instead of every kept row shifting
/// down to keep time order in memory.
///
/// Rule, over the physical slots [0, n) of one K/V buffer, keep[p] = 1 when slot p survives and
/// n_after = number of kept slots:
///  - holes   = evicted slots p < n_after, ascending;
///  - movers  = kept slots p >= n_after, ascending;
///  - |holes| == |movers| (both equal n_after minus the kept slots below n_after), and the r-th
///    mover moves to the r-th hole. Every other kept slot stays where it is.
/// Consequences: row moves = |movers| <= evicted cells; afterwards the kept rows occupy exactly
/// [0, n_after), so appends go on at slot n_after; no mover is a hole, so all moves are
/// independent (any order, in parallel, in place) and each is a byte-exact row copy.
/// Memory order is no longer time order; the logical (time-ordered) index of the cache is mapped
/// to slots by audiokv::slot_map (pool/slot_map.hpp).
#pragma once

#include <cstdint>

#include "../config.hpp"

namespace audiokv::core {

/// Rank of slot p among the holes (p < n_after, evicted): p - kept_before(p), where kept_before
/// is the exclusive prefix count of kept slots.
AUDIOKV_HOST_DEVICE std::int32_t hole_rank(std::int32_t p, std::int32_t kept_before) {
  return p - kept_before;
}

/// Rank of slot p among the movers (p >= n_after, kept): kept_before(p) - kept_before(n_after).
AUDIOKV_HOST_DEVICE std::int32_t mover_rank(std::int32_t kept_before,
                                            std::int32_t kept_before_end) {
  return kept_before - kept_before_end;
}

}  // namespace audiokv::core
