// SPDX-License-Identifier: Apache-2.0
/// @file
/// The AudioKV policy's protection rules: the recent window and sinks (never evicted) and the
/// neighbourhoods of young phoneme boundaries (evicted only when a target cannot be met
/// otherwise).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>

#include "../../types/frame.hpp"
#include "../audiokv_config.hpp"
#include "../detail/cell_store.hpp"

namespace audiokv::policy::detail {

/// How strongly a cell is protected; apply_speech_rules() receives `protect_always` as its kept
/// level.
enum protection_level : std::uint8_t { protect_none = 0, protect_boundary = 1, protect_always = 2 };

/// @brief Protection of the cached cells, from their positions and flags.
///
/// A cell is `always` kept when its position lies in the recent window (at or after
/// newest_pos - config.recent_window_frames() + 1) or it is a sink; else `boundary` when a
/// phoneme boundary
/// at or after newest_pos - boundary_horizon_frames lies within +-boundary_radius positions;
/// else `unprotected`.
class protection_rules {
 public:
  protection_rules() = default;
  explicit protection_rules(const audiokv_config& config)
      : retention_frames_(config.recent_window_frames()),
        horizon_frames_(config.boundary_horizon_frames()),
        radius_(config.boundary_radius) {}

  /// Positions at or after this one are in the recent window.
  std::int64_t recent_from(const cell_store& store) const noexcept {
    return static_cast<std::int64_t>(store.newest_pos()) - retention_frames_ + 1;
  }
  /// Boundaries at or after this position still protect their neighbourhood.
  std::int64_t boundary_from(const cell_store& store) const noexcept {
    return static_cast<std::int64_t>(store.newest_pos()) - horizon_frames_;
  }

  /// Writes the level of every cell into protection[0, n) in two linear passes (boundary_pos:
  /// [n] scratch for the positions of the active boundaries).
  void mark(const cell_store& store, std::uint8_t* protection,
            std::int32_t* boundary_pos) const noexcept {
    if (store.shares_frames()) {
      mark_with(
          store, [&](std::int32_t j) { return store.flags_of(j); }, protection, boundary_pos);
    } else {
      const std::uint8_t* flags = store.flags();
      mark_with(
          store, [flags](std::int32_t j) { return flags[j]; }, protection, boundary_pos);
    }
  }

  /// mark()'s level of one cell without scratch: the cells whose positions lie in
  /// [pos - radius, pos + radius] and at or after boundary_from() are found by binary search
  /// (positions ascend). O(log n + radius).
  protection_level level_of(const cell_store& store, std::int32_t slot) const noexcept {
    const std::int32_t* pos = store.pos();
    const std::int64_t p = pos[slot];
    if (p >= recent_from(store) || (store.flags_of(slot) & frame_flag_sink)) return protect_always;
    const std::int64_t radius = radius_;
    const std::int64_t from = std::max(p - radius, boundary_from(store));
    const std::int32_t* first = std::lower_bound(
        pos, pos + store.size(), from, [](std::int32_t a, std::int64_t b) { return a < b; });
    for (const std::int32_t* it = first; it != pos + store.size() && *it <= p + radius; ++it) {
      if (store.flags_of(static_cast<std::int32_t>(it - pos)) & frame_flag_phoneme_boundary) {
        return protect_boundary;
      }
    }
    return protect_none;
  }

 private:
  /// mark() with the flags of cell j from flags_of(j). The boundaries are gathered without a
  /// branch (every position is written at the count, which advances on a boundary).
  template <class Flags>
  void mark_with(const cell_store& store, Flags flags_of, std::uint8_t* protection,
                 std::int32_t* boundary_pos) const noexcept {
    const std::int32_t n = store.size();
    const std::int32_t* pos = store.pos();
    const std::int64_t recent = recent_from(store);
    const std::int64_t horizon = boundary_from(store);
    const std::int64_t radius = radius_;
    // Active boundaries lie at or after `horizon`, so a cell before horizon - radius is near
    // none: the cells before the first one at or after it (positions ascend) are only checked
    // for the recent window and sinks, without a branch; the merge walk covers the rest.
    const std::int32_t tail = static_cast<std::int32_t>(
        std::lower_bound(pos, pos + n, horizon - radius,
                         [](std::int32_t a, std::int64_t v) { return a < v; }) -
        pos);
    // pos[j] >= recent as a 32-bit compare (it vectorises): recent clamped into the int32
    // range, and no cell recent when it lies above it.
    const bool any_recent = recent <= INT32_MAX;
    const std::int32_t recent32 = static_cast<std::int32_t>(recent < INT32_MIN ? INT32_MIN
                                                            : any_recent       ? recent
                                                                               : 0);
    for (std::int32_t j = 0; j < tail; ++j) {
      const bool always_kept =
          ((pos[j] >= recent32) & any_recent) | ((flags_of(j) & frame_flag_sink) != 0);
      protection[j] = always_kept ? protect_always : protect_none;
    }
    std::int32_t num_boundaries = 0;
    for (std::int32_t j = tail; j < n; ++j) {
      boundary_pos[num_boundaries] = pos[j];
      num_boundaries +=
          ((flags_of(j) & frame_flag_phoneme_boundary) != 0) & (pos[j] >= horizon) ? 1 : 0;
    }
    std::int32_t b = 0;
    for (std::int32_t j = tail; j < n; ++j) {
      while (b < num_boundaries && boundary_pos[b] + radius < pos[j]) ++b;
      const bool near_boundary = b < num_boundaries && boundary_pos[b] - radius <= pos[j];
      const bool always_kept = pos[j] >= recent || (flags_of(j) & frame_flag_sink);
      protection[j] = always_kept     ? protect_always
                      : near_boundary ? protect_boundary
                                      : protect_none;
    }
  }

  std::int32_t retention_frames_ = 0;
  std::int32_t horizon_frames_ = 0;
  std::int32_t radius_ = 0;
};

}  // namespace audiokv::policy::detail
