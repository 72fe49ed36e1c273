// SPDX-License-Identifier: Apache-2.0
/// @file
/// The AudioKV policy: tiered pools, importance EMA, a compile-time smoothing pipeline, the
/// utilisation trigger and entropy-driven ratio, selection with promotion, plans with a stable
/// move map, the speech rules and rate-based prefetch. The class composes one part per job:
/// importance_tracker (importance, evaluation flags, speaker baselines, drift), protection_rules,
/// pool_manager (tiers) and planner (scoring, selection, plan building).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "../../core/gqa.hpp"
#include "../../core/importance.hpp"
#include "../../core/prefetch.hpp"
#include "../../detail/describe.hpp"
#include "../../error.hpp"
#include "../../span.hpp"
#include "../../types/cache_limits.hpp"
#include "../../types/eviction_plan.hpp"
#include "../../types/frame.hpp"
#include "../../types/frame_table.hpp"
#include "../../types/pool_split.hpp"
#include "../audiokv_config.hpp"
#include "../detail/cell_store.hpp"
#include "../eviction_policy.hpp"
#include "../speech/alignment_frontier.hpp"
#include "../stages/smoothing_pipeline.hpp"
#include "capacity_forecast.hpp"
#include "importance_tracker.hpp"
#include "planner.hpp"
#include "pool_manager.hpp"
#include "protection_rules.hpp"

namespace audiokv::policy {

/// @brief Counters of what the cache has done, for monitoring and tests.
struct audiokv_stats {
  std::int64_t steps = 0;  ///< observe(), observe_group() calls and caches observe_heads() observed
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
/// a plan reserved for capacity()) and apply never allocate (with a shared frame table, see
/// share_frames() for when they may).
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

  /// A copy is another cache with the same cells and history (and a new id()); it shares a
  /// shared frame table with the original.
  tiered_cache(const tiered_cache&) = default;
  /// Copy assignment (a new id(), see the copy constructor).
  tiered_cache& operator=(const tiered_cache&) = default;

  /// @brief Moves the cache: the target takes the cells, the history and id() (plans made
  /// before stay valid on it).
  ///
  /// The moved-from cache is valid and empty, like a moved-from std::vector: no cells, no
  /// memory, capacity() 0, a new id(), its statistics, forecast and alignment position as
  /// after reset(), no shared frame table, the same config() and pipeline. Every call works on
  /// it and sees a cache of capacity 0: readers report zero cells (speaker_baselines() is
  /// null), observe() takes 0 cells, plan() and plan_to() give empty plans, snapshot() writes an
  /// empty cache, and append() of any frame is rejected ("count ... exceeds the capacity 0").
  /// reserve() gives it slots again, as a new cache of that capacity; so does assigning a
  /// cache to it.
  tiered_cache(tiered_cache&& other) noexcept(std::is_nothrow_move_constructible_v<Pipeline>)
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
  tiered_cache& operator=(tiered_cache&& other) noexcept(
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
  ~tiered_cache() override = default;

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
                      ::audiokv::detail::indexed("frames", i) + ".flags",
                      static_cast<int>(frames[i].flags),
                      "one sink too many: sinks must fit in the emergency pool");
    }
    const std::int32_t first = store_.size();
    store_.append(frames, count, detail::pool_manager::entry_tier);
    protection_.record(frames, count);
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
    if (importance_.observe(attention, num_cells, store_)) ++stats_.drift_resets;
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
    if (importance_.observe_group(attention.data(), group_size, num_cells, mode, store_)) {
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

  /// @brief observe() of several caches at once, e.g. the KV heads of one layer: afterwards
  /// caches[i] is what caches[i]->observe(attention[i].data(), attention[i].size()) leaves,
  /// bit for bit (importance, evaluation flags, baselines, drift state, stats).
  ///
  /// Up to core::trend_lanes caches run together in one pass over their cells: the speaker
  /// sum of each single-speaker cache, a chain of dependent double additions in one cache,
  /// advances side by side with the others' (a cache with several speakers keeps its own
  /// loop). Allocates nothing. Needs exclusive access to every cache in `caches`; the scores
  /// are only read.
  ///
  /// Checks, before changing any cache: attention.size() == caches.size(); each caches[i] not
  /// null and not an earlier entry; then for each i in order attention[i].size() ==
  /// caches[i]->num_cells(), the pointer, and each score (a NaN, infinity or negative value
  /// throws naming "attention[i][cell]").
  /// @throws audiokv::error naming "attention.size()", "caches[i]", "attention[i].size()",
  ///         "attention[i]" or "attention[i][cell]"; every cache is then unchanged.
  static void observe_heads(span<tiered_cache* const> caches,
                            span<const span<const float>> attention) {
    constexpr const char* where = "tiered_cache::observe_heads";
    AUDIOKV_REQUIRE(
        attention.size() == caches.size(), where, "attention.size()", attention.size(),
        ::audiokv::detail::describe("must equal caches.size() (", caches.size(), ")").c_str());
    for (std::size_t i = 0; i < caches.size(); ++i) {
      const auto name = [i](const char* base) {
        return ::audiokv::detail::indexed(base, static_cast<long long>(i));
      };
      AUDIOKV_REQUIRE(caches[i] != nullptr, where, name("caches"), "nullptr",
                      "must point to a cache");
      for (std::size_t j = 0; j < i; ++j) {
        AUDIOKV_REQUIRE(caches[j] != caches[i], where, name("caches"), "a repeated cache",
                        ::audiokv::detail::describe("must differ from caches[", j, "]").c_str());
      }
    }
    for (std::size_t i = 0; i < caches.size(); ++i) {
      const float* row = attention[i].data();
      const auto size = attention[i].size();
      const std::int32_t cells = caches[i]->store_.size();
      if (size == static_cast<std::size_t>(cells) && (cells == 0 || row != nullptr) &&
          detail::all_finite_non_negative(row, cells)) {
        continue;
      }
      // The branch-free check above passes every valid row; this names the bad argument.
      const auto name = ::audiokv::detail::indexed("attention", static_cast<long long>(i));
      AUDIOKV_REQUIRE(
          size == static_cast<std::size_t>(cells), where, name + ".size()", size,
          ::audiokv::detail::describe("must equal caches[", i, "]->num_cells() (", cells, ")")
              .c_str());
      AUDIOKV_REQUIRE(cells == 0 || row != nullptr, where, name, "nullptr",
                      "must point to the scores");
      for (std::int32_t j = 0; j < cells; ++j) {
        AUDIOKV_REQUIRE(core::is_valid_attention(row[j]), where,
                        ::audiokv::detail::indexed(name.c_str(), j), row[j],
                        "must be finite and >= 0");
      }
    }
    constexpr std::int32_t group = core::trend_lanes;  // caches per pass
    detail::importance_tracker* trackers[group] = {};
    const detail::cell_store* stores[group] = {};
    const float* rows[group] = {};
    std::int32_t lengths[group] = {};
    tiered_cache* owners[group] = {};
    bool resets[group] = {};
    std::int32_t count = 0;
    const auto flush = [&] {
      detail::importance_tracker::observe_lanes(trackers, rows, lengths, stores, count, resets);
      for (std::int32_t a = 0; a < count; ++a) {
        if (resets[a]) ++owners[a]->stats_.drift_resets;
        ++owners[a]->stats_.steps;
      }
      count = 0;
    };
    for (std::size_t i = 0; i < caches.size(); ++i) {
      tiered_cache& cache = *caches[i];
      trackers[count] = &cache.importance_;
      stores[count] = &cache.store_;
      rows[count] = attention[i].data();
      lengths[count] = cache.store_.size();
      owners[count] = &cache;
      if (++count == group) flush();
    }
    if (count > 0) flush();
  }

  bool wants_eviction() const noexcept override { return store_.size() >= pools_.trigger_cells(); }

  /// The eviction the trigger asks for, into `out` (read-only on the cache; the working memory
  /// is out.scratch, so reserve `out` for capacity() to plan without allocating). It always
  /// gets back below the trigger: the configuration keeps the cells no plan may evict below it
  /// (audiokv_config::recent_window_frames()), so it throws nothing but std::bad_alloc from an
  /// unreserved plan.
  void plan(eviction_plan& out) const override {
    if (!wants_eviction()) {
      store_.build_empty_plan(out);
      return;
    }
    make_planner().plan_down_to(pools_.trigger_cells() - 1, /*use_ratio=*/true, out);
  }

  /// @brief plan() of several caches at once, e.g. the KV heads of one layer: plans[i] is what
  /// caches[i]->plan(plans[i]) writes, bit for bit.
  ///
  /// The caches at their trigger run their smoothing pipelines together, up to
  /// core::trend_lanes at a time: the trend stage's recurrence, latency-bound in one cache,
  /// then runs several caches side by side. Read-only on the caches; with each plan reserved
  /// for its cache's capacity() it allocates nothing. A cache may appear more than once.
  /// @param caches the caches to plan (none null).
  /// @param plans one plan per cache, same length.
  /// @throws audiokv::error naming "plans.size()" when it differs from caches.size(), or
  ///         "caches[i]" for a null entry, before any plan is written.
  static void plan_heads(span<const tiered_cache* const> caches, span<eviction_plan> plans) {
    constexpr const char* where = "tiered_cache::plan_heads";
    AUDIOKV_REQUIRE(
        plans.size() == caches.size(), where, "plans.size()", plans.size(),
        ::audiokv::detail::describe("must equal caches.size() (", caches.size(), ")").c_str());
    for (std::size_t i = 0; i < caches.size(); ++i) {
      AUDIOKV_REQUIRE(caches[i] != nullptr, where,
                      ::audiokv::detail::indexed("caches", static_cast<long long>(i)), "nullptr",
                      "must point to a cache");
    }
    using planner_type = detail::planner<Pipeline>;
    constexpr std::int32_t group = core::trend_lanes;  // caches per planning group
    std::optional<planner_type> planners[group];
    const planner_type* heads[group] = {};
    std::int32_t targets[group] = {};
    eviction_plan* outs[group] = {};
    std::int32_t rows = 0;
    const auto flush = [&] {
      planner_type::plan_heads_down_to(heads, targets, /*use_ratio=*/true, outs, rows);
      rows = 0;
    };
    for (std::size_t i = 0; i < caches.size(); ++i) {
      const tiered_cache& cache = *caches[i];
      if (!cache.wants_eviction()) {
        cache.store_.build_empty_plan(plans[i]);
        continue;
      }
      planners[rows].emplace(cache.make_planner());
      heads[rows] = &*planners[rows];
      targets[rows] = cache.pools_.trigger_cells() - 1;
      outs[rows] = &plans[i];
      if (++rows == group) flush();
    }
    if (rows > 0) flush();
  }

  /// An eviction down to min(num_cells(), target_cells) cells, or, when the target lies below
  /// protected_cells() (the recent window, the sinks and the emergency pool up to its nominal
  /// size, which no plan evicts), down to protected_cells(): out.n_kv_after says where the
  /// plan ends, and protected tokens stay. Boundary protections are released as needed
  /// (out.protections_released). A streaming host that makes room for a chunk larger than its
  /// budget allows thus keeps the protected cells instead of failing.
  /// @throws audiokv::error naming "target_cells" when it is negative.
  void plan_to(std::int32_t target_cells, eviction_plan& out) const override {
    AUDIOKV_REQUIRE(target_cells >= 0, "tiered_cache::plan_to", "target_cells", target_cells,
                    "must be >= 0");
    if (target_cells >= store_.size()) {
      store_.build_empty_plan(out);
      return;
    }
    make_planner().plan_down_to(target_cells, /*use_ratio=*/false, out);
  }

  /// The plan evicting exactly the marked cells (an engine's or a wrapper's own selection):
  /// no promotion, no demotion, no protection; kept cells keep their pools.
  /// @throws audiokv::error naming "evict_mask.size()" unless it equals num_cells().
  void plan_evicting(span<const std::uint8_t> evict_mask, eviction_plan& out) const override {
    AUDIOKV_REQUIRE(
        evict_mask.size() == static_cast<std::size_t>(store_.size()), "tiered_cache::plan_evicting",
        "evict_mask.size()", evict_mask.size(),
        ::audiokv::detail::describe("must equal num_cells() = ", store_.size()).c_str());
    std::uint8_t* mask = store_.clear_evict_mask(out);
    for (std::int32_t j = 0; j < store_.size(); ++j) mask[j] = evict_mask[j] != 0;
    store_.build_plan(out);
    out.scores.clear();
    out.ratio = 0.0f;
    out.normalized_entropy = 1.0f;
  }

  void apply(const eviction_plan& plan) override {
    store_.validate_plan("tiered_cache::apply", plan);
    std::int64_t emergency_evicted = 0;
    for (const std::int32_t slot : plan.evict) {
      emergency_evicted += store_.tier()[slot] == pool_tier::emergency ? 1 : 0;
    }
    store_.apply_and_move(plan, importance_.cell_mover());
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
  /// @throws audiokv::error naming "new_capacity" unless 0 <= new_capacity <=
  ///         max_cache_cells (nothing changes).
  void reserve(std::int32_t new_capacity) {
    types::detail::require_cell_count("tiered_cache::reserve", "new_capacity", new_capacity, 0);
    if (new_capacity <= capacity()) return;
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
  static constexpr std::uint32_t snapshot_version = 2;

  /// Fingerprint of what a snapshot may be restored into: FNV-1a 64 over every
  /// audiokv_config field (floats by their bits) and the pipeline's shape (stage count, each
  /// stage's size and alignment). The stages' parameters are not part of it (they are kept by
  /// restore(), as by reset()).
  std::uint64_t config_fingerprint() const noexcept {
    std::byte buf[256];
    detail::snapshot_writer w(buf);
    const audiokv_config& c = config_;
    w.i32(c.budget);
    w.i32(c.capacity);
    w.f32(c.split.base);
    w.f32(c.split.buffer);
    w.f32(c.split.emergency);
    w.f32(c.trigger);
    w.f32(c.alpha);
    w.u8(c.neighbour_prior ? 1 : 0);
    w.f32(c.evaluation_share);
    w.f32(c.base_rate);
    w.f32(c.lambda);
    w.f32(c.voice_weight);
    w.i32(c.boundary_radius);
    w.f32(c.boundary_horizon_ms);
    w.f32(c.min_retention_ms);
    w.f32(c.frame_ms);
    w.i32(c.num_speakers);
    w.f32(c.baseline_rate);
    w.i32(c.drift_window);
    w.f32(c.drift_factor);
    w.u8(static_cast<std::uint8_t>(c.prior));
    w.u8(c.prefetch.enabled ? 1 : 0);
    w.f32(c.prefetch.beta);
    w.f32(c.prefetch.decay);
    w.i32(c.prefetch.horizon_steps);
    w.f32(c.prefetch.margin);
    w.i32(c.prefetch.min_burst_frames);
    w.i32(c.prefetch.granularity);
    w.u8(c.speech.sinks.enabled ? 1 : 0);
    w.i32(c.speech.sinks.first);
    w.i32(c.speech.sinks.observed);
    w.f32(c.speech.sinks.max_share);
    w.u8(c.speech.coverage.enabled ? 1 : 0);
    w.f32(c.speech.coverage.segment_ms);
    w.f32(c.speech.coverage.share);
    w.f32(c.speech.coverage.silence_weight);
    w.f32(c.speech.coverage.centre_band);
    w.i32(c.speech.coverage.segment_cells);
    w.u8(c.speech.frontier.enabled ? 1 : 0);
    w.u8(c.speech.frontier.estimate ? 1 : 0);
    w.i32(c.speech.frontier.filter);
    w.f32(c.speech.frontier.lookback_ms);
    w.f32(c.speech.frontier.past_density);
    w.f32(c.speech.frontier.past_decay_ms);
    w.f32(c.speech.frontier.past_decay_floor);
    w.f32(c.speech.frontier.frontier_density);
    w.u8(c.shrink_recent_window ? 1 : 0);
    w.u64(sizeof(Pipeline));
    w.u64(alignof(Pipeline));
    pipeline_shape(w, static_cast<const Pipeline*>(nullptr));
    return detail::fnv1a64(buf, w.written());
  }

  /// Bytes snapshot() writes now: 48 header bytes, 23 per cell, 4 per speaker, 130 of other
  /// state, 4 per phoneme boundary within the horizon and an 8-byte checksum.
  std::size_t snapshot_size() const noexcept {
    return snapshot_bytes(store_.size(), active_boundaries());
  }

  /// Writes the cache's mutable state into out[0, snapshot_size()), for preemption or swap.
  ///
  /// Format (version snapshot_version, every value little-endian): header: magic
  /// "AKVSNAP\0", u32 version, u32 0, u64 total size, u64 config_fingerprint(), i32
  /// capacity(), i32 num_cells(), i32 num_speakers, i32 boundaries; cells: newest position,
  /// has-frames byte, u64 generation, then per-cell arrays pos, speaker, voice, flags, prior, tier,
  /// importance, evaluated; speaker baselines; drift state (f64 running std, i64 steps);
  /// statistics (9 x i64); prefetch forecast (f32 rate, f32 peak, i64 steps); the engine's
  /// alignment position (byte given, i32 position); i64 pending_frames(); the positions of
  /// the phoneme boundaries within the horizon, ascending (i32 each, `boundaries` of them:
  /// they protect their neighbourhoods whether or not their frames are cached); then the u64
  /// FNV-1a 64 of every byte before it. The pipeline's parameters and id() are not written.
  /// Allocates nothing. Threads: const, so it may run beside plan() and other readers.
  /// @throws audiokv::error naming "out.size()" when it is below snapshot_size() (nothing is
  ///         written).
  void snapshot(span<std::byte> out) const {
    const std::size_t total = snapshot_size();
    AUDIOKV_REQUIRE(
        out.size() >= total, "tiered_cache::snapshot", "out.size()", out.size(),
        ::audiokv::detail::describe("must be at least snapshot_size() = ", total, " bytes")
            .c_str());
    detail::snapshot_writer w(out.data());
    w.u64(snapshot_magic);
    w.u32(snapshot_version);
    w.u32(0);
    w.u64(total);
    w.u64(config_fingerprint());
    w.i32(store_.capacity());
    w.i32(store_.size());
    w.i32(config_.num_speakers);
    w.i32(active_boundaries());
    store_.save(w);
    importance_.save(w, store_.size());
    for (const std::int64_t v : stats_values(stats_)) w.i64(v);
    w.f32(forecast_.rate());
    w.f32(forecast_.peak());
    w.i64(forecast_.steps());
    // The frontier's estimate is fed by observe_peak(), which this cache never calls: its only
    // state here is the engine's position.
    w.u8(frontier_.given() ? 1 : 0);
    w.i32(frontier_.given() ? frontier_.position() : 0);
    w.i64(pending_frames_);
    for (const std::int32_t* b = protection_.active_begin(store_); b != protection_.active_end();
         ++b) {
      w.i32(*b);
    }
    w.u64(detail::fnv1a64(out.data(), w.written()));
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
    constexpr const char* where = "tiered_cache::restore";
    const std::size_t size = in.size();
    if (size < snapshot_header_bytes + 8) {
      ::audiokv::detail::throw_invalid(
          where, "snapshot", ::audiokv::detail::describe(size, " bytes").c_str(),
          ::audiokv::detail::describe("truncated: ", size, " of at least ",
                                      snapshot_header_bytes + 8, " bytes")
              .c_str());
    }
    detail::snapshot_reader header(where, in.data());
    const std::uint64_t magic = header.u64();
    header.check(magic == snapshot_magic, magic, "magic",
                 "is not an audiokv tiered_cache snapshot's (\"AKVSNAP\\0\")");
    const std::uint32_t version = header.u32();
    // Messages with numbers are built only on failure, so an accepted restore allocates nothing.
    if (version != snapshot_version) {
      header.check(false, version, "format version",
                   ::audiokv::detail::describe("is not supported (this build reads version ",
                                               snapshot_version, ")")
                       .c_str());
    }
    const std::uint32_t reserved = header.u32();
    header.check(reserved == 0, reserved, "header word 3", "must be 0");
    const std::uint64_t total = header.u64();
    const std::uint64_t fingerprint = header.u64();
    const std::int32_t capacity = header.i32();
    const std::int32_t cells = header.i32();
    const std::int32_t speakers = header.i32();
    const std::int32_t boundaries = header.i32();
    header.check(cells >= 0 && cells <= capacity, cells, "num_cells",
                 "must be in [0, capacity] of the snapshot");
    header.check(speakers == config_.num_speakers, speakers, "num_speakers",
                 "differs from this cache's config.num_speakers");
    header.check(boundaries >= 0 && boundaries <= protection_.max_active(), boundaries,
                 "boundaries", "must be in [0, boundary horizon in frames + 1]");
    const std::size_t expected = snapshot_bytes(cells, boundaries);
    if (total != expected) {
      header.check(
          false, total, "total size",
          ::audiokv::detail::describe("disagrees with its counts (", expected, " bytes)").c_str());
    }
    if (size != total) {
      ::audiokv::detail::throw_invalid(
          where, "snapshot", ::audiokv::detail::describe(size, " bytes").c_str(),
          (size < total ? ::audiokv::detail::describe("truncated: ", size, " of ", total, " bytes")
                        : ::audiokv::detail::describe("trailing bytes: ", size,
                                                      " bytes, the snapshot has ", total))
              .c_str());
    }
    detail::snapshot_reader tail(where, in.data() + (size - 8));
    const std::uint64_t stored_sum = tail.u64();
    const std::uint64_t sum = detail::fnv1a64(in.data(), size - 8);
    if (stored_sum != sum) {
      ::audiokv::detail::throw_invalid(
          where, "snapshot", ::audiokv::detail::describe(size, " bytes").c_str(),
          "checksum mismatch (FNV-1a 64 of the payload): corrupt snapshot");
    }
    const std::uint64_t own = config_fingerprint();
    if (fingerprint != own) {
      header.check(
          false, fingerprint, "config fingerprint",
          ::audiokv::detail::describe("differs from this cache's (", own,
                                      "): the snapshot was made with another configuration or "
                                      "pipeline")
              .c_str());
    }
    if (capacity != store_.capacity()) {
      header.check(
          false, capacity, "capacity",
          ::audiokv::detail::describe("differs from this cache's capacity() = ", store_.capacity(),
                                      capacity > store_.capacity() ? " (reserve() it first)" : "")
              .c_str());
    }
    load_state(in.data(), cells, boundaries, /*commit=*/false);  // throws on the first bad value
    load_state(in.data(), cells, boundaries, /*commit=*/true);
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
    const std::int32_t before = capacity();
    if (next.needs_reserve(num_cells(), before, settle)) {
      reserve(std::min(next.cells_to_reserve(num_cells(), settle), max_cache_cells));
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
  /// [num_speakers] running mean importance per speaker (null on a moved-from cache).
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
  /// The recent window this cache protects, in positions: config().recent_window_frames(),
  /// which is config().retention_frames() unless a small budget shrank it to fit
  /// (audiokv_config::shrink_recent_window).
  std::int32_t recent_window_frames() const noexcept { return config_.recent_window_frames(); }
  /// Cells no plan may evict now: those in the recent window, the sinks, and the emergency
  /// cells beyond its overflow (the pool up to its nominal size). plan_to() never goes below
  /// it; plan() never needs to (it is below trigger_cells() whenever the trigger fires). O(n)
  /// reads, no scratch.
  std::int32_t protected_cells() const noexcept {
    const std::int32_t n = store_.size();
    const std::int64_t recent_from = protection_.recent_from(store_);
    const std::int32_t* pos = store_.pos();
    const pool_tier* tier = store_.tier();
    std::int32_t kept = 0, emergency = 0, emergency_evictable = 0;
    for (std::int32_t j = 0; j < n; ++j) {
      const bool always = pos[j] >= recent_from || (store_.flags_of(j) & frame_flag_sink) != 0;
      const bool in_emergency = tier[j] == pool_tier::emergency;
      kept += always ? 1 : 0;
      emergency += in_emergency ? 1 : 0;
      emergency_evictable += in_emergency && !always ? 1 : 0;
    }
    const std::int32_t overflow = std::max(0, emergency - pools_.emergency_cells());
    // Kept: the always-protected cells and the emergency cells the overflow does not reach.
    return kept + emergency_evictable - std::min(overflow, emergency_evictable);
  }
  /// Counters since construction (or reset()).
  const audiokv_stats& stats() const noexcept { return stats_; }

  /// True when a plan may evict cell `slot` only as a last resort: recent window or sink
  /// (never), emergency pool (only on its own overflow), or a buffer cell within
  /// boundary_radius positions of a phoneme boundary appended within the horizon, whether or
  /// not the boundary's own frame is still cached (only when the target cannot be met
  /// otherwise). Read-only: O(log n + log horizon) from the positions and the recorded
  /// boundaries, no scratch, so it may run while other threads plan.
  /// @throws audiokv::error naming "slot" unless 0 <= slot < num_cells().
  bool is_protected(std::int32_t slot) const {
    AUDIOKV_REQUIRE(
        slot >= 0 && slot < store_.size(), "tiered_cache::is_protected", "slot", slot,
        ::audiokv::detail::describe("must be in [0, num_cells()) = [0, ", store_.size(), ")")
            .c_str());
    const pool_tier tier = store_.tier()[slot];
    const detail::protection_level level = protection_.level_of(store_, slot);
    return level == detail::protect_always || tier == pool_tier::emergency ||
           (level == detail::protect_boundary && tier == pool_tier::buffer);
  }

 private:
  std::int32_t count_flag(std::uint8_t flag) const {
    std::int32_t count = 0;
    for (std::int32_t j = 0; j < store_.size(); ++j) count += (store_.flags_of(j) & flag) != 0;
    return count;
  }

  static constexpr std::uint64_t snapshot_magic = 0x0050414E53564B41ull;  // "AKVSNAP\0"
  static constexpr std::size_t snapshot_header_bytes = 48;
  static constexpr std::size_t snapshot_stats_count = 9;

  std::size_t snapshot_bytes(std::int32_t cells, std::int32_t boundaries) const noexcept {
    return snapshot_header_bytes + detail::cell_store::snapshot_bytes(cells) +
           importance_.snapshot_bytes(cells) + snapshot_stats_count * 8 + (4 + 4 + 8) + (1 + 4) +
           8 + static_cast<std::size_t>(boundaries) * 4 + 8;
  }
  /// Phoneme boundaries within the horizon (at most horizon frames + 1).
  std::int32_t active_boundaries() const noexcept {
    return static_cast<std::int32_t>(protection_.active_end() - protection_.active_begin(store_));
  }

  struct stats_array {
    std::int64_t v[snapshot_stats_count];
    const std::int64_t* begin() const noexcept { return v; }
    const std::int64_t* end() const noexcept { return v + snapshot_stats_count; }
  };
  static stats_array stats_values(const audiokv_stats& s) noexcept {
    return {{s.steps, s.evictions, s.cells_evicted, s.promotions, s.demotions,
             s.emergency_evictions, s.protections_released, s.drift_resets, s.reservations}};
  }

  template <class... Stages>
  static void pipeline_shape(detail::snapshot_writer& w,
                             const smoothing_pipeline<Stages...>*) noexcept {
    w.u64(sizeof...(Stages));
    (w.u64(sizeof(Stages)), ...);
    (w.u64(alignof(Stages)), ...);
  }
  static void pipeline_shape(detail::snapshot_writer&, const void*) noexcept {}

  // Reads the state after a header restore() checked; writes it only when `commit`.
  void load_state(const std::byte* in, std::int32_t cells, std::int32_t boundaries, bool commit) {
    detail::snapshot_reader r("tiered_cache::restore", in + snapshot_header_bytes);
    // The store's newest position and has-frames byte, which bound the boundaries below.
    detail::snapshot_reader head("tiered_cache::restore", in + snapshot_header_bytes);
    const std::int64_t newest = head.i32();
    const bool has_frames = head.u8() != 0;
    store_.load(r, cells, pools_.emergency_cells(), commit);
    importance_.load(r, cells, commit);
    std::int64_t counters[snapshot_stats_count];
    for (std::int64_t& c : counters) {
      c = r.i64();
      r.check(c >= 0, c, "stats", "counters must be >= 0");
    }
    const float rate = r.f32();
    // Both are averages of frames per step, which never exceed max_forecast_cells.
    constexpr float most = static_cast<float>(core::max_forecast_cells);
    r.check(rate >= 0.0f && rate <= most, rate, "forecast rate", "must be in [0, 2^31]");
    const float peak = r.f32();
    r.check(peak >= 0.0f && peak <= most, peak, "forecast peak", "must be in [0, 2^31]");
    const std::int64_t forecast_steps = r.i64();
    r.check(forecast_steps >= 0, forecast_steps, "forecast steps", "must be >= 0");
    const bool given = r.flag("alignment position given");
    const std::int32_t position = r.i32();
    r.check(given || position == 0, position, "alignment position",
            "must be 0 when none was given (the form snapshot() writes)");
    const std::int64_t pending = r.i64();
    r.check(pending >= 0, pending, "pending_frames", "must be >= 0");
    // Boundaries within the horizon of the newest position, ascending (what snapshot() writes).
    const std::int64_t horizon = newest - config_.boundary_horizon_frames();
    r.check(boundaries == 0 || has_frames, boundaries, "boundaries",
            "must be 0 when no frame was appended");
    const detail::snapshot_reader boundary_list = r;
    std::int64_t previous = horizon - 1;
    for (std::int32_t i = 0; i < boundaries; ++i) {
      const std::int32_t b = r.i32();
      r.check(b > previous && b <= newest, b, "boundary", i,
              "must exceed the previous boundary and lie within the horizon of newest_pos");
      previous = b;
    }
    if (!commit) return;
    detail::snapshot_reader list = boundary_list;
    protection_.assign(boundaries, [&](std::int32_t) { return list.i32(); });
    stats_ = audiokv_stats{counters[0], counters[1], counters[2], counters[3], counters[4],
                           counters[5], counters[6], counters[7], counters[8]};
    forecast_.restore_state(rate, peak, forecast_steps);
    frontier_ = alignment_frontier(config_.speech.frontier.filter);
    if (given) frontier_.set_position(position);
    pending_frames_ = pending;
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

}  // namespace audiokv::policy

namespace audiokv {
using policy::audiokv_stats;
using policy::tiered_cache;
}  // namespace audiokv
