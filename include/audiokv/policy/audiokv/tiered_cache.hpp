// SPDX-License-Identifier: Apache-2.0
/// @file
/// The AudioKV policy: tiered pools, importance EMA, a compile-time smoothing pipeline, the
/// utilisation trigger and entropy-driven ratio, selection with promotion, plans with a stable
/// move map, the speech rules and rate-based prefetch. The class composes one part per job:
/// importance_tracker (importance, evaluation flags, speaker baselines, drift), protection_rules,
/// pool_manager (tiers) and planner (scoring, selection, plan building); its state, reset,
/// capacity and snapshots are tiered_cache_state's (snapshot format: snapshot_codec), and the
/// calls over several caches at once are head_batch's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "../../core/gqa.hpp"
#include "../../detail/describe.hpp"
#include "../../error.hpp"
#include "../../span.hpp"
#include "../../types/eviction_plan.hpp"
#include "../../types/frame.hpp"
#include "../../types/pool_split.hpp"
#include "../audiokv_config.hpp"
#include "../detail/cell_store.hpp"
#include "../eviction_policy.hpp"
#include "../stages/smoothing_pipeline.hpp"
#include "head_batch.hpp"
#include "importance_tracker.hpp"
#include "pool_manager.hpp"
#include "tiered_cache_state.hpp"

namespace audiokv::policy {

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
class tiered_cache final : public eviction_policy, public tiered_cache_state<Pipeline> {
  using state = tiered_cache_state<Pipeline>;

 public:
  using pipeline_type = Pipeline;  ///< the smoothing stages

  /// Validates `config` and sizes every array for config.reserved_capacity() cells (the only
  /// allocation besides reserve()).
  /// @throws audiokv::error naming the first invalid field of `config` ("config.budget", ...).
  explicit tiered_cache(const audiokv_config& config, Pipeline pipeline = Pipeline{})
      : state(config, std::move(pipeline)) {}

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
  tiered_cache(tiered_cache&&) = default;
  /// Move assignment, with the moved-from state of the move constructor.
  tiered_cache& operator=(tiered_cache&&) = default;
  ~tiered_cache() override = default;

  // The span forms of append() and observe() (checked lengths) come from eviction_policy.
  using eviction_policy::append;
  using eviction_policy::observe;

  const char* name() const noexcept override { return "audiokv"; }
  /// Unique id stamped on this cache's plans; a copy of the cache gets a new one.
  std::uint64_t id() const noexcept override { return store_.id(); }

  /// Appends `count` frames (`frames` points to count of them); see eviction_policy::append.
  void append(const frame_meta* frames, std::int32_t count) override {
    store_.validate_append("tiered_cache::append", frames, count);
    pools_.require_sinks_fit("tiered_cache::append", store_, frames, count);
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
    detail::head_batch<tiered_cache>::observe(caches, attention);
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
    detail::head_batch<tiered_cache>::plan(caches, plans);
  }

  /// An eviction down to min(num_cells(), target_cells) cells, or, when the target lies below
  /// protected_cells() (the recent window, the text window, the sinks and the emergency pool
  /// up to its nominal size, which no plan evicts), down to protected_cells(): out.n_kv_after says
  /// where the plan ends, and protected tokens stay. Boundary protections are released as needed
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

  /// [num_cells()] importance I of each cell (its attention EMA). The final scores a plan ranked
  /// are in its eviction_plan::scores.
  const float* importance() const noexcept { return importance_.importance(); }
  /// The decoder's current alignment position (frame position it transcribes), from the engine
  /// (e.g. the model's alignment heads); it replaces the estimate from observed attention.
  /// Used by the alignment-frontier rule (config.speech.frontier). Give it when the cache is
  /// compressed with every frame present; in a stream leave it to the estimate: a position taken
  /// from emitted tokens stands still while the decoder waits for audio, every frame revealed
  /// meanwhile counts as ahead of it, and the audio where the decoder stands thins (Whisper
  /// base streaming at 20% on dev: +7.41 points with it, +4.30 without;
  /// benchmarks/results/quality_dev_frontier_source.md).
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
  /// Cells no plan may evict now: those in the recent window, text cells in the text window
  /// (audiokv_config::text_recent_cells()), the sinks, and the emergency
  /// cells beyond its overflow (the pool up to its nominal size). plan_to() never goes below
  /// it; plan() never needs to (it is below trigger_cells() whenever the trigger fires). O(n)
  /// reads, no scratch.
  std::int32_t protected_cells() const noexcept {
    return pools_.protected_cells(store_, protection_);
  }

  /// True when a plan may evict cell `slot` only as a last resort: recent window, text window
  /// or sink (never), emergency pool (only on its own overflow), or a buffer cell within
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
    return detail::pool_manager::last_resort(store_, protection_, slot);
  }

 private:
  friend detail::head_batch<tiered_cache>;
  using state::config_;
  using state::forecast_;
  using state::frontier_;
  using state::importance_;
  using state::make_planner;
  using state::pending_frames_;
  using state::pools_;
  using state::protection_;
  using state::stats_;
  using state::store_;
};

}  // namespace audiokv::policy

namespace audiokv {
using policy::tiered_cache;
}  // namespace audiokv
