// SPDX-License-Identifier: Apache-2.0
/// @file
/// The AudioKV policy's eviction planning: final scores (smoothing pipeline, voice weight,
/// priors), protection, the speech rules, emergency overflow, promotions, the entropy-driven
/// ratio and the selection, written into an eviction_plan. Read-only on the cache: all working
/// memory lives in the plan's scratch.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "../../core/entropy.hpp"
#include "../../core/math.hpp"
#include "../../core/trend.hpp"
#include "../../types/eviction_plan.hpp"
#include "../../types/pool_split.hpp"
#include "../audiokv_config.hpp"
#include "../detail/cell_store.hpp"
#include "../detail/radix_select.hpp"
#include "../speech/alignment_frontier.hpp"
#include "../speech/speech_rules.hpp"
#include "../stages/speaker_norm_stage.hpp"
#include "../stages/stage_context.hpp"
#include "importance_tracker.hpp"
#include "pool_manager.hpp"
#include "protection_rules.hpp"

namespace audiokv::policy::detail {

/// @brief One planning call over a cache's parts (a view: it holds references and lives for
/// one plan).
template <class Pipeline>
class planner {
 public:
  planner(const audiokv_config& config, const Pipeline& pipeline, const cell_store& store,
          const importance_tracker& importance, const protection_rules& protection,
          const pool_manager& pools, const alignment_frontier& frontier) noexcept
      : config_(config),
        pipeline_(pipeline),
        store_(store),
        importance_(importance),
        protection_(protection),
        pools_(pools),
        frontier_(frontier) {}

  /// Order: emergency overflow; promotions (buffer cells past the recent window fill the base
  /// pool's room best first, then replace weaker base cells); eviction of the lowest
  /// unprotected buffer cells at the entropy ratio r, at least down to `target`; then the base
  /// pool's weakest, then boundary-protected cells, then any other cell no rule protects, if
  /// the target demands it. A target below the cells no plan may evict gives a plan down to
  /// those cells (out.n_kv_after > target). Throws nothing but std::bad_alloc from growing an
  /// unreserved plan.
  void plan_down_to(std::int32_t target, bool use_ratio, eviction_plan& out) const {
    const workspace w = bind(out);
    score_cells(w);
    plan_from_scores(target, use_ratio, out, w);
  }

  /// plan_down_to(targets[i], use_ratio, *outs[i]) of heads[i] for i < count, with the same
  /// plans; the smoothing pipelines of up to core::trend_lanes heads run together
  /// (Pipeline::apply_rows), the rest of each plan head by head. A pipeline without apply_rows
  /// plans head by head.
  static void plan_heads_down_to(const planner* const* heads, const std::int32_t* targets,
                                 bool use_ratio, eviction_plan* const* outs, std::int32_t count) {
    if constexpr (has_apply_rows<Pipeline>::value) {
      constexpr std::int32_t group = core::trend_lanes;
      for (std::int32_t first = 0; first < count; first += group) {
        const std::int32_t rows = count - first < group ? count - first : group;
        workspace w[group]{};
        stage_context ctx[group]{};
        const Pipeline* pipelines[group]{};
        const float* in[group]{};
        float* smoothed[group]{};
        float* scratch[group]{};
        std::int32_t n[group]{};
        for (std::int32_t r = 0; r < rows; ++r) {
          const planner& head = *heads[first + r];
          w[r] = head.bind(*outs[first + r]);
          ctx[r] = head.score_context(w[r]);
          in[r] = head.pipeline_input(w[r]);
          pipelines[r] = &head.pipeline_;
          smoothed[r] = w[r].smoothed;
          scratch[r] = w[r].pipeline;
          n[r] = head.store_.size();
        }
        Pipeline::apply_rows(pipelines, in, smoothed, scratch, n, ctx, rows);
        for (std::int32_t r = 0; r < rows; ++r)
          heads[first + r]->unsmooth_text(w[r], in[r], ctx[r]);
        // The speech rules' scale sums of the heads that apply them, side by side.
        const float* scores[group]{};
        std::int32_t lengths[group]{};
        double sums[group]{};
        std::int32_t ruled[group]{};
        std::int32_t num_ruled = 0;
        for (std::int32_t r = 0; r < rows; ++r) {
          const planner& head = *heads[first + r];
          head.finish_scores(w[r]);
          if (head.config_.speech.any() && n[r] > 0) {
            scores[num_ruled] = w[r].final_scores;
            lengths[num_ruled] = n[r];
            ruled[num_ruled++] = r;
          }
        }
        speech_scale_sums(scores, lengths, num_ruled, sums);
        for (std::int32_t r = 0, i = 0; r < rows; ++r) {
          const planner& head = *heads[first + r];
          const double* scale_sum = i < num_ruled && ruled[i] == r ? &sums[i++] : nullptr;
          head.plan_from_scores(targets[first + r], use_ratio, *outs[first + r], w[r], scale_sum);
        }
      }
    } else {
      for (std::int32_t i = 0; i < count; ++i) {
        heads[i]->plan_down_to(targets[i], use_ratio, *outs[i]);
      }
    }
  }

 private:
  /// True when P has a static apply_rows of smoothing_pipeline's form.
  template <class P, class = void>
  struct has_apply_rows : std::false_type {};
  template <class P>
  struct has_apply_rows<P, std::void_t<decltype(P::apply_rows(
                               std::declval<const P* const*>(), std::declval<const float* const*>(),
                               std::declval<float* const*>(), std::declval<float* const*>(),
                               std::declval<const std::int32_t*>(),
                               std::declval<const stage_context*>(), std::int32_t{}))>>
      : std::true_type {};

  struct workspace;

  /// 1 for each text cell (frame_flag_text), written to w.tier_after; null when no cell is
  /// text (the speech rules then treat every cell as audio). An audio-only cache pays one
  /// read-only OR over its flags (a contiguous byte scan unless the frames are shared).
  const std::uint8_t* text_cells(const workspace& w) const noexcept {
    if (!config_.speech.any()) return nullptr;
    const std::int32_t n = store_.size();
    std::uint8_t any = 0;
    if (store_.shares_frames()) {
      for (std::int32_t j = 0; j < n; ++j) any |= store_.flags_of(j);
    } else {
      const std::uint8_t* flags = store_.flags();
      for (std::int32_t j = 0; j < n; ++j) any |= flags[j];
    }
    if ((any & frame_flag_text) == 0) return nullptr;
    auto* text = reinterpret_cast<std::uint8_t*>(w.tier_after);
    for (std::int32_t j = 0; j < n; ++j)
      text[j] = static_cast<std::uint8_t>((store_.flags_of(j) & frame_flag_text) != 0);
    return text;
  }

  /// plan_down_to() after score_cells(w): protection, speech rules, tiers, ratio, selection and
  /// the plan.
  void plan_from_scores(std::int32_t target, bool use_ratio, eviction_plan& out, const workspace& w,
                        const double* scale_sum = nullptr) const {
    protection_.mark(store_, w.protection);
    // Speech rules rank the scores by tier; w.smoothed keeps the scores before that (for the
    // entropy), w.boundary_pos and w.key_bits are free before selection.
    const float* raw_scores = w.final_scores;
    std::int32_t always_kept = 0;
    for (std::int32_t j = 0; j < store_.size(); ++j)
      always_kept += w.protection[j] == protect_always;
    // Voice per cell: the store's array, or gathered from its shared frame table into the
    // pipeline ping-pong buffer, free once score_cells() is done.
    const float* voice = store_.voice();
    if (store_.shares_frames()) {
      for (std::int32_t j = 0; j < store_.size(); ++j) w.pipeline[j] = store_.voice_of(j);
      voice = w.pipeline;
    }
    // Text cells (frame_flag_text) per cell into w.tier_after, free until the tiers below;
    // null when every cell is audio.
    const std::uint8_t* text = text_cells(w);
    if (apply_speech_rules(config_.speech, config_.frame_ms, store_.pos(), voice,
                           importance_.importance(), w.protection, protect_always, store_.size(),
                           target - always_kept, frontier_, w.final_scores, w.smoothed,
                           reinterpret_cast<std::uint8_t*>(w.key_bits), w.boundary_pos, scale_sum,
                           text)) {
      raw_scores = w.smoothed;
    }
    std::uint8_t* mask = w.mask;
    const std::uint8_t* protection = w.protection;
    pool_tier* tier_after = w.tier_after;
    std::int32_t* order = w.order;
    const std::int32_t n = store_.size();
    for (std::int32_t j = 0; j < n; ++j) tier_after[j] = store_.tier()[j];
    std::int32_t needed = n - target;

    // An explicit target is exact: overflow then goes only as far as the target needs.
    pools_.mark_emergency_overflow(store_, tier_after, protection, use_ratio, order, mask, needed);
    pools_.plan_promotions(store_, w.final_scores, protection, tier_after, order, w.key_bits, mask);

    const std::int32_t candidates = gather_slots(n, order, [&](std::int32_t j) {
      return (tier_after[j] == pool_tier::buffer) & (protection[j] == protect_none);
    });
    // The candidates' logarithms first (into w.pipeline, free after the speech rules), then the
    // two sums in candidate order: the same additions, with no call between one addition and
    // the next.
    core::entropy_accumulator entropy;
    float* logs = w.pipeline;
    for (std::int32_t i = 0; i < candidates; ++i) {
      const float s = raw_scores[order[i]];
      logs[i] = s > 0.0f ? core::log_of(s) : 0.0f;
    }
    for (std::int32_t i = 0; i < candidates; ++i) entropy.add(raw_scores[order[i]], logs[i]);
    out.normalized_entropy = entropy.normalized_entropy();
    out.ratio = use_ratio ? core::entropy_eviction_ratio(out.normalized_entropy, config_.base_rate,
                                                         config_.lambda)
                          : 0.0f;
    const std::int32_t by_ratio = use_ratio ? core::ratio_count(out.ratio, candidates) : 0;
    needed -= evict_lowest(w, order, candidates, std::max(by_ratio, needed));

    if (needed > 0) {
      const std::int32_t base = gather_slots(n, order, [&](std::int32_t j) {
        // A boundary-protected buffer cell promoted by this plan goes only in the boundary
        // stage below, where it is counted as a released protection.
        const bool boundary_buffer =
            store_.tier()[j] == pool_tier::buffer && protection[j] == protect_boundary;
        return tier_after[j] == pool_tier::base && !mask[j] && protection[j] != protect_always &&
               !boundary_buffer;
      });
      needed -= evict_lowest(w, order, base, needed);
    }
    std::int32_t released = 0;
    if (needed > 0) {
      const std::int32_t soft = gather_slots(n, order, [&](std::int32_t j) {
        return store_.tier()[j] == pool_tier::buffer && !mask[j] &&
               protection[j] == protect_boundary;
      });
      released = evict_lowest(w, order, soft, needed);
      needed -= released;
    }
    if (needed > 0) {
      // What no stage above takes and no rule protects: a base cell near a boundary that this
      // plan's promotions return to the buffer pool (neither a base nor a buffer candidate).
      const std::int32_t rest = gather_slots(n, order, [&](std::int32_t j) {
        return !mask[j] && protection[j] != protect_always && tier_after[j] != pool_tier::emergency;
      });
      needed -= evict_lowest(w, order, rest, needed);
    }
    // needed > 0 now only when the target lies below the cells no plan may evict (the recent
    // window, sinks, the emergency pool up to its nominal size): the plan stops there, and
    // its n_kv_after says so. plan() never gets here: the configuration keeps those cells
    // below the trigger (audiokv_config::recent_window_frames()).
    store_.build_plan(out);
    out.protections_released = released;
    // Kept cells whose tier changes, ascending: into the base pool (promote) or out of it
    // (demote). Gathered without a branch (evicted and changed cells interleave
    // unpredictably): the changed cells into w.key_bits (free after the selection; int32 and
    // uint32 may alias), one store per cell, then split into the free order and boundary_pos
    // scratch, and copied (no allocation once reserved).
    const pool_tier* tier = store_.tier();
    auto* moved = reinterpret_cast<std::int32_t*>(w.key_bits);
    std::int32_t moves = 0;
    for (std::int32_t j = 0; j < n; ++j) {
      moved[moves] = j;
      moves += static_cast<std::int32_t>((mask[j] == 0) & (tier_after[j] != tier[j]));
    }
    std::int32_t* promoted = order;
    std::int32_t* demoted = w.boundary_pos;
    std::int32_t promotions = 0, demotions = 0;
    for (std::int32_t i = 0; i < moves; ++i) {
      const std::int32_t j = moved[i];
      const bool to_base = tier_after[j] == pool_tier::base;
      promoted[promotions] = j;
      demoted[demotions] = j;
      promotions += static_cast<std::int32_t>(to_base);
      demotions += static_cast<std::int32_t>(!to_base);
    }
    out.promote.assign(promoted, promoted + promotions);
    out.demote.assign(demoted, demoted + demotions);
  }

  /// Pointers into a plan's scratch, each sized for the current cells.
  struct workspace {
    float* final_scores;         // [n] weighted final scores (the plan's `scores`)
    float* smoothed;             // [n] pipeline output
    float* pipeline;             // [n] pipeline ping-pong
    std::uint8_t* protection;    // [n] protection_level
    std::int32_t* order;         // [n] candidate indices
    std::int32_t* boundary_pos;  // [n] scratch of the speech rules and the demotions
    pool_tier* tier_after;       // [n] tiers once the plan applies
    std::uint32_t* key_bits;     // [n] ordered score bits
    std::uint8_t* mask;          // [n] evict mask, cleared
  };

  /// Sizes `out`'s scores and scratch for the current cells (no allocation once `out` is
  /// reserved for the cache's capacity).
  workspace bind(eviction_plan& out) const {
    using scratch = types::detail::plan_scratch;
    const std::int32_t n = store_.size();
    scratch& s = out.scratch;
    out.scores.resize(static_cast<std::size_t>(n));
    return workspace{out.scores.data(),
                     scratch::at_least(s.smoothed, n),
                     scratch::at_least(s.pipeline, n),
                     scratch::at_least(s.protection, n),
                     scratch::at_least(s.order, n),
                     scratch::at_least(s.boundary_pos, n),
                     scratch::at_least(s.tier_after, n),
                     scratch::at_least(s.key_bits, n),
                     store_.clear_evict_mask(out)};
  }

  /// Smoothed scores (pipeline over importance in time order) and final scores:
  /// s = smoothed (1 + voice_weight voice), then the prior added or as a factor (1 + prior).
  void score_cells(const workspace& w) const {
    const stage_context ctx = score_context(w);
    const float* input = pipeline_input(w);
    pipeline_.apply(input, w.smoothed, w.pipeline, store_.size(), ctx);
    unsmooth_text(w, input, ctx);
    finish_scores(w);
  }

  /// Without config.smooth_text: each text cell's smoothed score is its pipeline input over
  /// its speaker's baseline (speaker_norm_stage alone).
  void unsmooth_text(const workspace& w, const float* input, const stage_context& ctx) const {
    if (config_.smooth_text) return;
    const ::audiokv::policy::stages::speaker_norm_stage norm;
    const std::int32_t n = store_.size();
    for (std::int32_t j = 0; j < n; ++j) {
      if ((store_.flags_of(j) & frame_flag_text) != 0)
        w.smoothed[j] = norm.normalise(input[j], j, ctx);
    }
  }

  /// The pipeline's context. Speaker per cell: the store's array, or gathered from its shared
  /// frame table into the candidate list, free until plan_from_scores() gathers candidates.
  stage_context score_context(const workspace& w) const {
    const std::int32_t* speaker = store_.speaker();
    if (store_.shares_frames()) {
      store_.gather_speakers(0, store_.size(), w.order);
      speaker = w.order;
    }
    return stage_context{speaker, importance_.baselines(), config_.num_speakers, store_.pos()};
  }

  /// The pipeline's input: the importance, or (with an evaluation share) the importance with
  /// cells never evaluated at the mean importance of all cells, so they compete by position
  /// (an even stride under local_rank_stage), not by noise (then in w.final_scores).
  const float* pipeline_input(const workspace& w) const {
    const std::int32_t n = store_.size();
    float* final_scores = w.final_scores;
    const float* importance = importance_.importance();
    const std::uint8_t* evaluated = importance_.evaluated();
    if (config_.evaluation_share > 0.0f) {
      double mean = 0.0;
      for (std::int32_t j = 0; j < n; ++j) mean += importance[j];
      mean = n > 0 ? mean / n : 0.0;
      for (std::int32_t j = 0; j < n; ++j) {
        final_scores[j] = evaluated[j] ? importance[j] : static_cast<float>(mean);
      }
      return final_scores;
    }
    return importance;
  }

  /// Final scores from the pipeline's output w.smoothed (see score_cells()).
  void finish_scores(const workspace& w) const {
    const std::int32_t n = store_.size();
    float* final_scores = w.final_scores;
    if (!store_.shares_frames()) {
      // The same formula over the store's arrays, with the prior mode hoisted: it vectorises.
      const float* smoothed = w.smoothed;
      const float* voice = store_.voice();
      const float* prior = store_.prior();
      const float voice_weight = config_.voice_weight;
      const auto finish = [&](auto combine) {
        for (std::int32_t j = 0; j < n; ++j) {
          const float s = combine(smoothed[j] * (1.0f + voice_weight * voice[j]), prior[j]);
          final_scores[j] = s == s ? core::clamp_to(s, -FLT_MAX, FLT_MAX) : -FLT_MAX;
        }
      };
      if (config_.prior == prior_mode::add) {
        finish([](float s, float p) { return s + p; });
      } else {
        finish([](float s, float p) { return s * (1.0f + p); });
      }
      return;
    }
    for (std::int32_t j = 0; j < n; ++j) {
      const float prior = store_.prior_of(j);
      float s = w.smoothed[j] * (1.0f + config_.voice_weight * store_.voice_of(j));
      s = config_.prior == prior_mode::add ? s + prior : s * (1.0f + prior);
      // Extreme finite inputs can overflow: NaN ranks lowest, infinities clamp, so selection
      // keys and the entropy stay defined.
      final_scores[j] = s == s ? core::clamp_to(s, -FLT_MAX, FLT_MAX) : -FLT_MAX;
    }
  }

  /// Marks the `count` lowest (score, position) cells among order[0..size) (ascending slots)
  /// in the evict mask; a radix select in the order of core/selection_key.hpp.
  std::int32_t evict_lowest(const workspace& w, const std::int32_t* order, std::int32_t size,
                            std::int32_t count) const {
    count = std::min(count, size);
    radix_select_lowest(w.final_scores, order, size, count, w.key_bits, w.mask);
    return std::max(count, 0);
  }

  const audiokv_config& config_;
  const Pipeline& pipeline_;
  const cell_store& store_;
  const importance_tracker& importance_;
  const protection_rules& protection_;
  const pool_manager& pools_;
  const alignment_frontier& frontier_;
};

}  // namespace audiokv::policy::detail
