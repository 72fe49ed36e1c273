// SPDX-License-Identifier: Apache-2.0
/// @file
/// The AudioKV policy: tiered pools (F1), importance EMA (F2), a compile-time smoothing pipeline
/// (F3-F5), the utilisation trigger and entropy-driven ratio (F6, F7), selection with promotion
/// (F8), plans with a stable move map (F9), the speech rules (F14-F20) and rate-based prefetch
/// (F13).
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "../core/entropy.hpp"
#include "../core/gqa.hpp"
#include "../core/importance.hpp"
#include "../core/selection.hpp"
#include "../error.hpp"
#include "../policy/audiokv_config.hpp"
#include "../policy/capacity_forecast.hpp"
#include "../policy/detail/cell_store.hpp"
#include "../policy/detail/radix_select.hpp"
#include "../policy/eviction_policy.hpp"
#include "../policy/smoothing_pipeline.hpp"
#include "../policy/speech_rules.hpp"
#include "../span.hpp"
#include "../types/eviction_plan.hpp"
#include "../types/frame.hpp"
#include "../types/pool_split.hpp"

namespace audiokv {

/// @brief Counters of what the cache has done, for monitoring and tests.
struct audiokv_stats {
  std::int64_t steps = 0;      // observe() calls
  std::int64_t evictions = 0;  // applied plans that evicted at least one cell
  std::int64_t cells_evicted = 0;
  std::int64_t promotions = 0;            // buffer -> base
  std::int64_t demotions = 0;             // base -> buffer (replaced by a better candidate)
  std::int64_t emergency_evictions = 0;   // emergency-pool overflow, oldest first (F20)
  std::int64_t protections_released = 0;  // boundary protections released to meet a target
  std::int64_t drift_resets = 0;          // F17
  std::int64_t reservations = 0;          // reserve() calls that grew the capacity (F13)
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
  using pipeline_type = Pipeline;

  explicit tiered_cache(const audiokv_config& config, Pipeline pipeline = Pipeline{})
      : config_((config.validate(), config)),
        pipeline_(std::move(pipeline)),
        store_(config.reserved_capacity(), config.num_speakers),
        base_cells_(config.split.base_cells(config.budget)),
        emergency_cells_(config.split.emergency_cells(config.budget)),
        trigger_cells_(config.trigger_cells()),
        forecast_(config.prefetch),
        frontier_(config.speech.frontier.filter) {
    const std::int32_t capacity = config_.reserved_capacity();
    importance_.resize(capacity);
    evaluated_.resize(capacity);
    group_scores_.resize(capacity);
    baseline_.assign(config_.num_speakers, 0.0f);
    speaker_sum_.assign(config_.num_speakers, 0.0);
    speaker_count_.assign(config_.num_speakers, 0);
  }

  // The span forms of append() and observe() (checked lengths) come from eviction_policy.
  using eviction_policy::append;
  using eviction_policy::observe;

  const char* name() const noexcept override { return "audiokv"; }
  const audiokv_config& config() const noexcept { return config_; }
  Pipeline& pipeline() noexcept { return pipeline_; }
  /// Unique id stamped on this cache's plans; a copy of the cache gets a new one.
  std::uint64_t id() const noexcept override { return store_.id(); }

  /// Appends `count` frames (`frames` points to count of them); see eviction_policy::append.
  void append(const frame_meta* frames, std::int32_t count) override {
    store_.validate_append("tiered_cache::append", frames, count);
    std::int32_t sinks = count_flag(frame_flag_sink);
    for (std::int32_t i = 0; i < count; ++i) {
      if (frames[i].flags & frame_flag_sink) ++sinks;
      AUDIOKV_REQUIRE(sinks <= emergency_cells_, "tiered_cache::append",
                      detail::indexed("frames", i) + ".flags", static_cast<int>(frames[i].flags),
                      "one sink too many: sinks must fit in the emergency pool");
    }
    const std::int32_t first = store_.size();
    store_.append(frames, count, [](const frame_meta& f) {
      return (f.flags & emergency_flags) ? pool_tier::emergency : pool_tier::buffer;
    });
    for (std::int32_t slot = first; slot < store_.size(); ++slot) {
      importance_[slot] = config_.neighbour_prior && slot > 0 ? importance_[slot - 1] : 0.0f;
      evaluated_[slot] = 0;
    }
    if (config_.prefetch.enabled) pending_frames_ += count;
  }

  /// One step's attention over the cached cells; `num_cells` is the length read and must equal
  /// num_cells() (checked first).
  void observe(const float* attention, std::int32_t num_cells) override {
    store_.validate_scores("tiered_cache::observe", attention, num_cells);
    const std::int32_t n = num_cells;  // == store_.size(), and the length of `attention`
    for (std::int32_t j = 0; j < n; ++j) {
      importance_[j] = core::importance_update(importance_[j], attention[j], config_.alpha);
      evaluated_[j] |= attention[j] * static_cast<float>(n) >= config_.evaluation_share;
    }
    update_baselines(attention, n);
    ++stats_.steps;
  }

  /// F27: observe the attention of one GQA group, [group_size, num_cells] row-major, reduced
  /// per cell by `mode` into the KV head's score. Uses no K/V and allocates nothing.
  ///
  /// Checks, in order and before reading any score: group_size >= 1, num_cells == num_cells(),
  /// attention.size() == group_size * num_cells; then each score (a NaN, infinity or negative
  /// value throws naming "attention[row][cell]").
  /// @throws audiokv::error naming "group_size", "num_cells", "attention.size()", "attention" or
  ///         "attention[row][cell]"; the cache is unchanged.
  void observe_group(span<const float> attention, std::int32_t group_size, std::int32_t num_cells,
                     gqa_reduce mode = gqa_reduce::mean) {
    store_.validate_group("tiered_cache::observe_group", attention, group_size, num_cells);
    for (std::int32_t j = 0; j < num_cells; ++j) {
      group_scores_[j] = core::reduce_group(attention.data(), group_size, num_cells, j, mode);
    }
    observe(group_scores_.data(), num_cells);
  }

  /// The unchecked-length form: reads exactly group_size * num_cells floats from `attention`,
  /// which the caller guarantees it holds (the pointer carries no length to check). Prefer the
  /// span form above, which a std::vector or an array converts to.
  void observe_group(const float* attention, std::int32_t group_size, std::int32_t num_cells,
                     gqa_reduce mode = gqa_reduce::mean) {
    observe_group(detail::group_rows(attention, group_size, num_cells), group_size, num_cells,
                  mode);
  }

  bool wants_eviction() const noexcept override { return store_.size() >= trigger_cells_; }

  /// The eviction the trigger asks for, into `out` (read-only on the cache; the working memory
  /// is out.scratch, so reserve `out` for capacity() to plan without allocating).
  void plan(eviction_plan& out) const override {
    if (!wants_eviction()) {
      store_.build_empty_plan(out);
      return;
    }
    plan_down_to(trigger_cells_ - 1, /*use_ratio=*/true, out);
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
    plan_down_to(target_cells, /*use_ratio=*/false, out);
  }

  void apply(const eviction_plan& plan) override {
    store_.validate_plan("tiered_cache::apply", plan);
    std::int64_t emergency_evicted = 0;
    for (const std::int32_t slot : plan.evict) {
      if (store_.tier()[slot] == pool_tier::emergency) ++emergency_evicted;
    }
    detail::compact_array(importance_, plan);
    detail::compact_array(evaluated_, plan);
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
    importance_.resize(new_capacity);
    evaluated_.resize(new_capacity);
    group_scores_.resize(new_capacity);
    // Last: capacity() changes only once every array has grown, so a std::bad_alloc above
    // leaves the observable state as it was (arrays longer than capacity() are unused).
    store_.reserve(new_capacity);
    ++stats_.reservations;
  }

  /// F13: ends one decode step of the forecast and reserves capacity ahead of need.
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
    const std::int32_t settle = trigger_cells_ - 1;
    const std::int32_t before = capacity();
    if (next.needs_reserve(num_cells(), before, settle)) {
      reserve(next.cells_to_reserve(num_cells(), settle));
    }
    forecast_ = next;
    pending_frames_ = 0;
    return capacity() - before;
  }

  /// F13 estimates (rate and burst peak of frames per prefetch() step).
  const capacity_forecast& forecast() const noexcept { return forecast_; }
  /// Frames appended since the last prefetch() (counted only when prefetch is enabled).
  std::int64_t pending_frames() const noexcept { return pending_frames_; }

  /// [num_cells()] importance I of each cell (F2). The final scores a plan ranked are in its
  /// eviction_plan::scores.
  const float* importance() const noexcept { return importance_.data(); }
  /// The decoder's current alignment position (frame position it transcribes), from the engine
  /// (e.g. the model's alignment heads); it replaces the estimate from observed attention.
  /// Used by the alignment-frontier rule (config.speech.frontier).
  void set_alignment_position(std::int32_t pos) noexcept { frontier_.set_position(pos); }
  /// The engine's alignment position, if given (else plans estimate it, config.speech.frontier).
  const alignment_frontier& frontier() const noexcept { return frontier_; }
  /// [num_cells()] pool of each cell.
  const pool_tier* tiers() const noexcept override { return store_.tier(); }
  /// [num_speakers] running mean importance per speaker (F16).
  const float* speaker_baselines() const noexcept { return baseline_.data(); }
  /// Cells currently in `tier`.
  std::int32_t pool_size(pool_tier tier) const noexcept {
    std::int32_t count = 0;
    for (std::int32_t j = 0; j < store_.size(); ++j) count += store_.tier()[j] == tier;
    return count;
  }
  /// Nominal pool sizes from the split.
  std::int32_t base_pool_cells() const noexcept { return base_cells_; }
  std::int32_t emergency_pool_cells() const noexcept { return emergency_cells_; }
  std::int32_t trigger_cells() const noexcept { return trigger_cells_; }
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
    const protection_level level = protection_of(slot);
    return level == always || tier == pool_tier::emergency ||
           (level == boundary && tier == pool_tier::buffer);
  }

 private:
  enum protection_level : std::uint8_t { unprotected = 0, boundary = 1, always = 2 };

  std::int32_t count_flag(std::uint8_t flag) const {
    std::int32_t count = 0;
    for (std::int32_t j = 0; j < store_.size(); ++j) count += (store_.flags()[j] & flag) != 0;
    return count;
  }

  /// F16 running per-speaker means of importance; F17 resets them on a burst of raw scores.
  void update_baselines(const float* attention, std::int32_t n) {
    const std::int32_t speakers = config_.num_speakers;
    for (std::int32_t s = 0; s < speakers; ++s) {
      speaker_sum_[s] = 0.0;
      speaker_count_[s] = 0;
    }
    for (std::int32_t j = 0; j < n; ++j) {
      speaker_sum_[store_.speaker()[j]] += importance_[j];
      ++speaker_count_[store_.speaker()[j]];
    }
    const bool reset = n >= config_.drift_window && is_drift(attention, n);
    if (reset) ++stats_.drift_resets;
    for (std::int32_t s = 0; s < speakers; ++s) {
      if (speaker_count_[s] == 0) continue;
      const float mean_now = static_cast<float>(speaker_sum_[s] / speaker_count_[s]);
      const bool fresh = reset || baseline_[s] <= 0.0f;
      baseline_[s] =
          fresh ? mean_now
                : (1.0f - config_.baseline_rate) * baseline_[s] + config_.baseline_rate * mean_now;
    }
  }

  /// F17: std of the newest drift_window raw scores against its running mean global_std_.
  bool is_drift(const float* attention, std::int32_t n) {
    double sum = 0.0, sum_sq = 0.0;
    const std::int32_t w = config_.drift_window;
    for (std::int32_t j = n - w; j < n; ++j) {
      sum += attention[j];
      sum_sq += static_cast<double>(attention[j]) * attention[j];
    }
    const double mean = sum / w;
    const double recent_std = std::sqrt(std::max(0.0, sum_sq / w - mean * mean));
    const bool drift = drift_history_ >= config_.drift_window &&
                       recent_std > config_.drift_factor * global_std_ && global_std_ > 0.0;
    global_std_ = drift_history_ == 0 ? recent_std
                                      : (1.0 - config_.baseline_rate) * global_std_ +
                                            config_.baseline_rate * recent_std;
    ++drift_history_;
    return drift;
  }

  /// Pointers into a plan's scratch, each sized for the current cells.
  struct workspace {
    float* final_scores;         // [n] weighted final scores (the plan's `scores`)
    float* smoothed;             // [n] pipeline output
    float* pipeline;             // [n] pipeline ping-pong
    std::uint8_t* protection;    // [n] protection_level
    std::int32_t* order;         // [n] candidate indices
    std::int32_t* order_b;       // [n] second index list
    std::int32_t* boundary_pos;  // [n] positions of active boundaries
    pool_tier* tier_after;       // [n] tiers once the plan applies
    std::uint32_t* key_bits;     // [n] ordered score bits
    std::uint8_t* mask;          // [n] evict mask, cleared
  };

  /// Sizes `out`'s scores and scratch for the current cells (no allocation once `out` is
  /// reserved for capacity()).
  workspace bind(eviction_plan& out) const {
    using scratch = detail::plan_scratch;
    const std::int32_t n = store_.size();
    detail::plan_scratch& s = out.scratch;
    out.scores.resize(static_cast<std::size_t>(n));
    return workspace{out.scores.data(),
                     scratch::at_least(s.smoothed, n),
                     scratch::at_least(s.pipeline, n),
                     scratch::at_least(s.protection, n),
                     scratch::at_least(s.order, n),
                     scratch::at_least(s.order_b, n),
                     scratch::at_least(s.boundary_pos, n),
                     scratch::at_least(s.tier_after, n),
                     scratch::at_least(s.key_bits, n),
                     store_.clear_evict_mask(out)};
  }

  /// Smoothed scores (pipeline over importance in time order) and final scores (F14, F19).
  void score_cells(const workspace& w) const {
    const std::int32_t n = store_.size();
    const stage_context ctx{store_.speaker(), baseline_.data(), config_.num_speakers, store_.pos()};
    float* final_scores = w.final_scores;
    // Cells never evaluated enter the pipeline at the mean importance of all cells, so they
    // compete by position (an even stride under local_rank_stage), not by noise.
    const float* input = importance_.data();
    if (config_.evaluation_share > 0.0f) {
      double mean = 0.0;
      for (std::int32_t j = 0; j < n; ++j) mean += importance_[j];
      mean = n > 0 ? mean / n : 0.0;
      for (std::int32_t j = 0; j < n; ++j) {
        final_scores[j] = evaluated_[j] ? importance_[j] : static_cast<float>(mean);
      }
      input = final_scores;
    }
    pipeline_.apply(input, w.smoothed, w.pipeline, n, ctx);
    for (std::int32_t j = 0; j < n; ++j) {
      float s = w.smoothed[j] * (1.0f + config_.voice_weight * store_.voice()[j]);
      s = config_.prior == prior_mode::add ? s + store_.prior()[j] : s * (1.0f + store_.prior()[j]);
      // Extreme finite inputs can overflow: NaN ranks lowest, infinities clamp, so selection
      // keys and the entropy stay defined.
      final_scores[j] = s == s ? core::clamp_to(s, -FLT_MAX, FLT_MAX) : -FLT_MAX;
    }
  }

  /// Positions at or after this one are in the F18 recent window.
  std::int64_t recent_from() const {
    return static_cast<std::int64_t>(store_.newest_pos()) - config_.retention_frames() + 1;
  }
  /// Boundaries at or after this position still protect their neighbourhood (F15 horizon).
  std::int64_t boundary_from() const {
    return static_cast<std::int64_t>(store_.newest_pos()) - config_.boundary_horizon_frames();
  }

  /// F18 recent window and sinks: always; F15 neighbourhoods of boundaries younger than the
  /// horizon: boundary. Writes w.protection[0, n) (w.boundary_pos as scratch).
  void mark_protection(const workspace& w) const {
    const std::int32_t n = store_.size();
    const std::int32_t* pos = store_.pos();
    const std::int64_t recent = recent_from();
    const std::int64_t horizon = boundary_from();
    std::int32_t num_boundaries = 0;
    for (std::int32_t j = 0; j < n; ++j) {
      if ((store_.flags()[j] & frame_flag_phoneme_boundary) && pos[j] >= horizon) {
        w.boundary_pos[num_boundaries++] = pos[j];
      }
    }
    const std::int64_t radius = config_.boundary_radius;
    std::int32_t b = 0;
    for (std::int32_t j = 0; j < n; ++j) {
      while (b < num_boundaries && w.boundary_pos[b] + radius < pos[j]) ++b;
      const bool near_boundary = b < num_boundaries && w.boundary_pos[b] - radius <= pos[j];
      const bool always_kept = pos[j] >= recent || (store_.flags()[j] & frame_flag_sink);
      w.protection[j] = always_kept ? always : near_boundary ? boundary : unprotected;
    }
  }

  /// mark_protection()'s level of one cell without scratch: a boundary protects `slot` when
  /// its position lies in [pos - radius, pos + radius] and at or after boundary_from(); the
  /// cells in that range are found by binary search (positions ascend).
  protection_level protection_of(std::int32_t slot) const {
    const std::int32_t* pos = store_.pos();
    const std::int64_t p = pos[slot];
    if (p >= recent_from() || (store_.flags()[slot] & frame_flag_sink)) return always;
    const std::int64_t radius = config_.boundary_radius;
    const std::int64_t from = std::max(p - radius, boundary_from());
    const std::int32_t* first = std::lower_bound(
        pos, pos + store_.size(), from, [](std::int32_t a, std::int64_t b) { return a < b; });
    for (const std::int32_t* it = first; it != pos + store_.size() && *it <= p + radius; ++it) {
      if (store_.flags()[it - pos] & frame_flag_phoneme_boundary) return boundary;
    }
    return unprotected;
  }

  /// Marks the `count` lowest (score, position) cells among order[0..size) (ascending slots)
  /// in the evict mask; a radix select in the order of core/selection_key.hpp.
  std::int32_t evict_lowest(const workspace& w, const std::int32_t* order, std::int32_t size,
                            std::int32_t count) const {
    count = std::min(count, size);
    detail::radix_select_lowest(w.final_scores, order, size, count, w.key_bits, w.mask);
    return std::max(count, 0);
  }

  /// Gathers cells satisfying `pred` into `order`; returns their count.
  template <class Pred>
  std::int32_t gather(std::int32_t* order, Pred pred) const {
    std::int32_t count = 0;
    for (std::int32_t j = 0; j < store_.size(); ++j) {
      if (pred(j)) order[count++] = j;
    }
    return count;
  }

  /// Order: emergency overflow (F20); promotions (F8: buffer cells past the recent window fill
  /// the base pool's room best first, then replace weaker base cells); eviction of the lowest
  /// unprotected buffer cells at ratio r (F7), at least down to `target`; then the base pool's
  /// weakest, then boundary-protected cells, if the target demands it.
  void plan_down_to(std::int32_t target, bool use_ratio, eviction_plan& out) const {
    const workspace w = bind(out);
    score_cells(w);
    mark_protection(w);
    // Speech rules rank the scores by tier; w.smoothed keeps the scores before that (for the
    // entropy), w.boundary_pos is free after mark_protection and w.key_bits before selection.
    const float* raw_scores = w.final_scores;
    std::int32_t always_kept = 0;
    for (std::int32_t j = 0; j < store_.size(); ++j) always_kept += w.protection[j] == always;
    if (apply_speech_rules(config_.speech, config_.frame_ms, store_.pos(), store_.voice(),
                           importance_.data(), w.protection, always, store_.size(),
                           target - always_kept, frontier_, w.final_scores, w.smoothed,
                           reinterpret_cast<std::uint8_t*>(w.key_bits), w.boundary_pos)) {
      raw_scores = w.smoothed;
    }
    std::uint8_t* mask = w.mask;
    const std::uint8_t* protection = w.protection;
    pool_tier* tier_after = w.tier_after;
    std::int32_t* order = w.order;
    const std::uint8_t* flags = store_.flags();
    const std::int32_t n = store_.size();
    for (std::int32_t j = 0; j < n; ++j) tier_after[j] = store_.tier()[j];
    std::int32_t needed = n - target;

    const std::int32_t emergency =
        gather(order, [&](std::int32_t j) { return tier_after[j] == pool_tier::emergency; });
    std::int32_t overflow = emergency - emergency_cells_;
    // An explicit target is exact: overflow then goes only as far as the target needs.
    for (std::int32_t i = 0; i < emergency && overflow > 0 && (use_ratio || needed > 0); ++i) {
      const std::int32_t j = order[i];
      if ((flags[j] & frame_flag_sink) || protection[j] == always) continue;
      mask[j] = 1;
      --overflow;
      --needed;
    }

    plan_promotions(w);

    const std::int32_t candidates = gather(order, [&](std::int32_t j) {
      return tier_after[j] == pool_tier::buffer && protection[j] == unprotected;
    });
    core::entropy_accumulator entropy;
    for (std::int32_t i = 0; i < candidates; ++i) entropy.add(raw_scores[order[i]]);
    out.normalized_entropy = entropy.normalized_entropy();
    out.ratio = use_ratio ? core::entropy_eviction_ratio(out.normalized_entropy, config_.base_rate,
                                                         config_.lambda)
                          : 0.0f;
    const std::int32_t by_ratio = use_ratio ? core::ratio_count(out.ratio, candidates) : 0;
    needed -= evict_lowest(w, order, candidates, std::max(by_ratio, needed));

    if (needed > 0) {
      const std::int32_t base = gather(order, [&](std::int32_t j) {
        // A boundary-protected buffer cell promoted by this plan goes only in the boundary
        // stage below, where it is counted as a released protection.
        const bool boundary_buffer =
            store_.tier()[j] == pool_tier::buffer && protection[j] == boundary;
        return tier_after[j] == pool_tier::base && !mask[j] && protection[j] != always &&
               !boundary_buffer;
      });
      needed -= evict_lowest(w, order, base, needed);
    }
    std::int32_t released = 0;
    if (needed > 0) {
      const std::int32_t soft = gather(order, [&](std::int32_t j) {
        return store_.tier()[j] == pool_tier::buffer && !mask[j] && protection[j] == boundary;
      });
      released = evict_lowest(w, order, soft, needed);
      needed -= released;
    }
    AUDIOKV_REQUIRE(
        needed <= 0, "tiered_cache::plan", "target_cells", target,
        detail::describe("is below the ", target + needed, " cells no plan may evict (of ", n,
                         " cached: recent window of ", config_.retention_frames(),
                         " frames, sinks, emergency pool)")
            .c_str());
    store_.build_plan(out);
    out.protections_released = released;
    for (std::int32_t j = 0; j < n; ++j) {
      if (mask[j] || tier_after[j] == store_.tier()[j]) continue;
      (tier_after[j] == pool_tier::base ? out.promote : out.demote).push_back(j);
    }
  }

  /// F8 on w.tier_after: buffer cells past the recent window, best first, fill the base pool's
  /// room, then replace base cells that score lower (those return to the buffer).
  void plan_promotions(const workspace& w) const {
    const std::int32_t* pos = store_.pos();
    const float* final_scores = w.final_scores;
    pool_tier* tier_after = w.tier_after;
    std::int32_t* order = w.order;
    std::int32_t* order_b = w.order_b;
    const std::int32_t ready = gather(order, [&](std::int32_t j) {
      return tier_after[j] == pool_tier::buffer && w.protection[j] != always;
    });
    std::sort(order, order + ready, [&](std::int32_t a, std::int32_t b) {
      return core::evicts_before(final_scores[b], pos[b], final_scores[a], pos[a]);
    });
    const std::int32_t base =
        gather(order_b, [&](std::int32_t j) { return tier_after[j] == pool_tier::base; });
    std::int32_t next = 0;
    for (std::int32_t room = base_cells_ - base; next < ready && room > 0; ++next, --room) {
      tier_after[order[next]] = pool_tier::base;
    }
    std::sort(order_b, order_b + base, [&](std::int32_t a, std::int32_t b) {
      return core::evicts_before(final_scores[a], pos[a], final_scores[b], pos[b]);
    });
    for (std::int32_t weakest = 0; next < ready && weakest < base; ++next, ++weakest) {
      const std::int32_t incoming = order[next], outgoing = order_b[weakest];
      if (!core::evicts_before(final_scores[outgoing], pos[outgoing], final_scores[incoming],
                               pos[incoming])) {
        break;
      }
      tier_after[incoming] = pool_tier::base;
      tier_after[outgoing] = pool_tier::buffer;
    }
  }

  audiokv_config config_;
  Pipeline pipeline_;
  detail::cell_store store_;
  std::int32_t base_cells_;
  std::int32_t emergency_cells_;
  std::int32_t trigger_cells_;
  std::vector<std::uint8_t> evaluated_;      // [capacity] 1 once attention >= evaluation_share / n
  std::vector<float> importance_;            // [capacity] F2 importance, slot order
  std::vector<float> group_scores_;          // [capacity] observe_group's reduced row
  std::vector<float> baseline_;              // [num_speakers] F16 running means
  double global_std_ = 0.0;                  // F17 running mean of the recent std
  std::int64_t drift_history_ = 0;           // steps that fed global_std_
  std::vector<double> speaker_sum_;          // [num_speakers] scratch
  std::vector<std::int32_t> speaker_count_;  // [num_speakers] scratch
  audiokv_stats stats_;
  capacity_forecast forecast_;       // F13 frame-rate and burst estimates
  alignment_frontier frontier_;      // given or estimated alignment position
  std::int64_t pending_frames_ = 0;  // frames appended since the last prefetch()
};

}  // namespace audiokv
