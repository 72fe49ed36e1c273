// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <audiokv/policy/audiokv/tiered_cache.hpp>
#include <audiokv/policy/baselines/knorm.hpp>
#include <audiokv/policy/eviction_policy.hpp>
#include <audiokv/policy/speech/attention_mass.hpp>
#include <audiokv/pool/entropy_head_budgets.hpp>
#include <audiokv/pool/layer_plan.hpp>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "asr_error.hpp"
#include "kv_eviction_hook.hpp"

namespace asr {

/// @brief Drives one audiokv::eviction_policy per (decoder layer, head) from the cross-attention
/// cache: the policies see the same cells, in the same slot order, as the cache.
///
/// Protocol per clip and (layer, head):
///  * on_head_start: append() one audiokv::frame_meta per cached audio frame (pos = encoder frame
///    index, voice = energy-VAD flag, speaker 0, no flags) in one bulk call;
///  * every decode step: observe() this head's attention probabilities over its kept cells;
///  * once `observe_steps` steps have been observed (the prompt tokens plus the first decode
///    steps, which run on the full cache), plan_to(policy budget) compresses the head in one shot;
///  * afterwards, when `follow_trigger` is set, plan() is applied whenever wants_eviction() fires.
/// With `pass_alignment`, the hook is the engine that knows the model's alignment heads: at
/// every decode step it takes each alignment head's most-attended frame position of the
/// previous step, their median, and the running maximum of the median over the last 3 steps,
/// and passes that to every AudioKV cache (tiered_cache::set_alignment_position).
/// The plan's move_to goes back to the cache (which compacts K/V) and to the policy (apply()).
///
/// Plan granularity (options::granularity, offline protocol only; streaming plans per head):
///  * head: each (layer, head) plans and applies on its own, in its on_step;
///  * layer: one keep-set per layer. At a step where the layer compresses (the one-shot
///    compression, or with follow_trigger any head's trigger), every head's on_step returns
///    false; the last head's on_step makes every head's plan (plan_to(budget) or plan()),
///    rewrites them with audiokv::share_layer_plan (scores reduced by options::head_rule,
///    a cell protected in any AudioKV head kept, only cells some head's own plan evicted may
///    go, as many as the head that evicted most) and applies each to its policy; then
///    on_layer_step hands each head its rewritten move map. All heads start from the same
///    frames, so they hold the same positions from then on. A policy whose plans carry no
///    scores (every baseline) contributes 0 to the reduction: its heads' candidates then go
///    by position (lowest first) among the cells some head evicted.
///
/// Head budgets from attention (options::entropy_budget_exponent not 0). Offline: the
/// one-shot compression waits for the layer's last head, as a layer plan does; the layer's
/// budget (the sum of its policies' budgets) is then split over its heads with
/// audiokv::attention_perplexity_weights of each head's mean attention entropy over the
/// observed steps (audiokv::entropy_head_budgets), and each head plans down to its share
/// (plan_to) on its own: for AudioKV heads, what audiokv::tiered_layer<>::compress_to does
/// (with layer granularity, the plans are then shared as above). Later triggers
/// (follow_trigger) plan to each policy's own budget. Streaming: at every reveal, each layer's
/// budget is split afresh by the heads' mean entropy over every step observed so far, and each
/// head makes room down to its share.
class audiokv_policy_hook final : public kv_eviction_hook {
 public:
  /// Makes the policy of one (layer, head) for a clip; the budget is the policy's business
  /// (typically round(keep_ratio * clip.n_frames)).
  using factory = std::function<std::unique_ptr<audiokv::eviction_policy>(const clip_context& clip,
                                                                          int layer, int head)>;

  /// One keep-set per (layer, head), or per layer (see the class comment).
  enum class plan_granularity { head, layer };

  struct options {
    int observe_steps = 1;        ///< steps on the full cache before the one-shot compression
    bool follow_trigger = false;  ///< after it, also apply plan() when wants_eviction()
    /// Give AudioKV caches the alignment heads' position (asr_whisper: offline only; why not
    /// in a stream: tiered_cache::set_alignment_position).
    bool pass_alignment = true;
    /// Streaming protocol: no compression at observe_steps; before each chunk of frames the
    /// policy evicts down to budget - chunk (plan_to) when it would exceed its budget.
    bool streaming = false;
    /// Each kept cell's attention logit gets log(cells it stands for) (audiokv::attention_mass).
    bool mass_bias = false;
    /// Merge on evict: evicted K/V rows fold into the kept cell that stands for them
    /// (attention_mass::merge_evicted); implies mass_bias.
    bool merge = false;
    /// Offline protocol: plans per head (default) or one shared plan per layer.
    plan_granularity granularity = plan_granularity::head;
    /// Per-layer plans: how a cell's scores over the heads reduce to one.
    audiokv::head_reduce head_rule = audiokv::head_reduce::max;
    /// Not 0: each layer's budget is split over its heads by attention perplexity to this
    /// power (see the class comment); 0: each head keeps its policy's budget.
    double entropy_budget_exponent = 0.0;
    /// With entropy budgets: each head's share is at least this fraction of its policy's budget
    /// (0: one cell).
    double entropy_budget_floor = 0.0;
  };

  audiokv_policy_hook(factory make, options opt) : make_(std::move(make)), opt_(opt) {
    opt_.mass_bias = opt_.mass_bias || opt_.merge;
  }

  std::string policy_name() const {
    return policies_.empty() || !policies_[0] ? std::string("?") : policies_[0]->name();
  }

  void on_clip_start(const clip_context& clip) override {
    clip_ = clip;
    policies_.clear();
    policies_.resize(static_cast<size_t>(clip.n_layers) * clip.n_heads);
    observed_.assign(policies_.size(), 0);
    layer_entropy_.clear();
    reveal_shares_.assign(static_cast<size_t>(clip.n_layers), {});
    if (opt_.entropy_budget_exponent != 0.0) {
      layer_entropy_.assign(
          static_cast<size_t>(clip.n_layers),
          audiokv::entropy_head_budgets(clip.n_heads, opt_.entropy_budget_exponent));
    }
    is_alignment_.assign(policies_.size(), 0);
    mass_.clear();
    if (opt_.mass_bias) mass_.assign(policies_.size(), audiokv::attention_mass(clip.n_frames));
    if (clip.alignment_heads != nullptr) {
      for (const auto& lh : *clip.alignment_heads) {
        if (lh.first < clip.n_layers && lh.second < clip.n_heads) {
          is_alignment_[idx(lh.first, lh.second)] = 1;
        }
      }
    }
    layer_plans_.resize(static_cast<size_t>(clip.n_heads));
    pending_.assign(static_cast<size_t>(clip.n_heads), 0);
    pending_layer_ = -1;
    moved_head_ = -1;
    step_peaks_.clear();
    recent_.clear();
    frontier_ = -1;
    step_ = -1;
    for (int l = 0; l < clip.n_layers; ++l) {
      for (int h = 0; h < clip.n_heads; ++h) {
        auto p = make_(clip, l, h);
        if (!p) throw asr_error("policy factory returned no policy");
        policies_[idx(l, h)] = std::move(p);
      }
    }
  }

  void on_head_start(const head_view& v) override { append_cells(v, 0, v.n_kv); }

  bool on_reveal(const head_view& v, int incoming, std::vector<int32_t>& move_to) override {
    if (!opt_.streaming) return false;
    audiokv::eviction_policy& p = *policies_[idx(v.layer, v.head)];
    const int budget = streaming_budget(v.layer, v.head);
    if (p.num_cells() + incoming <= budget) return false;
    p.plan_to(std::max(1, budget - incoming), plan_);
    if (plan_.empty()) return false;
    moved_head_ = -1;
    move_to = plan_.move_to;
    p.apply(plan_);
    return true;
  }

  void on_append(const head_view& v, int /*first*/, int count) override {
    append_cells(v, v.n_kv - count, count);
  }

  bool on_step(const step_view& s, std::vector<int32_t>& move_to) override {
    if (s.step != step_) start_step(s.step);
    audiokv::eviction_policy& p = *policies_[idx(s.cache.layer, s.cache.head)];
    // The peaks feed only the position passed to the caches; without it they are not taken.
    if (opt_.pass_alignment && !s.is_prompt && is_alignment_[idx(s.cache.layer, s.cache.head)] &&
        s.cache.n_kv > 0) {
      step_peaks_.push_back(
          s.cache.pos[std::max_element(s.probs, s.probs + s.cache.n_kv) - s.probs]);
    }
    if (p.num_cells() != s.cache.n_kv) {
      throw asr_error("policy '" + std::string(p.name()) + "' holds " +
                      std::to_string(p.num_cells()) + " cells, the cache " +
                      std::to_string(s.cache.n_kv));
    }
    p.observe(s.probs, s.cache.n_kv);
    int& seen = observed_[idx(s.cache.layer, s.cache.head)];
    ++seen;
    if ((opt_.streaming || seen <= opt_.observe_steps) && !layer_entropy_.empty()) {
      layer_entropy_[static_cast<size_t>(s.cache.layer)].observe(
          s.cache.head, audiokv::span<const float>(s.probs, static_cast<size_t>(s.cache.n_kv)));
    }
    if (opt_.streaming) {
      return false;
    } else if (opt_.granularity == plan_granularity::layer ||
               (!layer_entropy_.empty() && seen == opt_.observe_steps)) {
      if (s.cache.head == clip_.n_heads - 1) plan_layer(s.cache.layer);
      return false;
    } else if (seen == opt_.observe_steps) {
      p.plan_to(p.budget(), plan_);
    } else if (seen > opt_.observe_steps && opt_.follow_trigger && p.wants_eviction()) {
      p.plan(plan_);
    } else {
      return false;
    }
    if (plan_.empty()) return false;
    // A plan that only moves cells between pools keeps every row in place; the cache still
    // hears of it, for an int8 buffer arena.
    moved_head_ = -1;
    move_to = plan_.move_to;
    p.apply(plan_);
    return true;
  }

  /// Per-layer plans: the move map of (layer, head) from the layer plan its last head's
  /// on_step made and applied at this step, once.
  bool on_layer_step(int layer, int head, std::vector<int32_t>& move_to) override {
    if (layer != pending_layer_ || pending_[static_cast<size_t>(head)] == 0) return false;
    pending_[static_cast<size_t>(head)] = 0;
    moved_head_ = head;
    move_to = layer_plans_[static_cast<size_t>(head)].move_to;
    return true;
  }

  /// The plan of the on_step/on_layer_step/on_reveal that just returned true: merge the rows,
  /// then move the weights with the cells.
  void on_move(int layer, int head, float* k, float* v, const int32_t* pos, int /*n_kv*/,
               int head_dim) override {
    if (!opt_.mass_bias) return;
    audiokv::attention_mass& mass = mass_[idx(layer, head)];
    const audiokv::eviction_plan& moved =
        moved_head_ < 0 ? plan_ : layer_plans_[static_cast<size_t>(moved_head_)];
    if (opt_.merge) {
      mass.merge_evicted(moved, pos, k, head_dim, head_dim);
      mass.merge_evicted(moved, pos, v, head_dim, head_dim);
    }
    mass.apply(moved, pos);
  }

  const float* logit_bias(int layer, int head) const override {
    return opt_.mass_bias ? mass_[idx(layer, head)].logit_bias() : nullptr;
  }

  const audiokv::pool_tier* tiers(int layer, int head) const override {
    return policies_[idx(layer, head)]->tiers();
  }

 private:
  size_t idx(int l, int h) const { return static_cast<size_t>(l) * clip_.n_heads + h; }

  /// Appends cells [first, first + count) of the view to its policy, one frame_meta each (pos =
  /// encoder frame index, voice = energy-VAD flag, speaker 0, no flags).
  void append_cells(const head_view& v, int first, int count) {
    std::vector<audiokv::frame_meta> frames(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      audiokv::frame_meta& f = frames[static_cast<size_t>(i)];
      f.pos = v.pos[first + i];
      f.voice = (clip_.is_voice != nullptr && clip_.is_voice[f.pos]) ? 1.0f : 0.0f;
    }
    audiokv::eviction_policy& p = *policies_[idx(v.layer, v.head)];
    p.append(frames.data(), count);
    if (opt_.mass_bias) mass_[idx(v.layer, v.head)].append(count);
    // Knorm scores keys, not attention: hand it the L2 norm of every appended key row.
    if (auto* by_key_norm = dynamic_cast<audiokv::knorm*>(&p)) {
      std::vector<float> norms(static_cast<size_t>(count));
      for (int i = 0; i < count; ++i) {
        double sum = 0.0;
        for (int d = 0; d < v.head_dim; ++d) {
          const double x = v.k[static_cast<size_t>(first + i) * v.head_dim + d];
          sum += x * x;
        }
        norms[static_cast<size_t>(i)] = static_cast<float>(std::sqrt(sum));
      }
      by_key_norm->set_key_norms(first, norms.data(), count);
    }
  }

  /// One plan for every head of `layer` when it compresses at this step (the one-shot
  /// compression, or with follow_trigger any head's trigger): each head plans, the plans are
  /// shared (audiokv::share_layer_plan) and applied; on_layer_step hands out the move maps.
  void plan_layer(int layer) {
    const int heads = clip_.n_heads;
    // Every head of a layer observes the same steps.
    const int seen = observed_[idx(layer, 0)];
    const bool compress = seen == opt_.observe_steps;
    bool triggered = false;
    if (!compress && seen > opt_.observe_steps && opt_.follow_trigger) {
      for (int h = 0; h < heads; ++h)
        triggered = triggered || policies_[idx(layer, h)]->wants_eviction();
    }
    if (!compress && !triggered) return;
    const std::vector<std::int32_t> budgets =
        compress ? layer_budgets(layer) : std::vector<std::int32_t>();
    for (int h = 0; h < heads; ++h) {
      audiokv::eviction_policy& p = *policies_[idx(layer, h)];
      audiokv::eviction_plan& out = layer_plans_[static_cast<size_t>(h)];
      if (compress) {
        p.plan_to(budgets[static_cast<size_t>(h)], out);
      } else {
        p.plan(out);
      }
    }
    if (opt_.granularity == plan_granularity::layer) share_plans(layer);
    pending_layer_ = layer;
    for (int h = 0; h < heads; ++h) {
      const audiokv::eviction_plan& plan = layer_plans_[static_cast<size_t>(h)];
      pending_[static_cast<size_t>(h)] = plan.empty() ? 0 : 1;
      if (!plan.empty()) policies_[idx(layer, h)]->apply(plan);
    }
  }

  /// The budget of each head of `layer`: its policy's budget, or with entropy budgets the
  /// layer's total shared by entropy_head_budgets::shares (by attention perplexity once every
  /// head has observed a step; each share at least entropy_budget_floor of a policy's budget,
  /// and one cell).
  std::vector<std::int32_t> layer_budgets(int layer) const {
    const int heads = clip_.n_heads;
    std::vector<std::int32_t> budgets(static_cast<size_t>(heads));
    for (int h = 0; h < heads; ++h)
      budgets[static_cast<size_t>(h)] = policies_[idx(layer, h)]->budget();
    if (layer_entropy_.empty()) return budgets;
    std::int64_t total = 0;
    for (const std::int32_t b : budgets) total += b;
    const std::int32_t floor =
        std::max(1, static_cast<std::int32_t>(opt_.entropy_budget_floor *
                                              *std::min_element(budgets.begin(), budgets.end())));
    return layer_entropy_[static_cast<size_t>(layer)].shares(total, floor);
  }

  /// Streaming: the budget of (layer, head) for this reveal. With entropy budgets, the layer's
  /// split is made afresh at its head 0 (the reveal visits a layer's heads in order) from every
  /// step observed so far.
  int streaming_budget(int layer, int head) {
    if (layer_entropy_.empty()) return policies_[idx(layer, head)]->budget();
    std::vector<std::int32_t>& share = reveal_shares_[static_cast<size_t>(layer)];
    if (head == 0) share = layer_budgets(layer);
    return share[static_cast<size_t>(head)];
  }

  /// Rewrites the layer's plans into one keep-set (audiokv::share_layer_plan).
  void share_plans(int layer) {
    audiokv::share_layer_plan(
        audiokv::span<audiokv::eviction_plan>(layer_plans_.data(), layer_plans_.size()),
        opt_.head_rule,
        [&](int32_t h, int32_t c) {
          const auto* cache =
              dynamic_cast<const audiokv::tiered_cache<>*>(policies_[idx(layer, h)].get());
          return cache != nullptr && cache->is_protected(c);
        },
        layer_ws_);
  }

  /// Frontier from the previous step's alignment-head peaks, passed to every AudioKV cache.
  void start_step(int step) {
    step_ = step;
    if (step_peaks_.empty()) return;
    std::sort(step_peaks_.begin(), step_peaks_.end());
    recent_.push_back(step_peaks_[(step_peaks_.size() - 1) / 2]);
    step_peaks_.clear();
    if (recent_.size() > 3) recent_.erase(recent_.begin());
    std::vector<int32_t> sorted = recent_;
    std::sort(sorted.begin(), sorted.end());
    frontier_ = std::max(frontier_, sorted[(sorted.size() - 1) / 2]);
    for (auto& p : policies_) {
      if (auto* cache = dynamic_cast<audiokv::tiered_cache<>*>(p.get())) {
        cache->set_alignment_position(frontier_);
      }
    }
  }

  factory make_;
  options opt_;
  clip_context clip_;
  std::vector<std::unique_ptr<audiokv::eviction_policy>> policies_;
  std::vector<int> observed_;
  std::vector<audiokv::entropy_head_budgets> layer_entropy_;  // [layers] with entropy budgets
  std::vector<std::vector<std::int32_t>> reveal_shares_;      // [layers][heads] this reveal's
  std::vector<audiokv::attention_mass> mass_;  // [layers * heads] with options::mass_bias
  std::vector<uint8_t> is_alignment_;          // [layers * heads] 1 for the model's alignment heads
  std::vector<int32_t> step_peaks_;            // this step's alignment-head peak positions
  std::vector<int32_t> recent_;                // median peak of the last (up to) 3 steps
  int32_t frontier_ = -1;
  int step_ = -1;
  audiokv::eviction_plan plan_;
  std::vector<audiokv::eviction_plan> layer_plans_;  // [heads] per-layer plans of one layer
  std::vector<uint8_t> pending_;                     // [heads] 1: move of layer_plans_[h] due
  int pending_layer_ = -1;                           // layer whose moves on_layer_step hands out
  audiokv::layer_plan_workspace layer_ws_;
  int moved_head_ = -1;  // plan of the last move map handed out: plan_ (-1) or layer_plans_[h]
};

}  // namespace asr
