// SPDX-License-Identifier: Apache-2.0
/// @file
/// The AudioKV policy's protection rules: the recent window and sinks (never evicted) and the
/// neighbourhoods of young phoneme boundaries (evicted only when a target cannot be met
/// otherwise). A boundary is a point in the stream the host marked (F15): it protects its
/// neighbourhood for the whole horizon, whether or not its own frame is still cached, so the
/// rules keep the positions of the boundaries appended within the horizon.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

#include "../../types/frame.hpp"
#include "../audiokv_config.hpp"
#include "../detail/cell_store.hpp"

namespace audiokv::policy::detail {

/// How strongly a cell is protected; apply_speech_rules() receives `protect_always` as its kept
/// level.
enum protection_level : std::uint8_t { protect_none = 0, protect_boundary = 1, protect_always = 2 };

/// @brief Protection of the cached cells, from their positions and flags and the boundaries
/// appended within the horizon.
///
/// A cell is `always` kept when its position lies in the recent window (at or after
/// newest_pos - config.recent_window_frames() + 1), it is a text cell (frame_flag_text) in the
/// text recent window (at or after newest_pos - config.text_recent_cells() + 1) or it is a
/// sink; else `boundary` when a phoneme boundary appended at or after newest_pos -
/// boundary_horizon_frames lies within +-boundary_radius positions, its own frame cached or
/// not; else `unprotected`.
///
/// The boundaries are kept as their positions, ascending: at most horizon_frames + 1 of them
/// lie within the horizon (positions strictly increase), and twice that many slots (8 bytes
/// per frame of the horizon: 808 bytes for 1 s of 10 ms frames), allocated at construction,
/// let record() drop the expired ones in amortised O(1) without allocating.
class protection_rules {
 public:
  explicit protection_rules(const audiokv_config& config)
      : retention_frames_(config.recent_window_frames()),
        text_frames_(config.text_recent_cells()),
        horizon_frames_(config.boundary_horizon_frames()),
        radius_(config.boundary_radius),
        boundaries_(2 * (static_cast<std::size_t>(horizon_frames_) + 1)) {}
  protection_rules(const protection_rules&) = default;
  protection_rules& operator=(const protection_rules&) = default;
  /// Takes `other`'s boundaries; `other` keeps its rules and records no boundary after.
  protection_rules(protection_rules&& other) noexcept
      : retention_frames_(other.retention_frames_),
        text_frames_(other.text_frames_),
        horizon_frames_(other.horizon_frames_),
        radius_(other.radius_),
        boundaries_(std::move(other.boundaries_)),
        count_(std::exchange(other.count_, 0)) {}
  /// Takes `other`'s rules and boundaries; `other` records no boundary after.
  protection_rules& operator=(protection_rules&& other) noexcept {
    if (this == &other) return *this;
    retention_frames_ = other.retention_frames_;
    text_frames_ = other.text_frames_;
    horizon_frames_ = other.horizon_frames_;
    radius_ = other.radius_;
    boundaries_ = std::move(other.boundaries_);
    count_ = std::exchange(other.count_, 0);
    return *this;
  }
  ~protection_rules() = default;

  /// Positions at or after this one are in the recent window.
  std::int64_t recent_from(const cell_store& store) const noexcept {
    return static_cast<std::int64_t>(store.newest_pos()) - retention_frames_ + 1;
  }
  /// Text cells at or after this position are in the text recent window.
  std::int64_t text_recent_from(const cell_store& store) const noexcept {
    return static_cast<std::int64_t>(store.newest_pos()) - text_frames_ + 1;
  }
  /// True when a cell at `pos` with `flags` is always kept: in the recent window (pos >=
  /// recent, recent_from()), a text cell in the text window (pos >= text_recent,
  /// text_recent_from()), or a sink.
  static bool always_kept(std::int64_t pos, std::uint8_t flags, std::int64_t recent,
                          std::int64_t text_recent) noexcept {
    return pos >= recent || (flags & frame_flag_sink) != 0 ||
           (pos >= text_recent && (flags & frame_flag_text) != 0);
  }
  /// Boundaries at or after this position still protect their neighbourhood.
  std::int64_t boundary_from(const cell_store& store) const noexcept {
    return static_cast<std::int64_t>(store.newest_pos()) - horizon_frames_;
  }

  /// Records the phoneme boundaries among `count` frames the cache has just accepted (positions
  /// ascending and above every recorded one). Allocates nothing.
  void record(const frame_meta* frames, std::int32_t count) noexcept {
    for (std::int32_t i = 0; i < count; ++i) {
      if (frames[i].flags & frame_flag_phoneme_boundary) push(frames[i].pos);
    }
  }
  /// Forgets every boundary (reset()).
  void clear() noexcept { count_ = 0; }
  /// False once moved from: record() then keeps no boundary until the rules are rebuilt.
  bool holds_slots() const noexcept { return !boundaries_.empty(); }

  /// Boundaries that protect now, ascending: [first, last) of the recorded positions at or
  /// after boundary_from(store).
  const std::int32_t* active_begin(const cell_store& store) const noexcept {
    return std::lower_bound(boundaries_.data(), boundaries_.data() + count_, boundary_from(store),
                            [](std::int32_t a, std::int64_t b) { return a < b; });
  }
  /// End of the recorded boundaries (see active_begin()).
  const std::int32_t* active_end() const noexcept { return boundaries_.data() + count_; }
  /// Most boundaries a cache may hold active: horizon_frames + 1.
  std::int64_t max_active() const noexcept { return std::int64_t{horizon_frames_} + 1; }
  /// Replaces the recorded boundaries by `n` <= max_active() positions, ascending (a
  /// snapshot's, checked by the caller): position(i) for i in [0, n). Allocates nothing (a
  /// moved-from object, which holds no slots, records none).
  template <class Position>
  void assign(std::int32_t n, Position position) noexcept {
    count_ = std::min(static_cast<std::size_t>(n), boundaries_.size());
    for (std::size_t i = 0; i < count_; ++i)
      boundaries_[i] = position(static_cast<std::int32_t>(i));
  }

  /// Writes the level of every cell into protection[0, n) in two linear passes.
  void mark(const cell_store& store, std::uint8_t* protection) const noexcept {
    if (store.shares_frames()) {
      mark_with(
          store, [&](std::int32_t j) { return store.flags_of(j); }, protection);
    } else {
      const std::uint8_t* flags = store.flags();
      mark_with(
          store, [flags](std::int32_t j) { return flags[j]; }, protection);
    }
  }

  /// mark()'s level of one cell without scratch: the first active boundary at or after
  /// pos - radius is found by binary search. O(log horizon_frames).
  protection_level level_of(const cell_store& store, std::int32_t slot) const noexcept {
    const std::int64_t p = store.pos()[slot];
    if (always_kept(p, store.flags_of(slot), recent_from(store), text_recent_from(store)))
      return protect_always;
    const std::int64_t from = std::max(p - radius_, boundary_from(store));
    const std::int32_t* first =
        std::lower_bound(active_begin(store), active_end(), from,
                         [](std::int32_t a, std::int64_t b) { return a < b; });
    return first != active_end() && *first <= p + radius_ ? protect_boundary : protect_none;
  }

 private:
  /// Appends a boundary at `pos`; when the slots are full, first drops the boundaries no frame
  /// at or after pos can see (before pos - horizon_frames): at most horizon_frames remain.
  void push(std::int32_t pos) noexcept {
    if (boundaries_.empty()) return;  // moved from: its cache is gone
    if (count_ == boundaries_.size()) {
      std::int32_t* begin = boundaries_.data();
      std::int32_t* keep =
          std::lower_bound(begin, begin + count_, std::int64_t{pos} - horizon_frames_,
                           [](std::int32_t a, std::int64_t b) { return a < b; });
      count_ = static_cast<std::size_t>(std::copy(keep, begin + count_, begin) - begin);
    }
    boundaries_[count_++] = pos;
  }

  /// mark() with the flags of cell j from flags_of(j).
  template <class Flags>
  void mark_with(const cell_store& store, Flags flags_of, std::uint8_t* protection) const noexcept {
    const std::int32_t n = store.size();
    const std::int32_t* pos = store.pos();
    const std::int64_t recent = recent_from(store);
    const std::int64_t text_recent = text_recent_from(store);
    const std::int64_t horizon = boundary_from(store);
    const std::int64_t radius = radius_;
    // Active boundaries lie at or after `horizon`, so a cell before horizon - radius is near
    // none: the cells before the first one at or after it (positions ascend) are only checked
    // for the recent and text windows and sinks, without a branch; the merge walk covers the
    // rest.
    const std::int32_t tail = static_cast<std::int32_t>(
        std::lower_bound(pos, pos + n, horizon - radius,
                         [](std::int32_t a, std::int64_t v) { return a < v; }) -
        pos);
    // pos[j] >= recent as a 32-bit compare (it vectorises): recent clamped into the int32
    // range, and no cell recent when it lies above it; the same for the text window.
    const bool any_recent = recent <= INT32_MAX;
    const std::int32_t recent32 = clamp_position(recent);
    const bool any_text = text_recent <= INT32_MAX;
    const std::int32_t text32 = clamp_position(text_recent);
    for (std::int32_t j = 0; j < tail; ++j) {
      const std::uint8_t f = flags_of(j);
      const bool kept = ((pos[j] >= recent32) & any_recent) | ((f & frame_flag_sink) != 0) |
                        ((pos[j] >= text32) & any_text & ((f & frame_flag_text) != 0));
      protection[j] = kept ? protect_always : protect_none;
    }
    const std::int32_t* boundary = active_begin(store);
    const std::int32_t* const last = active_end();
    for (std::int32_t j = tail; j < n; ++j) {
      while (boundary != last && *boundary + radius < pos[j]) ++boundary;
      const bool near_boundary = boundary != last && *boundary - radius <= pos[j];
      const bool kept = always_kept(pos[j], flags_of(j), recent, text_recent);
      protection[j] = kept ? protect_always : near_boundary ? protect_boundary : protect_none;
    }
  }

  /// A window start as an int32 compare bound: INT32_MIN below the range, 0 above it (the
  /// caller's any_* flag then keeps no cell).
  static std::int32_t clamp_position(std::int64_t from) noexcept {
    return static_cast<std::int32_t>(from < INT32_MIN ? INT32_MIN : from <= INT32_MAX ? from : 0);
  }

  std::int32_t retention_frames_ = 0;
  std::int32_t text_frames_ = 0;
  std::int32_t horizon_frames_ = 0;
  std::int32_t radius_ = 0;
  std::vector<std::int32_t> boundaries_;  // [2 (horizon_frames + 1)] recorded positions
  std::size_t count_ = 0;                 // recorded: boundaries_[0, count_), ascending
};

}  // namespace audiokv::policy::detail
