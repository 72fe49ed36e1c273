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
#include <cstdint>
#include <utility>
#include <vector>

#include "../core/entropy.hpp"
#include "../core/gqa.hpp"
#include "../core/importance.hpp"
#include "../core/selection.hpp"
#include "../detail/cell_store.hpp"
#include "../detail/radix_select.hpp"
#include "../error.hpp"
#include "../policy/eviction_policy.hpp"
#include "../policy/smoothing_pipeline.hpp"
#include "audiokv_config.hpp"
#include "capacity_forecast.hpp"
#include "eviction_plan.hpp"
#include "frame.hpp"
#include "pool_split.hpp"

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
/// a reserved plan) and apply never allocate. Not thread-safe per object.
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
        forecast_(config.prefetch) {
    const std::int32_t capacity = config_.reserved_capacity();
    importance_.resize(capacity);
    evaluated_.resize(capacity);
    smoothed_.resize(capacity);
    final_.resize(capacity);
    scratch_.resize(capacity);
    protection_.resize(capacity);
    order_.resize(capacity);
    order_b_.resize(capacity);
    boundary_pos_.resize(capacity);
    tier_after_.resize(capacity);
    key_bits_.resize(capacity);
    baseline_.assign(config_.num_speakers, 0.0f);
    speaker_sum_.assign(config_.num_speakers, 0.0);
    speaker_count_.assign(config_.num_speakers, 0);
  }

  const char* name() const noexcept override { return "audiokv"; }
  const audiokv_config& config() const noexcept { return config_; }
  Pipeline& pipeline() noexcept { return pipeline_; }

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

  void observe(const float* attention, std::int32_t num_cells) override {
    store_.validate_scores("tiered_cache::observe", attention, num_cells);
    const std::int32_t n = store_.size();
    for (std::int32_t j = 0; j < n; ++j) {
      importance_[j] = core::importance_update(importance_[j], attention[j], config_.alpha);
      evaluated_[j] |= attention[j] * static_cast<float>(n) >= config_.evaluation_share;
    }
    update_baselines(attention, n);
    ++stats_.steps;
  }

  /// F27: observe the attention of one GQA group, [group_size, num_cells] row-major, reduced
  /// per cell by `mode` into the KV head's score. Uses no K/V and allocates nothing.
  void observe_group(const float* attention, std::int32_t group_size, std::int32_t num_cells,
                     gqa_reduce mode = gqa_reduce::mean) {
    AUDIOKV_REQUIRE(group_size >= 1, "tiered_cache::observe_group", "group_size", group_size,
                    "must be >= 1");
    store_.validate_scores("tiered_cache::observe_group", attention, num_cells, group_size);
    for (std::int32_t j = 0; j < num_cells; ++j) {
      scratch_[j] = core::reduce_group(attention, group_size, num_cells, j, mode);
    }
    observe(scratch_.data(), num_cells);
  }

  bool wants_eviction() const noexcept override { return store_.size() >= trigger_cells_; }

  void plan(eviction_plan& out) const override {
    if (!wants_eviction()) {
      store_.build_empty_plan(out);
      return;
    }
    plan_down_to(trigger_cells_ - 1, /*use_ratio=*/true, out);
  }

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
    smoothed_.resize(new_capacity);
    final_.resize(new_capacity);
    scratch_.resize(new_capacity);
    protection_.resize(new_capacity);
    order_.resize(new_capacity);
    order_b_.resize(new_capacity);
    boundary_pos_.resize(new_capacity);
    tier_after_.resize(new_capacity);
    key_bits_.resize(new_capacity);
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

  /// [num_cells()] importance I of each cell (F2).
  const float* importance() const noexcept { return importance_.data(); }
  /// [num_cells()] final scores of the last plan (valid until the next append/apply).
  const float* last_scores() const noexcept { return final_.data(); }
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
  /// boundary (only when the target cannot be met otherwise). Recomputed on each call.
  bool is_protected(std::int32_t slot) const {
    mark_protection();
    const pool_tier tier = store_.tier()[slot];
    return protection_[slot] == always || tier == pool_tier::emergency ||
           (protection_[slot] == boundary && tier == pool_tier::buffer);
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

  /// Smoothed scores (pipeline over importance in time order) and final scores (F14, F19).
  void score_cells() const {
    const std::int32_t n = store_.size();
    const stage_context ctx{store_.speaker(), baseline_.data(), config_.num_speakers, store_.pos()};
    // Cells never evaluated enter the pipeline at the mean importance of all cells, so they
    // compete by position (an even stride under local_rank_stage), not by noise.
    const float* input = importance_.data();
    if (config_.evaluation_share > 0.0f) {
      double mean = 0.0;
      for (std::int32_t j = 0; j < n; ++j) mean += importance_[j];
      mean = n > 0 ? mean / n : 0.0;
      for (std::int32_t j = 0; j < n; ++j) {
        final_[j] = evaluated_[j] ? importance_[j] : static_cast<float>(mean);
      }
      input = final_.data();
    }
    pipeline_.apply(input, smoothed_.data(), scratch_.data(), n, ctx);
    for (std::int32_t j = 0; j < n; ++j) {
      float s = smoothed_[j] * (1.0f + config_.voice_weight * store_.voice()[j]);
      s = config_.prior == prior_mode::add ? s + store_.prior()[j] : s * (1.0f + store_.prior()[j]);
      // Extreme finite inputs can overflow: NaN ranks lowest, infinities clamp, so selection
      // keys and the entropy stay defined.
      final_[j] = s == s ? core::clamp_to(s, -FLT_MAX, FLT_MAX) : -FLT_MAX;
    }
  }

  /// F18 recent window and sinks: always; F15 neighbourhoods of boundaries younger than the
  /// horizon: boundary.
  void mark_protection() const {
    const std::int32_t n = store_.size();
    const std::int32_t* pos = store_.pos();
    const std::int64_t newest = store_.newest_pos();
    const std::int64_t recent_from = newest - config_.retention_frames() + 1;
    const std::int64_t boundary_from = newest - config_.boundary_horizon_frames();
    std::int32_t num_boundaries = 0;
    for (std::int32_t j = 0; j < n; ++j) {
      if ((store_.flags()[j] & frame_flag_phoneme_boundary) && pos[j] >= boundary_from) {
        boundary_pos_[num_boundaries++] = pos[j];
      }
    }
    const std::int64_t radius = config_.boundary_radius;
    std::int32_t b = 0;
    for (std::int32_t j = 0; j < n; ++j) {
      while (b < num_boundaries && boundary_pos_[b] + radius < pos[j]) ++b;
      const bool near_boundary = b < num_boundaries && boundary_pos_[b] - radius <= pos[j];
      const bool always_kept = pos[j] >= recent_from || (store_.flags()[j] & frame_flag_sink);
      protection_[j] = always_kept ? always : near_boundary ? boundary : unprotected;
    }
  }

  /// Marks the `count` lowest (score, position) cells among order[0..size) (ascending slots)
  /// in the evict mask; a radix select in the order of core/selection_key.hpp.
  std::int32_t evict_lowest(const std::int32_t* order, std::int32_t size, std::int32_t count,
                            std::uint8_t* mask) const {
    count = std::min(count, size);
    detail::radix_select_lowest(final_.data(), order, size, count, key_bits_.data(), mask);
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
    score_cells();
    mark_protection();
    std::uint8_t* mask = store_.clear_evict_mask();
    const std::uint8_t* flags = store_.flags();
    const std::int32_t n = store_.size();
    for (std::int32_t j = 0; j < n; ++j) tier_after_[j] = store_.tier()[j];
    std::int32_t needed = n - target;

    const std::int32_t emergency = gather(
        order_.data(), [&](std::int32_t j) { return tier_after_[j] == pool_tier::emergency; });
    std::int32_t overflow = emergency - emergency_cells_;
    // An explicit target is exact: overflow then goes only as far as the target needs.
    for (std::int32_t i = 0; i < emergency && overflow > 0 && (use_ratio || needed > 0); ++i) {
      const std::int32_t j = order_[i];
      if ((flags[j] & frame_flag_sink) || protection_[j] == always) continue;
      mask[j] = 1;
      --overflow;
      --needed;
    }

    plan_promotions();

    const std::int32_t candidates = gather(order_.data(), [&](std::int32_t j) {
      return tier_after_[j] == pool_tier::buffer && protection_[j] == unprotected;
    });
    core::entropy_accumulator entropy;
    for (std::int32_t i = 0; i < candidates; ++i) entropy.add(final_[order_[i]]);
    out.normalized_entropy = entropy.normalized_entropy();
    out.ratio = use_ratio ? core::entropy_eviction_ratio(out.normalized_entropy, config_.base_rate,
                                                         config_.lambda)
                          : 0.0f;
    const std::int32_t by_ratio = use_ratio ? core::ratio_count(out.ratio, candidates) : 0;
    needed -= evict_lowest(order_.data(), candidates, std::max(by_ratio, needed), mask);

    if (needed > 0) {
      const std::int32_t base = gather(order_.data(), [&](std::int32_t j) {
        // A boundary-protected buffer cell promoted by this plan goes only in the boundary
        // stage below, where it is counted as a released protection.
        const bool boundary_buffer =
            store_.tier()[j] == pool_tier::buffer && protection_[j] == boundary;
        return tier_after_[j] == pool_tier::base && !mask[j] && protection_[j] != always &&
               !boundary_buffer;
      });
      needed -= evict_lowest(order_.data(), base, needed, mask);
    }
    std::int32_t released = 0;
    if (needed > 0) {
      const std::int32_t soft = gather(order_.data(), [&](std::int32_t j) {
        return store_.tier()[j] == pool_tier::buffer && !mask[j] && protection_[j] == boundary;
      });
      released = evict_lowest(order_.data(), soft, needed, mask);
      needed -= released;
    }
    AUDIOKV_REQUIRE(needed <= 0, "tiered_cache::plan", "target_cells", target,
                    "is below the protected set (recent window, sinks, emergency pool)");
    store_.build_plan(out);
    out.protections_released = released;
    for (std::int32_t j = 0; j < n; ++j) {
      if (mask[j] || tier_after_[j] == store_.tier()[j]) continue;
      (tier_after_[j] == pool_tier::base ? out.promote : out.demote).push_back(j);
    }
  }

  /// F8 on tier_after_: buffer cells past the recent window, best first, fill the base pool's
  /// room, then replace base cells that score lower (those return to the buffer).
  void plan_promotions() const {
    const std::int32_t* pos = store_.pos();
    const std::int32_t ready = gather(order_.data(), [&](std::int32_t j) {
      return tier_after_[j] == pool_tier::buffer && protection_[j] != always;
    });
    std::sort(order_.data(), order_.data() + ready, [&](std::int32_t a, std::int32_t b) {
      return core::evicts_before(final_[b], pos[b], final_[a], pos[a]);
    });
    const std::int32_t base =
        gather(order_b_.data(), [&](std::int32_t j) { return tier_after_[j] == pool_tier::base; });
    std::int32_t next = 0;
    for (std::int32_t room = base_cells_ - base; next < ready && room > 0; ++next, --room) {
      tier_after_[order_[next]] = pool_tier::base;
    }
    std::sort(order_b_.data(), order_b_.data() + base, [&](std::int32_t a, std::int32_t b) {
      return core::evicts_before(final_[a], pos[a], final_[b], pos[b]);
    });
    for (std::int32_t weakest = 0; next < ready && weakest < base; ++next, ++weakest) {
      const std::int32_t incoming = order_[next], outgoing = order_b_[weakest];
      if (!core::evicts_before(final_[outgoing], pos[outgoing], final_[incoming], pos[incoming])) {
        break;
      }
      tier_after_[incoming] = pool_tier::base;
      tier_after_[outgoing] = pool_tier::buffer;
    }
  }

  audiokv_config config_;
  Pipeline pipeline_;
  detail::cell_store store_;
  std::int32_t base_cells_;
  std::int32_t emergency_cells_;
  std::int32_t trigger_cells_;
  std::vector<std::uint8_t> evaluated_;  // [capacity] 1 once attention >= evaluation_share / n
  std::vector<float> importance_;        // [capacity] F2 importance, slot order
  mutable std::vector<float> smoothed_;  // [capacity] pipeline output
  mutable std::vector<float> final_;     // [capacity] weighted final scores
  mutable std::vector<float> scratch_;   // [capacity] pipeline ping-pong / GQA
  mutable std::vector<std::uint8_t> protection_;    // [capacity] protection_level
  mutable std::vector<std::int32_t> order_;         // [capacity] candidate indices
  mutable std::vector<std::int32_t> order_b_;       // [capacity] second index list
  mutable std::vector<std::int32_t> boundary_pos_;  // [capacity] positions of boundaries
  mutable std::vector<pool_tier> tier_after_;       // [capacity] tiers once the plan applies
  mutable std::vector<std::uint32_t> key_bits_;     // [capacity] ordered score bits
  std::vector<float> baseline_;                     // [num_speakers] F16 running means
  double global_std_ = 0.0;                         // F17 running mean of the recent std
  std::int64_t drift_history_ = 0;                  // steps that fed global_std_
  std::vector<double> speaker_sum_;                 // [num_speakers] scratch
  std::vector<std::int32_t> speaker_count_;         // [num_speakers] scratch
  audiokv_stats stats_;
  capacity_forecast forecast_;       // F13 frame-rate and burst estimates
  std::int64_t pending_frames_ = 0;  // frames appended since the last prefetch()
};

}  // namespace audiokv
