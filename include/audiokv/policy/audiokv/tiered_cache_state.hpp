// SPDX-License-Identifier: Apache-2.0
/// @file
/// The state of a tiered_cache and what manages it as a whole: its parts, copies and moves,
/// reset(), capacity (reserve(), prefetch()), the shared frame table and snapshots.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "../../core/prefetch.hpp"
#include "../../detail/describe.hpp"
#include "../../error.hpp"
#include "../../span.hpp"
#include "../../types/cache_limits.hpp"
#include "../../types/frame_table.hpp"
#include "../audiokv_config.hpp"
#include "../detail/cell_store.hpp"
#include "../speech/alignment_frontier.hpp"
#include "../stages/smoothing_pipeline.hpp"
#include "audiokv_stats.hpp"
#include "cache_snapshot.hpp"
#include "capacity_forecast.hpp"
#include "config_fingerprint.hpp"
#include "importance_tracker.hpp"
#include "planner.hpp"
#include "pool_manager.hpp"
#include "protection_rules.hpp"

namespace audiokv::policy {

/// @brief The state of one tiered_cache (its cells, importance, protections, pools, statistics,
/// forecast and alignment position) and the calls that manage it as a whole: reset(),
/// reserve(), prefetch(), share_frames(), snapshot() and restore().
///
/// tiered_cache derives from it and adds the decode-step calls (append, observe, plan,
/// apply); it is not used alone (its constructors are protected).
/// @tparam Pipeline the smoothing stages (see tiered_cache).
template <class Pipeline>
class tiered_cache_state {
 public:
  /// The configuration the cache was built with.
  const audiokv_config& config() const noexcept { return config_; }
  /// The smoothing pipeline, to adjust its stages' parameters between steps.
  Pipeline& pipeline() noexcept { return pipeline_; }

  /// Grows every per-cell array to `new_capacity` slots, preserving all cells, their metadata,
  /// importance, tiers, statistics and the plan generation (a plan made before stays valid).
  /// Capacity never shrinks: a request at or below capacity() is a no-op, like
  /// std::vector::reserve. This allocates and copies O(capacity): call it between decode steps,
  /// then grow the engine's K/V rows and re-reserve its eviction_plan to capacity().
  /// @throws audiokv::error naming "new_capacity" unless 0 <= new_capacity <=
  ///         max_cache_cells (nothing changes).
  void reserve(std::int32_t new_capacity) {
    types::detail::require_cell_count("tiered_cache::reserve", "new_capacity", new_capacity, 0);
    if (new_capacity <= store_.capacity()) return;
    // A moved-from cache gave its boundary slots away with its cells: new ones, sized by the
    // horizon, before anything else changes.
    if (!protection_.holds_slots()) protection_ = detail::protection_rules(config_);
    importance_.reserve(new_capacity);
    // Last: capacity() changes only once every array has grown, so a std::bad_alloc above
    // leaves the observable state as it was (arrays longer than capacity() are unused).
    store_.reserve(new_capacity);
    ++stats_.reservations;
  }

  /// Returns the cache to its just-constructed state without allocating: no cells, no position
  /// history (the next append may start at any position), speaker baselines, drift history,
  /// statistics, prefetch forecast, pending frames and alignment position as after
  /// construction. Kept: capacity() (including what reserve() added), the pipeline and its
  /// parameters, and id(); the plan generation advances, so a plan made before is stale. For
  /// reusing one cache for a new sequence.
  void reset() noexcept {
    store_.reset();
    protection_.clear();
    importance_.reset();
    stats_ = audiokv_stats{};
    forecast_ = capacity_forecast(config_.prefetch);
    frontier_ = alignment_frontier(config_.speech.frontier.filter);
    pending_frames_ = 0;
  }

  /// Holds the frame metadata (speaker, voice, flags, prior) of this cache's cells in `table`,
  /// shared by position with the other caches of the sequence attached to it, instead of per
  /// cell: the cache then keeps 10 bytes per cell of capacity (position, tier, importance,
  /// evaluation flag) instead of 23, and the table one row per frame position some attached
  /// cache holds. Everything the cache computes is bit-identical either way, and snapshots are
  /// the same bytes. The cells already cached move into the table; a cache that already shares
  /// keeps its table (a null `table` changes nothing). A copy of the cache shares the same
  /// table. Every cache of a sequence must append the same frames: append() and restore()
  /// reject a frame whose metadata differs from what the table holds at its position.
  ///
  /// Allocates (call it at admission). Afterwards append(), apply() and restore() allocate only
  /// when the cells older than the table's ring outgrow its reserve (frame_table::reserve_old);
  /// reset() and destruction release the positions. Threads: the caches attached to one table
  /// write it in append, apply, reset, restore and destruction, so while one of them runs such
  /// a call no other call of any of them may run.
  /// @throws audiokv::error naming "table" when a cached cell's metadata differs from what
  ///         `table` holds at its position; nothing changes then.
  void share_frames(std::shared_ptr<frame_table> table) {
    store_.share_frames("tiered_cache::share_frames", std::move(table));
  }
  /// The shared frame table (null while the metadata is held per cell).
  const std::shared_ptr<frame_table>& frames() const noexcept { return store_.frames(); }

  /// Version of the byte format snapshot() writes and restore() reads.
  static constexpr std::uint32_t snapshot_version =
      detail::snapshot_codec<tiered_cache_state>::version;

  /// Fingerprint of what a snapshot may be restored into: FNV-1a 64 over every
  /// audiokv_config field (floats by their bits) and the pipeline's shape (stage count, each
  /// stage's size and alignment). The stages' parameters are not part of it (they are kept by
  /// restore(), as by reset()).
  std::uint64_t config_fingerprint() const noexcept {
    return detail::config_fingerprint<Pipeline>(config_);
  }

  /// Bytes snapshot() writes now: 48 header bytes, 23 per cell, 4 per speaker, 130 of other
  /// state, 4 per phoneme boundary within the horizon and an 8-byte checksum.
  std::size_t snapshot_size() const noexcept {
    return detail::snapshot_codec<tiered_cache_state>::size(*this);
  }

  /// Writes the cache's mutable state into out[0, snapshot_size()), for preemption or swap.
  ///
  /// Format: version snapshot_version, described at detail::snapshot_codec: a header (magic,
  /// version, size, config_fingerprint(), counts), the cells, importance, baselines, drift
  /// state, statistics, forecast, alignment position, pending_frames(), the phoneme boundaries
  /// within the horizon (they protect their neighbourhoods whether or not their frames are
  /// cached) and an FNV-1a 64 checksum. The pipeline's parameters and id() are not written.
  /// Allocates nothing. Threads: const, so it may run beside plan() and other readers.
  /// @throws audiokv::error naming "out.size()" when it is below snapshot_size() (nothing is
  ///         written).
  void snapshot(span<std::byte> out) const {
    const std::size_t total = snapshot_size();
    AUDIOKV_REQUIRE(
        out.size() >= total, "tiered_cache::snapshot", "out.size()", out.size(),
        ::audiokv::detail::describe("must be at least snapshot_size() = ", total, " bytes")
            .c_str());
    detail::snapshot_codec<tiered_cache_state>::write(*this, out);
  }

  /// Replaces the cache's state by a snapshot() of a cache with the same configuration and
  /// pipeline shape (config_fingerprint()) and the same capacity(), so that every later call
  /// behaves bit for bit as it would have on the cache that wrote it.
  ///
  /// Checks everything before changing anything, in order: the length against the header,
  /// magic, version, the total size, counts (num_cells <= capacity), the checksum, the
  /// fingerprint, the capacity, then every value (a generation below 2^63, so the plan
  /// generation cannot wrap and make a stale plan current; positions strictly ascending, speakers
  /// in [0, num_speakers), voice in [0, 1], finite priors, importance and baselines, valid tiers,
  /// 0/1 flags, sinks that fit the emergency pool, non-negative counters and estimates).
  /// Kept: id(), the pipeline and its parameters, capacity(). The plan generation becomes
  /// greater than both the cache's and the snapshot's, so every plan made before is stale.
  /// Allocates nothing. Threads: a mutating call (exclusive access).
  /// @throws audiokv::error naming "snapshot", whose message says what is wrong ("truncated:
  ///         812 of 4096 bytes", "checksum mismatch", "config fingerprint differs", ...); the
  ///         cache is then unchanged.
  void restore(span<const std::byte> in) {
    detail::snapshot_codec<tiered_cache_state>::read(*this, "tiered_cache::restore", in);
  }

  /// Prefetch: ends one decode step of the forecast and reserves capacity ahead of need.
  ///
  /// The frames append()ed since the previous call count as one step's arrivals
  /// (capacity_forecast::observe_step). When config().prefetch.enabled and capacity() is below
  /// the forecast for the next prefetch.horizon_steps steps, computed with the trigger as the
  /// ceiling (an engine that plans and applies whenever wants_eviction() holds at most
  /// trigger_cells() - 1 cells after a step), it reserve()s the forecast rounded up to
  /// prefetch.granularity, at most max_cache_cells. With the switch off it does nothing.
  ///
  /// Call site: once per decode step, after the step's work (append, observe, plan/apply), off
  /// the latency-critical path, e.g. while the engine waits for the next audio chunk. It
  /// allocates exactly when it returns > 0; the engine then grows its K/V rows and its
  /// eviction_plan to capacity() there, so the steps themselves never allocate.
  /// @return cells added to capacity() (0: switch off, or the reservation already suffices).
  std::int32_t prefetch() {
    if (!config_.prefetch.enabled) return 0;
    // On a copy, so a std::bad_alloc in reserve() leaves the forecast and the count unchanged.
    capacity_forecast next = forecast_;
    next.observe_step(static_cast<std::int32_t>(
        std::min<std::int64_t>(pending_frames_, core::max_forecast_cells)));
    const std::int32_t settle = pools_.trigger_cells() - 1;
    const std::int32_t before = store_.capacity();
    if (next.needs_reserve(store_.size(), before, settle)) {
      reserve(std::min(next.cells_to_reserve(store_.size(), settle), max_cache_cells));
    }
    forecast_ = next;
    pending_frames_ = 0;
    return store_.capacity() - before;
  }

  /// Prefetch estimates (rate and burst peak of frames per prefetch() step).
  const capacity_forecast& forecast() const noexcept { return forecast_; }
  /// Frames appended since the last prefetch() (counted only when prefetch is enabled).
  std::int64_t pending_frames() const noexcept { return pending_frames_; }

  /// Counters since construction (or reset()).
  const audiokv_stats& stats() const noexcept { return stats_; }

 protected:
  /// Validates `config` and sizes every array for config.reserved_capacity() cells.
  /// @throws audiokv::error naming the first invalid field of `config`.
  tiered_cache_state(const audiokv_config& config, Pipeline pipeline)
      : config_((config.validate(), config)),
        pipeline_(std::move(pipeline)),
        store_(config.reserved_capacity(), config.num_speakers),
        importance_(config, config.reserved_capacity()),
        protection_(config),
        pools_(config),
        forecast_(config.prefetch),
        frontier_(config.speech.frontier.filter) {}
  /// A copy is another cache (a new id()).
  tiered_cache_state(const tiered_cache_state&) = default;
  /// Copy assignment (a new id()).
  tiered_cache_state& operator=(const tiered_cache_state&) = default;
  /// Takes the state of `other`, which is left as tiered_cache's move constructor says.
  tiered_cache_state(tiered_cache_state&& other) noexcept(
      std::is_nothrow_move_constructible_v<Pipeline>)
      : config_(other.config_),
        pipeline_(std::move(other.pipeline_)),
        store_(std::move(other.store_)),
        importance_(std::move(other.importance_)),
        protection_(std::move(other.protection_)),
        pools_(other.pools_),
        stats_(other.stats_),
        forecast_(other.forecast_),
        frontier_(other.frontier_),
        pending_frames_(other.pending_frames_) {
    other.reset();
  }
  /// Move assignment, with the moved-from state of the move constructor.
  tiered_cache_state& operator=(tiered_cache_state&& other) noexcept(
      std::is_nothrow_move_assignable_v<Pipeline>) {
    if (this != &other) {
      pipeline_ = std::move(other.pipeline_);  // first: the one member whose move may throw
      config_ = other.config_;
      store_ = std::move(other.store_);
      importance_ = std::move(other.importance_);
      protection_ = std::move(other.protection_);
      pools_ = other.pools_;
      stats_ = other.stats_;
      forecast_ = other.forecast_;
      frontier_ = other.frontier_;
      pending_frames_ = other.pending_frames_;
      other.reset();
    }
    return *this;
  }
  ~tiered_cache_state() = default;

  /// The planner over the current state (read-only on it).
  detail::planner<Pipeline> make_planner() const noexcept {
    return detail::planner<Pipeline>(config_, pipeline_, store_, importance_, protection_, pools_,
                                     frontier_);
  }

  audiokv_config config_;                  ///< the validated configuration
  Pipeline pipeline_;                      ///< the smoothing stages
  detail::cell_store store_;               ///< cells: positions, metadata, tiers, generation
  detail::importance_tracker importance_;  ///< importance, evaluation flags, speaker baselines
  detail::protection_rules protection_;    ///< recent window, sinks, phoneme boundaries
  detail::pool_manager pools_;             ///< pool sizes, trigger, tier transitions
  audiokv_stats stats_;                    ///< counters since construction or reset()
  capacity_forecast forecast_;             ///< frame-rate and burst estimates
  alignment_frontier frontier_;            ///< given or estimated alignment position
  std::int64_t pending_frames_ = 0;        ///< frames appended since the last prefetch()

 private:
  friend detail::snapshot_codec<tiered_cache_state>;
};

}  // namespace audiokv::policy
