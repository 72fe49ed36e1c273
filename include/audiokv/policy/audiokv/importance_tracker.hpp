// SPDX-License-Identifier: Apache-2.0
/// @file
/// The AudioKV policy's per-step state: the importance EMA of each cell, the evaluation flag,
/// the per-speaker baselines and the drift detector that resets them. One fused pass per step.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "../../core/gqa.hpp"
#include "../../core/importance.hpp"
#include "../audiokv_config.hpp"
#include "../detail/cell_store.hpp"

namespace audiokv::policy::detail {

/// @brief Importance I of each cell (an EMA of its attention), whether a step ever gave it at
/// least evaluation_share / n of the attention, and the running mean importance of each speaker
/// with its drift reset. Arrays are sized in the constructor and in reserve() only.
///
/// observe() runs in one pass over the cells, in blocks that stay in L1: per block a branch-free
/// loop (GQA reduction, EMA, evaluation flag) the compiler vectorises, then the per-speaker sums
/// in cell order. Each cell's float operations and each speaker's double additions happen in the
/// same order as the three-pass definition (EMA and flag; sums; drift), so results are
/// bit-identical to it.
class importance_tracker {
 public:
  importance_tracker() = default;
  importance_tracker(const audiokv_config& config, std::int32_t capacity)
      : alpha_(config.alpha),
        evaluation_share_(config.evaluation_share),
        baseline_rate_(config.baseline_rate),
        drift_factor_(config.drift_factor),
        drift_window_(config.drift_window),
        num_speakers_(config.num_speakers),
        neighbour_prior_(config.neighbour_prior) {
    importance_.resize(capacity);
    evaluated_.resize(capacity);
    baseline_.assign(num_speakers_, 0.0f);
    speaker_sum_.assign(num_speakers_, 0.0);
    speaker_count_.assign(num_speakers_, 0);
  }

  importance_tracker(const importance_tracker&) = default;
  importance_tracker& operator=(const importance_tracker&) = default;
  /// Takes every array; `other` is left without arrays (no cell slots and no speaker
  /// baselines, the state of a moved-from cache of capacity 0) until reserve() sizes them.
  importance_tracker(importance_tracker&& other) noexcept
      : alpha_(other.alpha_),
        evaluation_share_(other.evaluation_share_),
        baseline_rate_(other.baseline_rate_),
        drift_factor_(other.drift_factor_),
        drift_window_(other.drift_window_),
        num_speakers_(other.num_speakers_),
        neighbour_prior_(other.neighbour_prior_),
        importance_(std::move(other.importance_)),
        evaluated_(std::move(other.evaluated_)),
        baseline_(std::move(other.baseline_)),
        speaker_sum_(std::move(other.speaker_sum_)),
        speaker_count_(std::move(other.speaker_count_)),
        global_std_(other.global_std_),
        drift_history_(other.drift_history_) {
    other.become_empty();
  }
  /// Move assignment with the moved-from state of the move constructor.
  importance_tracker& operator=(importance_tracker&& other) noexcept {
    if (this != &other) {
      alpha_ = other.alpha_;
      evaluation_share_ = other.evaluation_share_;
      baseline_rate_ = other.baseline_rate_;
      drift_factor_ = other.drift_factor_;
      drift_window_ = other.drift_window_;
      num_speakers_ = other.num_speakers_;
      neighbour_prior_ = other.neighbour_prior_;
      importance_ = std::move(other.importance_);
      evaluated_ = std::move(other.evaluated_);
      baseline_ = std::move(other.baseline_);
      speaker_sum_ = std::move(other.speaker_sum_);
      speaker_count_ = std::move(other.speaker_count_);
      global_std_ = other.global_std_;
      drift_history_ = other.drift_history_;
      other.become_empty();
    }
    return *this;
  }
  ~importance_tracker() = default;

  /// Grows the per-cell arrays to `capacity` slots (never shrinks), keeping their values; a
  /// moved-from tracker also gets its speaker baselines back (at zero).
  void reserve(std::int32_t capacity) {
    if (baseline_.empty()) {
      baseline_.assign(num_speakers_, 0.0f);
      speaker_sum_.assign(num_speakers_, 0.0);
      speaker_count_.assign(num_speakers_, 0);
    }
    if (capacity <= static_cast<std::int32_t>(importance_.size())) return;
    importance_.resize(capacity);
    evaluated_.resize(capacity);
  }

  /// Back to the just-constructed state: speaker baselines and the drift history at zero
  /// (per-cell values are written by on_append before they are read). Allocates nothing.
  void reset() noexcept {
    std::fill(baseline_.begin(), baseline_.end(), 0.0f);
    global_std_ = 0.0;
    drift_history_ = 0;
  }

  /// Cells [first, last) were appended: each starts at its older neighbour's importance when
  /// config.neighbour_prior, else 0, and unevaluated.
  void on_append(std::int32_t first, std::int32_t last) noexcept {
    for (std::int32_t slot = first; slot < last; ++slot) {
      importance_[slot] = neighbour_prior_ && slot > 0 ? importance_[slot - 1] : 0.0f;
      evaluated_[slot] = 0;
    }
  }

  /// One step's validated attention [n] over the cells of `store` (which gives their speakers).
  /// @return true when the drift detector reset the speaker baselines.
  bool observe(const float* attention, std::int32_t n, const cell_store& store) {
    return observe_rows(attention, 1, n, gqa_reduce::mean, store);
  }

  /// One step's validated GQA attention [group_size, n], reduced per cell by `mode`
  /// (core::reduce_group's order) and observed as one row.
  bool observe_group(const float* attention, std::int32_t group_size, std::int32_t n,
                     gqa_reduce mode, const cell_store& store) {
    return observe_rows(attention, group_size, n, mode, store);
  }

  /// @brief The compaction of one cell by a plan, for a caller that moves every per-cell array
  /// in one pass (cell_store::apply_and_move): mover(to, from) copies cell `from`'s importance
  /// and evaluation flag to slot `to`. Valid until the next reserve().
  auto cell_mover() noexcept {
    float* importance = importance_.data();
    std::uint8_t* evaluated = evaluated_.data();
    return [importance, evaluated](std::int32_t to, std::int32_t from) noexcept {
      importance[to] = importance[from];
      evaluated[to] = evaluated[from];
    };
  }

  /// Bytes save() writes for `n` cells.
  std::size_t snapshot_bytes(std::int32_t n) const noexcept {
    return static_cast<std::size_t>(n) * (4 + 1) + static_cast<std::size_t>(num_speakers_) * 4 + 8 +
           8;
  }

  /// Writes the importance and evaluation flag of cells [0, n), the speaker baselines and the
  /// drift state (global_std_, drift_history_). The per-step speaker sums are scratch that
  /// every observe() clears first, so they are not state.
  void save(snapshot_writer& w, std::int32_t n) const noexcept {
    for (std::int32_t j = 0; j < n; ++j) w.f32(importance_[j]);
    for (std::int32_t j = 0; j < n; ++j) w.u8(evaluated_[j]);
    // A moved-from tracker has no baselines: they are 0, as after reset().
    for (std::int32_t s = 0; s < num_speakers_; ++s)
      w.f32(s < speaker_slots() ? baseline_[s] : 0.0f);
    w.f64(global_std_);
    w.i64(drift_history_);
  }

  /// Reads what save() wrote, checking each value (importance and baselines finite and >= 0,
  /// flags 0 or 1, global std finite and >= 0, drift history >= 0); writes only when `commit`.
  /// Allocates nothing (n <= the reserved capacity, checked by the caller).
  void load(snapshot_reader& r, std::int32_t n, bool commit) {
    for (std::int32_t j = 0; j < n; ++j) {
      const float v = r.f32();
      r.check(std::isfinite(v) && v >= 0.0f, v, "importance", j, "must be finite and >= 0");
      if (commit) importance_[j] = v;
    }
    for (std::int32_t j = 0; j < n; ++j) {
      const bool e = r.flag("evaluated", j);
      if (commit) evaluated_[j] = e ? 1 : 0;
    }
    for (std::int32_t s = 0; s < num_speakers_; ++s) {
      const float v = r.f32();
      r.check(std::isfinite(v) && v >= 0.0f, v, "baseline", s, "must be finite and >= 0");
      if (commit && s < speaker_slots()) baseline_[s] = v;
    }
    const double global_std = r.f64();
    r.check(std::isfinite(global_std) && global_std >= 0.0, global_std, "global_std",
            "must be finite and >= 0");
    const std::int64_t history = r.i64();
    r.check(history >= 0, history, "drift_history", "must be >= 0");
    if (commit) {
      global_std_ = global_std;
      drift_history_ = history;
    }
  }

  const float* importance() const noexcept { return importance_.data(); }
  const std::uint8_t* evaluated() const noexcept { return evaluated_.data(); }
  /// [num_speakers] running mean importance per speaker (null once moved from).
  const float* baselines() const noexcept { return baseline_.data(); }

 private:
  friend struct importance_lanes;  // observe() of several trackers side by side

  static constexpr std::int32_t block = 256;  // cells per block: ~3 KiB of working set

  /// The speakers of a block of cells: the store's own array.
  struct own_speakers {
    const std::int32_t* speaker;
    const std::int32_t* operator()(std::int32_t first, std::int32_t) noexcept {
      return speaker + first;
    }
  };
  /// The speakers of a block of cells gathered from the store's shared frame table; with one
  /// speaker every id is 0 and accumulate_speakers() reads only the first.
  struct shared_speakers {
    const cell_store& store;
    std::int32_t num_speakers;
    std::int32_t gathered[block];
    const std::int32_t* operator()(std::int32_t first, std::int32_t len) noexcept {
      if (num_speakers > 1) {
        store.gather_speakers(first, len, gathered);
      } else {
        gathered[0] = 0;
      }
      return gathered;
    }
  };

  bool observe_rows(const float* attention, std::int32_t group_size, std::int32_t n,
                    gqa_reduce mode, const cell_store& store) {
    if (!store.shares_frames()) {
      return observe_blocks(attention, group_size, n, mode, own_speakers{store.speaker()});
    }
    shared_speakers speakers{store, num_speakers_, {}};
    return observe_blocks(attention, group_size, n, mode, speakers);
  }

  template <class Speakers>
  bool observe_blocks(const float* attention, std::int32_t group_size, std::int32_t n,
                      gqa_reduce mode, Speakers&& speakers_of) {
    begin_step();
    float reduced[block];
    for (std::int32_t first = 0; first < n; first += block) {
      const std::int32_t len = std::min(block, n - first);
      const float* row = attention + first;
      if (group_size > 1) {
        // acc = a_0 (op) a_1 (op) ... then / G for the mean: core::reduce_group's order.
        for (std::int32_t g = 1; g < group_size; ++g) {
          // The first pass reads row 0 itself instead of copying it into `reduced` first.
          const float* acc = g == 1 ? row : reduced;
          const float* next = row + static_cast<std::int64_t>(g) * n;
          if (mode == gqa_reduce::max) {
            for (std::int32_t k = 0; k < len; ++k) {
              reduced[k] = core::group_fold(acc[k], next[k], g, gqa_reduce::max);
            }
          } else {
            for (std::int32_t k = 0; k < len; ++k) {
              reduced[k] = core::group_fold(acc[k], next[k], g, gqa_reduce::mean);
            }
          }
        }
        if (mode == gqa_reduce::mean) {
          for (std::int32_t k = 0; k < len; ++k) {
            reduced[k] = core::group_finish(reduced[k], group_size, gqa_reduce::mean);
          }
        }
        row = reduced;
      }
      update_block(row, first, len, n);
      accumulate_speakers(importance_.data() + first, speakers_of(first, len), len);
    }
    return end_step(attention, group_size, n, mode);
  }

  /// Clears this step's per-speaker sums and counts.
  void begin_step() noexcept {
    for (std::int32_t s = 0; s < speaker_slots(); ++s) {
      speaker_sum_[s] = 0.0;
      speaker_count_[s] = 0;
    }
  }

  /// EMA and evaluation flag of cells [first, first + len) from their scores row[0, len), in a
  /// step over n cells: I = importance_update(I, a, alpha); flag |= a * n >= share.
  void update_block(const float* row, std::int32_t first, std::int32_t len,
                    std::int32_t n) noexcept {
    const float alpha = alpha_, share = evaluation_share_, cells = static_cast<float>(n);
    float* imp = importance_.data() + first;
    std::uint8_t* flag = evaluated_.data() + first;
    for (std::int32_t k = 0; k < len; ++k) {
      imp[k] = core::importance_update(imp[k], row[k], alpha);
      flag[k] = static_cast<std::uint8_t>(flag[k] | (row[k] * cells >= share));
    }
  }

  /// The speaker sums of cells [first, first + len) of `store`, with several speakers.
  void accumulate_block(std::int32_t first, std::int32_t len, const cell_store& store) {
    const float* imp = importance_.data() + first;
    if (!store.shares_frames()) {
      accumulate_speakers(imp, store.speaker() + first, len);
      return;
    }
    std::int32_t gathered[block];
    store.gather_speakers(first, len, gathered);
    accumulate_speakers(imp, gathered, len);
  }

  /// The drift detector over the step's raw scores, then each speaker's baseline from its
  /// mean importance this step. @return true when the drift detector reset the baselines.
  bool end_step(const float* attention, std::int32_t group_size, std::int32_t n, gqa_reduce mode) {
    bool reset = false;
    if (n >= drift_window_) {
      reset = group_size > 1 ? is_drift(
                                   [&](std::int32_t j) {
                                     return core::reduce_group(attention, group_size, n, j, mode);
                                   },
                                   n)
                             : is_drift([&](std::int32_t j) { return attention[j]; }, n);
    }
    for (std::int32_t s = 0; s < speaker_slots(); ++s) {
      if (speaker_count_[s] == 0) continue;
      const float mean_now = static_cast<float>(speaker_sum_[s] / speaker_count_[s]);
      const bool fresh = reset || baseline_[s] <= 0.0f;
      baseline_[s] =
          fresh ? mean_now : (1.0f - baseline_rate_) * baseline_[s] + baseline_rate_ * mean_now;
    }
    return reset;
  }

  /// speaker_sum_[speaker[k]] += imp[k] in cell order; a run of one speaker accumulates in a
  /// register (the same additions in the same order as through memory).
  void accumulate_speakers(const float* imp, const std::int32_t* speaker, std::int32_t len) {
    std::int32_t k = 0;
    while (k < len) {
      const std::int32_t s = speaker[k];
      double sum = speaker_sum_[s];
      const std::int32_t start = k;
      if (num_speakers_ == 1) {
        for (; k < len; ++k) sum += imp[k];
      } else {
        for (; k < len && speaker[k] == s; ++k) sum += imp[k];
      }
      speaker_sum_[s] = sum;
      speaker_count_[s] += k - start;
    }
  }

  /// Drift: std of the newest drift_window raw scores (score(j)) against its running mean
  /// global_std_; updates that mean.
  template <class Score>
  bool is_drift(Score score, std::int32_t n) {
    double sum = 0.0, sum_sq = 0.0;
    const std::int32_t w = drift_window_;
    for (std::int32_t j = n - w; j < n; ++j) {
      const float a = score(j);
      sum += a;
      sum_sq += static_cast<double>(a) * a;
    }
    const double mean = sum / w;
    const double recent_std = std::sqrt(std::max(0.0, sum_sq / w - mean * mean));
    const bool drift = drift_history_ >= drift_window_ &&
                       recent_std > drift_factor_ * global_std_ && global_std_ > 0.0;
    global_std_ = drift_history_ == 0
                      ? recent_std
                      : (1.0 - baseline_rate_) * global_std_ + baseline_rate_ * recent_std;
    ++drift_history_;
    return drift;
  }

  /// Speaker baselines held: num_speakers_, or 0 once moved from (until reserve()).
  std::int32_t speaker_slots() const noexcept {
    return static_cast<std::int32_t>(baseline_.size());
  }

  /// The state a move leaves behind: no arrays, the drift history at zero.
  void become_empty() noexcept {
    global_std_ = 0.0;
    drift_history_ = 0;
  }

  float alpha_ = 0.0f;
  float evaluation_share_ = 0.0f;
  float baseline_rate_ = 0.0f;
  float drift_factor_ = 0.0f;
  std::int32_t drift_window_ = 0;
  std::int32_t num_speakers_ = 1;
  bool neighbour_prior_ = false;
  std::vector<float> importance_;            // [capacity] importance, slot order
  std::vector<std::uint8_t> evaluated_;      // [capacity] 1 once attention >= share / n
  std::vector<float> baseline_;              // [num_speakers] running mean importance
  std::vector<double> speaker_sum_;          // [num_speakers] this step's sums
  std::vector<std::int32_t> speaker_count_;  // [num_speakers] this step's counts
  double global_std_ = 0.0;                  // running mean of the recent std
  std::int64_t drift_history_ = 0;           // steps that fed global_std_
};

}  // namespace audiokv::policy::detail
