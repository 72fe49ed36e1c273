// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <audiokv/policy/baselines/knorm.hpp>
#include <audiokv/policy/eviction_policy.hpp>
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
/// The plan's move_to goes back to the cache (which compacts K/V) and to the policy (apply()).
class audiokv_policy_hook final : public kv_eviction_hook {
 public:
  /// Makes the policy of one (layer, head) for a clip; the budget is the policy's business
  /// (typically round(keep_ratio * clip.n_frames)).
  using factory = std::function<std::unique_ptr<audiokv::eviction_policy>(const clip_context& clip,
                                                                          int layer, int head)>;

  struct options {
    int observe_steps = 1;        ///< steps on the full cache before the one-shot compression
    bool follow_trigger = false;  ///< after it, also apply plan() when wants_eviction()
  };

  audiokv_policy_hook(factory make, options opt) : make_(std::move(make)), opt_(opt) {}

  std::string policy_name() const {
    return policies_.empty() || !policies_[0] ? std::string("?") : policies_[0]->name();
  }

  void on_clip_start(const clip_context& clip) override {
    clip_ = clip;
    policies_.clear();
    policies_.resize(static_cast<size_t>(clip.n_layers) * clip.n_heads);
    observed_.assign(policies_.size(), 0);
    for (int l = 0; l < clip.n_layers; ++l) {
      for (int h = 0; h < clip.n_heads; ++h) {
        auto p = make_(clip, l, h);
        if (!p) throw asr_error("policy factory returned no policy");
        policies_[idx(l, h)] = std::move(p);
      }
    }
  }

  void on_head_start(const head_view& v) override {
    std::vector<audiokv::frame_meta> frames(static_cast<size_t>(v.n_kv));
    for (int i = 0; i < v.n_kv; ++i) {
      audiokv::frame_meta& f = frames[static_cast<size_t>(i)];
      f.pos = v.pos[i];
      f.voice = (clip_.is_voice != nullptr && clip_.is_voice[v.pos[i]]) ? 1.0f : 0.0f;
    }
    audiokv::eviction_policy& p = *policies_[idx(v.layer, v.head)];
    p.append(frames.data(), v.n_kv);
    // Knorm scores keys, not attention: hand it the L2 norm of every appended key row.
    if (auto* by_key_norm = dynamic_cast<audiokv::knorm*>(&p)) {
      std::vector<float> norms(static_cast<size_t>(v.n_kv));
      for (int i = 0; i < v.n_kv; ++i) {
        double sum = 0.0;
        for (int d = 0; d < v.head_dim; ++d) {
          const double x = v.k[static_cast<size_t>(i) * v.head_dim + d];
          sum += x * x;
        }
        norms[static_cast<size_t>(i)] = static_cast<float>(std::sqrt(sum));
      }
      by_key_norm->set_key_norms(0, norms.data(), v.n_kv);
    }
  }

  bool on_step(const step_view& s, std::vector<int32_t>& move_to) override {
    audiokv::eviction_policy& p = *policies_[idx(s.cache.layer, s.cache.head)];
    if (p.num_cells() != s.cache.n_kv) {
      throw asr_error("policy '" + std::string(p.name()) + "' holds " +
                      std::to_string(p.num_cells()) + " cells, the cache " +
                      std::to_string(s.cache.n_kv));
    }
    p.observe(s.probs, s.cache.n_kv);
    int& seen = observed_[idx(s.cache.layer, s.cache.head)];
    ++seen;
    if (seen == opt_.observe_steps) {
      p.plan_to(p.budget(), plan_);
    } else if (seen > opt_.observe_steps && opt_.follow_trigger && p.wants_eviction()) {
      p.plan(plan_);
    } else {
      return false;
    }
    if (plan_.empty()) return false;
    // A plan that only moves cells between pools keeps every row in place; the cache still
    // hears of it, for an int8 buffer arena.
    move_to = plan_.move_to;
    p.apply(plan_);
    return true;
  }

  const audiokv::pool_tier* tiers(int layer, int head) const override {
    return policies_[idx(layer, head)]->tiers();
  }

 private:
  size_t idx(int l, int h) const { return static_cast<size_t>(l) * clip_.n_heads + h; }

  factory make_;
  options opt_;
  clip_context clip_;
  std::vector<std::unique_ptr<audiokv::eviction_policy>> policies_;
  std::vector<int> observed_;
  audiokv::eviction_plan plan_;
};

}  // namespace asr
