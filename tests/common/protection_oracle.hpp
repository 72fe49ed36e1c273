// SPDX-License-Identifier: Apache-2.0
/// @file
/// A reference of the protection rules, written from the specification and docs/design.md's
/// Decisions table, for tests that drive a tiered_cache. It keeps its own record of every cell
/// (position, flags, pool) from the frames the test appends and the plans it applies, and it
/// never asks the cache which cells are protected. The rules, per plan:
///   recent window: the newest ceil(min_retention_ms / frame_ms) positions are never evicted,
///        or, when shrink_recent_window and that window plus a full emergency pool would reach
///        the trigger level ceil(trigger x B), the newest
///        max(0, ceil(trigger x B) - 1 - floor(split.emergency x B)) positions;
///   text recent window: text cells (frame_flag_text) among the newest
///        max(recent window, min(ceil(text_recent_share x B),
///        ceil(trigger x B) - 1 - floor(split.emergency x B))) positions are never evicted;
///   emergency pool: sinks are never evicted; emergency cells (frames flagged segment_start,
///        critical or sink) are evicted only while the pool holds more than
///        floor(split.emergency * B) cells, at most that excess, oldest first among the
///        non-sink, non-recent ones;
///   boundary protection: a buffer cell within +-boundary_radius positions of a phoneme
///        boundary at most ceil(boundary_horizon_ms / frame_ms) positions older than the newest
///        frame is evicted only as a released protection (counted in
///        plan.protections_released).
/// Sized once in the constructor: append, check and apply never allocate.
#pragma once

#include <algorithm>
#include <audiokv/policy/audiokv_config.hpp>
#include <audiokv/types/eviction_plan.hpp>
#include <audiokv/types/frame.hpp>
#include <audiokv/types/pool_split.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

namespace audiokv::test {

/// What one plan (or a sum of plans) did against the rules, and how often each rule applied.
struct protection_report {
  std::int64_t recent_evicted = 0;       // recent-window violations
  std::int64_t text_recent_evicted = 0;  // text-window violations (text cells past the window)
  std::int64_t sink_evicted = 0;         // sink violations
  std::int64_t emergency_excess = 0;     // emergency cells evicted beyond the overflow
  std::int64_t emergency_order = 0;      // evicted while an older evictable one stays
  std::int64_t boundary_evicted = 0;     // boundary-protected buffer cells evicted
  std::int64_t boundary_unreleased = 0;  // boundary violations: beyond plan.protections_released
  std::int64_t emergency_evicted = 0;    // overflow evictions (allowed)
  // Cells each rule covered when the plans were made: a rule that never applied tests nothing.
  std::int64_t recent_seen = 0;
  std::int64_t text_recent_seen = 0;  // text cells in the text window, outside the recent one
  std::int64_t sink_seen = 0;
  std::int64_t boundary_seen = 0;
  std::int64_t emergency_seen = 0;

  /// Evictions that break a rule.
  std::int64_t violations() const {
    return recent_evicted + text_recent_evicted + sink_evicted + emergency_excess +
           emergency_order + boundary_unreleased;
  }
  protection_report& operator+=(const protection_report& o) {
    recent_evicted += o.recent_evicted;
    text_recent_evicted += o.text_recent_evicted;
    sink_evicted += o.sink_evicted;
    emergency_excess += o.emergency_excess;
    emergency_order += o.emergency_order;
    boundary_evicted += o.boundary_evicted;
    boundary_unreleased += o.boundary_unreleased;
    emergency_evicted += o.emergency_evicted;
    recent_seen += o.recent_seen;
    text_recent_seen += o.text_recent_seen;
    sink_seen += o.sink_seen;
    boundary_seen += o.boundary_seen;
    emergency_seen += o.emergency_seen;
    return *this;
  }
};

class protection_oracle {
 public:
  protection_oracle(const audiokv_config& config, std::int32_t capacity)
      : recent_(recent_window(config)),
        text_recent_(text_recent_window(config, recent_)),
        horizon_(frames_for(config.boundary_horizon_ms, config.frame_ms)),
        radius_(config.boundary_radius),
        emergency_cap_(static_cast<std::int64_t>(
            std::floor(static_cast<double>(config.split.emergency) * config.budget + 1e-9))),
        pos_(capacity),
        flags_(capacity),
        tier_(capacity),
        boundaries_(static_cast<std::size_t>(horizon_ + 1)) {}

  /// Records frames the cache accepted: new cells enter the emergency pool when flagged
  /// segment_start, critical or sink, else the buffer pool.
  void append(const frame_meta* frames, std::int32_t count) {
    for (std::int32_t i = 0; i < count; ++i) {
      const frame_meta& f = frames[i];
      constexpr std::uint8_t emergency =
          frame_flag_segment_start | frame_flag_critical | frame_flag_sink;
      pos_[size_] = f.pos;
      flags_[size_] = f.flags;
      tier_[size_] = (f.flags & emergency) ? pool_tier::emergency : pool_tier::buffer;
      ++size_;
      newest_ = f.pos;
      if (f.flags & frame_flag_phoneme_boundary) {
        boundaries_[boundary_count_ % boundaries_.size()] = f.pos;
        ++boundary_count_;
      }
    }
  }

  /// Checks a plan made for the recorded cells, before it is applied.
  protection_report check(const eviction_plan& plan) const {
    protection_report r;
    std::int64_t emergency = 0;
    for (std::int32_t j = 0; j < size_; ++j) emergency += tier_[j] == pool_tier::emergency;
    const std::int64_t excess = emergency > emergency_cap_ ? emergency - emergency_cap_ : 0;
    bool older_evictable_kept = false;
    for (std::int32_t j = 0; j < size_; ++j) {
      const bool evicted = plan.move_to[j] == -1;
      const bool recent = std::int64_t{pos_[j]} > std::int64_t{newest_} - recent_;
      const bool text_recent = !recent && in_text_window(j);
      const bool sink = (flags_[j] & frame_flag_sink) != 0;
      const bool boundary = tier_[j] == pool_tier::buffer && near_boundary(pos_[j]);
      r.recent_seen += recent;
      r.text_recent_seen += text_recent;
      r.sink_seen += sink;
      r.boundary_seen += boundary && !recent;
      if (tier_[j] == pool_tier::emergency) {
        ++r.emergency_seen;
        if (!sink && !recent && !text_recent) {
          if (evicted) {
            ++r.emergency_evicted;
            r.emergency_order += older_evictable_kept;
          } else {
            older_evictable_kept = true;
          }
        }
      }
      if (!evicted) continue;
      r.recent_evicted += recent;
      r.text_recent_evicted += text_recent;
      r.sink_evicted += sink;
      r.boundary_evicted += boundary && !recent && !text_recent && !sink;
    }
    r.emergency_excess = r.emergency_evicted > excess ? r.emergency_evicted - excess : 0;
    const std::int64_t released = plan.protections_released;
    r.boundary_unreleased = r.boundary_evicted > released ? r.boundary_evicted - released : 0;
    return r;
  }

  /// Compacts the record with an applied plan and moves promoted / demoted cells.
  void apply(const eviction_plan& plan) {
    for (const std::int32_t s : plan.promote) tier_[s] = pool_tier::base;
    for (const std::int32_t s : plan.demote) tier_[s] = pool_tier::buffer;
    for (std::int32_t j = 0; j < size_; ++j) {
      const std::int32_t to = plan.move_to[j];
      if (to < 0) continue;
      pos_[to] = pos_[j];
      flags_[to] = flags_[j];
      tier_[to] = tier_[j];
    }
    size_ = plan.n_kv_after;
  }

  /// True when the rules above protect recorded cell j now (tiered_cache::is_protected's
  /// meaning): recent window, sink, emergency pool, or a buffer cell near a young boundary.
  bool protects(std::int32_t j) const {
    return std::int64_t{pos_[j]} > std::int64_t{newest_} - recent_ || in_text_window(j) ||
           (flags_[j] & frame_flag_sink) != 0 || tier_[j] == pool_tier::emergency ||
           (tier_[j] == pool_tier::buffer && near_boundary(pos_[j]));
  }

  std::int32_t size() const { return size_; }
  const std::int32_t* positions() const { return pos_.data(); }
  const pool_tier* tiers() const { return tier_.data(); }

 private:
  /// The recent window by the rule in the file comment, from the configuration's fields.
  static std::int64_t recent_window(const audiokv_config& c) {
    const std::int64_t asked = frames_for(c.min_retention_ms, c.frame_ms);
    if (!c.shrink_recent_window) return asked;
    return std::max<std::int64_t>(0, std::min(asked, room_below_trigger(c)));
  }

  /// The text recent window by the rule in the file comment.
  static std::int64_t text_recent_window(const audiokv_config& c, std::int64_t recent) {
    const auto asked = static_cast<std::int64_t>(
        std::ceil(static_cast<double>(c.text_recent_share) * c.budget - 1e-9));
    return std::max(recent, std::min(asked, room_below_trigger(c)));
  }

  /// ceil(trigger x B) (at least 1) - 1 - floor(split.emergency x B).
  static std::int64_t room_below_trigger(const audiokv_config& c) {
    const auto trigger = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(std::ceil(static_cast<double>(c.trigger) * c.budget - 1e-9)));
    const auto emergency = static_cast<std::int64_t>(
        std::floor(static_cast<double>(c.split.emergency) * c.budget + 1e-9));
    return trigger - 1 - emergency;
  }

  /// True when recorded cell j is a text cell in the text recent window.
  bool in_text_window(std::int32_t j) const {
    return (flags_[j] & frame_flag_text) != 0 &&
           std::int64_t{pos_[j]} > std::int64_t{newest_} - text_recent_;
  }

  /// ceil(ms / frame_ms): the frames a span of ms covers.
  static std::int64_t frames_for(float ms, float frame_ms) {
    return static_cast<std::int64_t>(
        std::ceil(static_cast<double>(ms) / static_cast<double>(frame_ms) - 1e-9));
  }

  /// True when a boundary within the horizon lies within the radius of position p.
  bool near_boundary(std::int32_t p) const {
    const std::int64_t kept =
        boundary_count_ < boundaries_.size() ? boundary_count_ : boundaries_.size();
    for (std::int64_t i = 0; i < kept; ++i) {
      const std::int64_t b = boundaries_[i];
      if (b < std::int64_t{newest_} - horizon_) continue;
      const std::int64_t d = b > p ? b - p : p - b;
      if (d <= radius_) return true;
    }
    return false;
  }

  std::int64_t recent_;
  std::int64_t text_recent_;
  std::int64_t horizon_;
  std::int64_t radius_;
  std::int64_t emergency_cap_;
  std::vector<std::int32_t> pos_;         // [capacity] position of each recorded cell
  std::vector<std::uint8_t> flags_;       // [capacity] its frame flags
  std::vector<pool_tier> tier_;           // [capacity] its pool
  std::vector<std::int32_t> boundaries_;  // ring of the newest horizon + 1 boundary positions
  std::uint64_t boundary_count_ = 0;
  std::int32_t size_ = 0;
  std::int32_t newest_ = 0;
};

}  // namespace audiokv::test
