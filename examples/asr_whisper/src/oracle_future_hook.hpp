// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <vector>

#include "asr_error.hpp"
#include "kv_eviction_hook.hpp"

namespace asr {

/// @brief The attention of a full-cache run over every decode step, per (layer, head) and
/// frame, turned into future sums: after finish(), at(step, layer, head)[p] = sum over steps s
/// >= step of the attention probability frame p received at step s (the last computation of
/// the step: under the streaming protocol a step is recomputed after each reveal, and the one
/// that chose the token counts).
class attention_record {
 public:
  void start(const clip_context& clip) {
    layers_ = clip.n_layers;
    heads_ = clip.n_heads;
    frames_ = clip.n_frames;
    steps_ = 0;
    sums_.clear();
  }

  /// Step `step`'s probabilities over the cells at positions pos[0..n) of (layer, head); a
  /// later call for the same step replaces the earlier one.
  void record(int step, int layer, int head, const int32_t* pos, const float* probs, int n) {
    if (step >= steps_) {
      sums_.resize(static_cast<size_t>(step + 1) * row_stride(), 0.0f);
      steps_ = step + 1;
    }
    float* row = sums_.data() + static_cast<size_t>(step) * row_stride() +
                 (static_cast<size_t>(layer) * heads_ + head) * frames_;
    std::fill(row, row + frames_, 0.0f);
    for (int i = 0; i < n; ++i) {
      if (pos[i] >= 0 && pos[i] < frames_) row[pos[i]] = probs[i];
    }
  }

  /// Turns the per-step rows into suffix sums over the steps.
  void finish() {
    for (int s = steps_ - 2; s >= 0; --s) {
      float* row = sums_.data() + static_cast<size_t>(s) * row_stride();
      const float* next = row + row_stride();
      for (size_t i = 0; i < row_stride(); ++i) row[i] += next[i];
    }
  }

  /// [frames] future attention of (layer, head) from `step` on; null past the run's last step.
  const float* at(int step, int layer, int head) const {
    if (step < 0 || step >= steps_) return nullptr;
    return sums_.data() + static_cast<size_t>(step) * row_stride() +
           (static_cast<size_t>(layer) * heads_ + head) * frames_;
  }

  int frames() const { return frames_; }

 private:
  size_t row_stride() const { return static_cast<size_t>(layers_) * heads_ * frames_; }

  int layers_ = 0, heads_ = 0, frames_ = 0, steps_ = 0;
  std::vector<float> sums_;  // [steps][layers][heads][frames]
};

/// @brief The full cache, recording its attention into an attention_record (the oracle's
/// source); transcripts are those of keep_all_hook.
class recording_hook final : public kv_eviction_hook {
 public:
  explicit recording_hook(std::shared_ptr<attention_record> record) : record_(std::move(record)) {}

  void on_clip_start(const clip_context& clip) override { record_->start(clip); }
  bool on_step(const step_view& s, std::vector<int32_t>& /*move_to*/) override {
    record_->record(s.step, s.cache.layer, s.cache.head, s.cache.pos, s.probs, s.cache.n_kv);
    return false;
  }
  void on_clip_end() override { record_->finish(); }

 private:
  std::shared_ptr<attention_record> record_;
};

/// @brief oracle_future (a ceiling, not a policy a user can run): at each eviction it keeps the
/// cells that the rest of the same clip's full-cache run attends most, sum over steps s >= the
/// current step of that run's attention probability (attention_record), per (layer, head).
/// Evictions come where audiokv_policy_hook makes them, with the same budget: offline once,
/// after `observe_steps` steps; streaming before each reveal that would exceed the budget, down
/// to budget - incoming. Ties keep the newer cell. The window sinks of the streaming protocol
/// are outside the cells, as for every policy.
class oracle_future_hook final : public kv_eviction_hook {
 public:
  /// budget(clip): cells each (layer, head) may hold.
  oracle_future_hook(std::shared_ptr<const attention_record> record,
                     std::function<int(const clip_context&)> budget, int observe_steps,
                     bool streaming)
      : record_(std::move(record)),
        budget_of_(std::move(budget)),
        observe_steps_(observe_steps),
        streaming_(streaming) {}

  void on_clip_start(const clip_context& clip) override {
    if (record_->frames() != clip.n_frames) {
      throw asr_error("oracle_future: the recorded full-cache run has another frame count");
    }
    clip_ = clip;
    budget_ = std::max(1, budget_of_(clip));
    seen_.assign(static_cast<size_t>(clip.n_layers) * clip.n_heads, 0);
    step_ = 0;
  }

  bool on_step(const step_view& s, std::vector<int32_t>& move_to) override {
    step_ = s.step;
    int& seen = seen_[static_cast<size_t>(s.cache.layer) * clip_.n_heads + s.cache.head];
    ++seen;
    if (streaming_ || seen != observe_steps_) return false;
    // Offline: the one-shot compression after this step; the future starts at the next one.
    return keep_best(s.cache, budget_, s.step + 1, move_to);
  }

  bool on_reveal(const head_view& v, int incoming, std::vector<int32_t>& move_to) override {
    if (!streaming_ || v.n_kv + incoming <= budget_) return false;
    // The current step is computed again after the reveal: its attention is still to come.
    return keep_best(v, std::max(1, budget_ - incoming), step_, move_to);
  }

 private:
  bool keep_best(const head_view& v, int keep, int from_step, std::vector<int32_t>& move_to) {
    if (v.n_kv <= keep) return false;
    const float* future = record_->at(from_step, v.layer, v.head);
    order_.resize(static_cast<size_t>(v.n_kv));
    std::iota(order_.begin(), order_.end(), 0);
    auto score = [&](int i) { return future != nullptr ? future[v.pos[i]] : 0.0f; };
    // Highest future attention first; ties: the newer cell.
    std::nth_element(order_.begin(), order_.begin() + keep, order_.end(), [&](int a, int b) {
      const float sa = score(a), sb = score(b);
      return sa != sb ? sa > sb : a > b;
    });
    keep_flag_.assign(static_cast<size_t>(v.n_kv), 0);
    for (int i = 0; i < keep; ++i) keep_flag_[static_cast<size_t>(order_[i])] = 1;
    move_to.assign(static_cast<size_t>(v.n_kv), -1);
    int32_t next = 0;
    for (int i = 0; i < v.n_kv; ++i) {
      if (keep_flag_[static_cast<size_t>(i)]) move_to[static_cast<size_t>(i)] = next++;
    }
    return true;
  }

  std::shared_ptr<const attention_record> record_;
  std::function<int(const clip_context&)> budget_of_;
  int observe_steps_;
  bool streaming_;
  clip_context clip_;
  int budget_ = 1;
  int step_ = 0;
  std::vector<int> seen_;
  std::vector<int> order_;
  std::vector<uint8_t> keep_flag_;
};

}  // namespace asr
