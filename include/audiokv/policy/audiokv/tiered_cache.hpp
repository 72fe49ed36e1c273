// SPDX-License-Identifier: Apache-2.0
/// @file
/// The AudioKV policy: tiered pools, importance EMA, a compile-time smoothing pipeline, the
/// utilisation trigger and entropy-driven ratio, selection with promotion, plans with a stable
/// move map, the speech rules and rate-based prefetch. The class composes one part per job:
/// importance_tracker (importance, evaluation flags, speaker baselines, drift), protection_rules,
/// pool_manager (tiers) and planner (scoring, selection, plan building).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "../../core/gqa.hpp"
#include "../../core/prefetch.hpp"
#include "../../detail/describe.hpp"
#include "../../error.hpp"
#include "../../span.hpp"
#include "../../types/eviction_plan.hpp"
#include "../../types/frame.hpp"
#include "../../types/pool_split.hpp"
#include "../alignment_frontier.hpp"
#include "../audiokv_config.hpp"
#include "../capacity_forecast.hpp"
#include "../detail/cell_store.hpp"
#include "../eviction_policy.hpp"
#include "../smoothing_pipeline.hpp"
#include "importance_tracker.hpp"
#include "planner.hpp"
#include "pool_manager.hpp"
#include "protection_rules.hpp"

namespace audiokv {

/// @brief Counters of what the cache has done, for monitoring and tests.
struct audiokv_stats {
  std::int64_t steps = 0;                 ///< observe() and observe_group() calls
  std::int64_t evictions = 0;             ///< applied plans that evicted at least one cell
  std::int64_t cells_evicted = 0;         ///< cells evicted by applied plans
  std::int64_t promotions = 0;            ///< buffer -> base
  std::int64_t demotions = 0;             ///< base -> buffer (replaced by a better candidate)
  std::int64_t emergency_evictions = 0;   ///< emergency-pool overflow, oldest first
  std::int64_t protections_released = 0;  ///< boundary protections released to meet a target
  std::int64_t drift_resets = 0;          ///< speaker baselines reset on drift
  std::int64_t reservations = 0;          ///< reserve() calls that grew the capacity
};

/// @brief One AudioKV-managed (sequence, layer, KV head) cache.
/// @tparam Pipeline the sequence/group smoothing stages, e.g. default_pipeline =
///         smoothing_pipeline<median_stage<5>, trend_stage, speaker_norm_stage>.
///
/// Memory: every array is sized from config.capacity in the constructor and grows only in
/// reserve() (which prefetch() calls when config.prefetch.enabled); append, observe, plan (into
/// a plan reserved for capacity()) and apply never allocate.
///
/// Threads: every const member only reads the cache. plan() and plan_to() keep their working
/// memory in the eviction_plan they fill, so several threads may plan at once on one cache,
/// each into its own plan, while others call const readers (num_cells, is_protected, tiers,
/// ...); this holds as long as each stage of Pipeline is itself read-only in apply() (every
/// stage of policy/ is, except spectral_lowpass_stage, whose FFT buffer lives in the stage).
/// Mutating calls (append, observe, observe_group, apply, reserve, prefetch) need exclusive
/// access.
template <class Pipeline = default_pipeline>
class tiered_cache final : public eviction_policy {
 public:
  using pipeline_type = Pipeline;  ///< the smoothing stages

  /// Validates `config` and sizes every array for config.reserved_capacity() cells (the only
  /// allocation besides reserve()).
  /// @throws audiokv::error naming the first invalid field of `config` ("config.budget", ...).
  explicit tiered_cache(const audiokv_config& config, Pipeline pipeline = Pipeline{})
      : config_((config.validate(), config)),
        pipeline_(std::move(pipeline)),
        store_(config.reserved_capacity(), config.num_speakers),
        importance_(config, config.reserved_capacity()),
        protection_(config),
        pools_(config),
        forecast_(config.prefetch),
        frontier_(config.speech.frontier.filter) {}

  // The span forms of append() and observe() (checked lengths) come from eviction_policy.
  using eviction_policy::append;
  using eviction_policy::observe;

  const char* name() const noexcept override { return "audiokv"; }
  /// The configuration the cache was built with.
  const audiokv_config& config() const noexcept { return config_; }
  /// The smoothing pipeline, to adjust its stages' parameters between steps.
  Pipeline& pipeline() noexcept { return pipeline_; }
  /// Unique id stamped on this cache's plans; a copy of the cache gets a new one.
  std::uint64_t id() const noexcept override { return store_.id(); }

  /// Appends `count` frames (`frames` points to count of them); see eviction_policy::append.
  void append(const frame_meta* frames, std::int32_t count) override {
    store_.validate_append("tiered_cache::append", frames, count);
    std::int32_t sinks = count_flag(frame_flag_sink);
    for (std::int32_t i = 0; i < count; ++i) {
      if (frames[i].flags & frame_flag_sink) ++sinks;
      AUDIOKV_REQUIRE(sinks <= pools_.emergency_cells(), "tiered_cache::append",
                      detail::indexed("frames", i) + ".flags", static_cast<int>(frames[i].flags),
                      "one sink too many: sinks must fit in the emergency pool");
    }
    const std::int32_t first = store_.size();
    store_.append(frames, count, detail::pool_manager::entry_tier);
    importance_.on_append(first, store_.size());
    if (config_.prefetch.enabled) pending_frames_ += count;
  }

  /// One step's attention over the cached cells; `num_cells` is the length read and must equal
  /// num_cells() (checked first).
  /// Checks, in order and before changing anything: num_cells, the pointer, then each score (a
  /// NaN, infinity or negative value throws naming "attention[cell]").
  /// @throws audiokv::error naming "num_cells", "attention" or "attention[cell]"; the cache is
  ///         unchanged.
  void observe(const float* attention, std::int32_t num_cells) override {
    // The branch-free check passes every valid row; the full validator then names the bad one.
    if (num_cells != store_.size() || (num_cells > 0 && attention == nullptr) ||
        !detail::all_finite_non_negative(attention, num_cells)) {
      store_.validate_scores("tiered_cache::observe", attention, num_cells);
    }
    if (importance_.observe(attention, num_cells, store_.speaker())) ++stats_.drift_resets;
    ++stats_.steps;
  }

  /// Observes the attention of one GQA group, [group_size, num_cells] row-major, reduced
  /// per cell by `mode` into the KV head's score. Uses no K/V and allocates nothing.
  ///
  /// Checks, in order and before reading any score: group_size >= 1, num_cells == num_cells(),
  /// attention.size() == group_size * num_cells; then each score (a NaN, infinity or negative
  /// value throws naming "attention[row][cell]").
  /// @throws audiokv::error naming "group_size", "num_cells", "attention.size()", "attention" or
  ///         "attention[row][cell]"; the cache is unchanged.
  void observe_group(span<const float> attention, std::int32_t group_size, std::int32_t num_cells,
                     gqa_reduce mode = gqa_reduce::mean) {
    const std::int64_t total = static_cast<std::int64_t>(group_size) * num_cells;
    if (group_size < 1 || num_cells != store_.size() ||
        attention.size() != static_cast<std::size_t>(total) ||
        (total > 0 && attention.data() == nullptr) ||
        !detail::all_finite_non_negative(attention.data(), total)) {
      store_.validate_group("tiered_cache::observe_group", attention, group_size, num_cells);
    }
    if (importance_.observe_group(attention.data(), group_size, num_cells, mode,
                                  store_.speaker())) {
      ++stats_.drift_resets;
    }
    ++stats_.steps;
  }

  /// The unchecked-length form: reads exactly group_size * num_cells floats from `attention`,
  /// which the caller guarantees it holds (the pointer carries no length to check). Prefer the
  /// span form above, which a std::vector or an array converts to.
  void observe_group(const float* attention, std::int32_t group_size, std::int32_t num_cells,
                     gqa_reduce mode = gqa_reduce::mean) {
    observe_group(detail::group_rows(attention, group_size, num_cells), group_size, num_cells,
                  mode);
  }

  bool wants_eviction() const noexcept override { return store_.size() >= pools_.trigger_cells(); }

  /// The eviction the trigger asks for, into `out` (read-only on the cache; the working memory
  /// is out.scratch, so reserve `out` for capacity() to plan without allocating).
  void plan(eviction_plan& out) const override {
    if (!wants_eviction()) {
      store_.build_empty_plan(out);
      return;
    }
    make_planner().plan_down_to(pools_.trigger_cells() - 1, /*use_ratio=*/true, out);
  }

  /// An eviction down to exactly min(num_cells(), target_cells) cells.
  /// @throws audiokv::error naming "target_cells" when it is negative or below the cells no
  ///         plan may evict (the message gives both counts).
  void plan_to(std::int32_t target_cells, eviction_plan& out) const override {
    AUDIOKV_REQUIRE(target_cells >= 0, "tiered_cache::plan_to", "target_cells", target_cells,
                    "must be >= 0");
    if (target_cells >= store_.size()) {
      store_.build_empty_plan(out);
      return;
    }
    make_planner().plan_down_to(target_cells, /*use_ratio=*/false, out);
  }

  void apply(const eviction_plan& plan) override {
    store_.validate_plan("tiered_cache::apply", plan);
    std::int64_t emergency_evicted = 0;
    for (const std::int32_t slot : plan.evict) {
      if (store_.tier()[slot] == pool_tier::emergency) ++emergency_evicted;
    }
    importance_.compact(plan);
    store_.apply(plan);
    if (!plan.evict.empty()) ++stats_.evictions;
    stats_.cells_evicted += static_cast<std::int64_t>(plan.evict.size());
    stats_.promotions += static_cast<std::int64_t>(plan.promote.size());
    stats_.demotions += static_cast<std::int64_t>(plan.demote.size());
    stats_.emergency_evictions += emergency_evicted;
    stats_.protections_released += plan.protections_released;
  }

  std::int32_t num_cells() const noexcept override { return store_.size(); }
  std::int32_t budget() const noexcept override { return config_.budget; }
  std::int32_t capacity() const noexcept override { return store_.capacity(); }
  const std::int32_t* positions() const noexcept override { return store_.pos(); }

  /// Grows every per-cell array to `new_capacity` slots, preserving all cells, their metadata,
  /// importance, tiers, statistics and the plan generation (a plan made before stays valid).
  /// Capacity never shrinks: a request at or below capacity() is a no-op, like
  /// std::vector::reserve. This allocates and copies O(capacity): call it between decode steps,
  /// then grow the engine's K/V rows and re-reserve its eviction_plan to capacity().
  /// @throws audiokv::error when new_capacity < 0 (nothing changes).
  void reserve(std::int32_t new_capacity) {
    AUDIOKV_REQUIRE(new_capacity >= 0, "tiered_cache::reserve", "new_capacity", new_capacity,
                    "must be >= 0");
    if (new_capacity <= capacity()) return;
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
    importance_.reset();
    stats_ = audiokv_stats{};
    forecast_ = capacity_forecast(config_.prefetch);
    frontier_ = alignment_frontier(config_.speech.frontier.filter);
    pending_frames_ = 0;
  }

  /// Prefetch: ends one decode step of the forecast and reserves capacity ahead of need.
  ///
  /// The frames append()ed since the previous call count as one step's arrivals
  /// (capacity_forecast::observe_step). When config().prefetch.enabled and capacity() is below
  /// the forecast for the next prefetch.horizon_steps steps, computed with the trigger as the
  /// ceiling (an engine that plans and applies whenever wants_eviction() holds at most
  /// trigger_cells() - 1 cells after a step), it reserve()s the forecast rounded up to
  /// prefetch.granularity. With the switch off it does nothing.
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
    const std::int32_t before = capacity();
    if (next.needs_reserve(num_cells(), before, settle)) {
      reserve(next.cells_to_reserve(num_cells(), settle));
    }
    forecast_ = next;
    pending_frames_ = 0;
    return capacity() - before;
  }

  /// Prefetch estimates (rate and burst peak of frames per prefetch() step).
  const capacity_forecast& forecast() const noexcept { return forecast_; }
  /// Frames appended since the last prefetch() (counted only when prefetch is enabled).
  std::int64_t pending_frames() const noexcept { return pending_frames_; }

  /// [num_cells()] importance I of each cell (its attention EMA). The final scores a plan ranked
  /// are in its eviction_plan::scores.
  const float* importance() const noexcept { return importance_.importance(); }
  /// The decoder's current alignment position (frame position it transcribes), from the engine
  /// (e.g. the model's alignment heads); it replaces the estimate from observed attention.
  /// Used by the alignment-frontier rule (config.speech.frontier).
  void set_alignment_position(std::int32_t pos) noexcept { frontier_.set_position(pos); }
  /// The engine's alignment position, if given (else plans estimate it, config.speech.frontier).
  const alignment_frontier& frontier() const noexcept { return frontier_; }
  /// [num_cells()] pool of each cell.
  const pool_tier* tiers() const noexcept override { return store_.tier(); }
  /// [num_speakers] running mean importance per speaker.
  const float* speaker_baselines() const noexcept { return importance_.baselines(); }
  /// Cells currently in `tier`.
  std::int32_t pool_size(pool_tier tier) const noexcept {
    return detail::pool_manager::count(store_, tier);
  }
  /// Nominal pool sizes from the split.
  std::int32_t base_pool_cells() const noexcept { return pools_.base_cells(); }
  /// Nominal emergency-pool size from the split.
  std::int32_t emergency_pool_cells() const noexcept { return pools_.emergency_cells(); }
  /// Cells at which wants_eviction() turns true (config.trigger of the budget).
  std::int32_t trigger_cells() const noexcept { return pools_.trigger_cells(); }
  /// Counters since construction (or reset()).
  const audiokv_stats& stats() const noexcept { return stats_; }

  /// True when a plan may evict cell `slot` only as a last resort: recent window or sink
  /// (never), emergency pool (only on its own overflow), or a buffer cell near a phoneme
  /// boundary (only when the target cannot be met otherwise). Read-only: O(log n + radius)
  /// from the positions, no scratch, so it may run while other threads plan.
  /// @throws audiokv::error naming "slot" unless 0 <= slot < num_cells().
  bool is_protected(std::int32_t slot) const {
    AUDIOKV_REQUIRE(
        slot >= 0 && slot < store_.size(), "tiered_cache::is_protected", "slot", slot,
        detail::describe("must be in [0, num_cells()) = [0, ", store_.size(), ")").c_str());
    const pool_tier tier = store_.tier()[slot];
    const detail::protection_level level = protection_.level_of(store_, slot);
    return level == detail::protect_always || tier == pool_tier::emergency ||
           (level == detail::protect_boundary && tier == pool_tier::buffer);
  }

 private:
  std::int32_t count_flag(std::uint8_t flag) const {
    std::int32_t count = 0;
    for (std::int32_t j = 0; j < store_.size(); ++j) count += (store_.flags()[j] & flag) != 0;
    return count;
  }

  detail::planner<Pipeline> make_planner() const noexcept {
    return detail::planner<Pipeline>(config_, pipeline_, store_, importance_, protection_, pools_,
                                     frontier_);
  }

  audiokv_config config_;
  Pipeline pipeline_;
  detail::cell_store store_;
  detail::importance_tracker importance_;  // importance, evaluation flags, speaker baselines
  detail::protection_rules protection_;
  detail::pool_manager pools_;  // pool sizes, trigger, tier transitions
  audiokv_stats stats_;
  capacity_forecast forecast_;       // frame-rate and burst estimates
  alignment_frontier frontier_;      // given or estimated alignment position
  std::int64_t pending_frames_ = 0;  // frames appended since the last prefetch()
};

}  // namespace audiokv
