// SPDX-License-Identifier: Apache-2.0
/// @file
/// Attention-mass correction for evicted cells. Softmax attention gives a stretch of audio mass
/// in proportion to the cells it holds; neighbouring speech frames have near-equal keys, so a
/// stretch thinned to a k-th of its cells gets about a k-th of its attention. Uniform thinning
/// keeps the balance between stretches; any other eviction (dense sinks, dense recent audio,
/// score clusters) shifts attention towards what was kept densely, and a decoder that attends
/// back to audio it has transcribed repeats itself. Each kept cell therefore stands for the
/// evicted cells nearest to it in time, and the engine adds log(weight) to its attention logit
/// (as merged tokens carry log(size) in A-ToMe, arXiv 2306.16009), so a thinned stretch keeps
/// its mass: sum over kept of w_j exp(s_j) approximates the sum over all cells when evicted
/// neighbours had scores close to their keeper's.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "../../core/compaction.hpp"
#include "../../core/merge.hpp"
#include "../../error.hpp"
#include "../../types/eviction_plan.hpp"

namespace audiokv::policy::speech {

/// @brief Weights w_j >= 1 (cells each kept cell stands for) of one cache, kept in slot order
/// alongside the policy's cells, and their logarithms as logit biases.
///
/// Invariant: the weights sum to the number of cells ever appended and not dropped by a plan
/// that leaves no kept cell. Memory is sized by the constructor; append and apply never
/// allocate.
class attention_mass {
 public:
  explicit attention_mass(std::int32_t capacity)
      : weight_(static_cast<std::size_t>(capacity)), bias_(static_cast<std::size_t>(capacity)) {
    AUDIOKV_REQUIRE(capacity >= 0, "attention_mass", "capacity", capacity, "must be >= 0");
  }
  /// An independent copy of the weights.
  attention_mass(const attention_mass&) = default;
  /// Copy assignment: see the copy constructor.
  attention_mass& operator=(const attention_mass&) = default;
  /// Takes the weights; `other` is left empty with capacity 0 (as attention_mass(0)).
  attention_mass(attention_mass&& other) noexcept
      : weight_(std::move(other.weight_)),
        bias_(std::move(other.bias_)),
        size_(std::exchange(other.size_, 0)) {}
  /// Move assignment, with the moved-from state of the move constructor.
  attention_mass& operator=(attention_mass&& other) noexcept {
    if (this != &other) {
      weight_ = std::move(other.weight_);
      bias_ = std::move(other.bias_);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~attention_mass() = default;

  /// `count` new cells of weight 1 (bias 0) after the current ones.
  void append(std::int32_t count) {
    AUDIOKV_REQUIRE(count >= 0 && static_cast<std::size_t>(size_) + count <= weight_.size(),
                    "attention_mass::append", "count", count, "exceeds the capacity");
    for (std::int32_t i = size_; i < size_ + count; ++i) {
      weight_[i] = 1.0;
      bias_[i] = 0.0f;
    }
    size_ += count;
  }

  /// Merge on evict (A-ToMe, arXiv 2306.16009): before the rows compact, folds every evicted
  /// row into the row of the kept cell that will stand for it (the one apply() gives its
  /// weight), as the weighted mean of the group's rows, core::merge_rows:
  ///   row_t = sum_c w_c row_c / sum_c w_c  over t and the evicted cells c it stands for.
  /// With log(weight) as its logit bias after apply(), a merged cell then carries its group's
  /// attention mass with the group's mean key and value. Call it once for K and once for V, in
  /// the slot order of the plan (before the compaction), then compact, then apply(). Rows of
  /// kept cells that stand for nobody are not written. Allocates nothing.
  /// @param pos [plan.n_kv_before] positions of the cells before the plan, ascending.
  /// @param rows [plan.n_kv_before] rows of `dim` floats, `stride` floats apart.
  void merge_evicted(const eviction_plan& plan, const std::int32_t* pos, float* rows,
                     std::int32_t dim, std::int64_t stride) const {
    constexpr const char* where = "attention_mass::merge_evicted";
    AUDIOKV_REQUIRE(plan.n_kv_before == size_, where, "plan.n_kv_before", plan.n_kv_before,
                    "must equal the cells held");
    AUDIOKV_REQUIRE(dim >= 1, where, "dim", dim, "must be >= 1");
    AUDIOKV_REQUIRE(stride >= dim, where, "stride", stride, "must be >= dim");
    // Keepers never decrease with the slot, so each keeper's cells form one run of slots.
    std::int32_t keeper = -1, first = 0, last = 0;
    for_each_evicted(plan, pos, [&](std::int32_t i, std::int32_t to) {
      if (to != keeper) {
        if (keeper >= 0) core::merge_rows(rows, stride, dim, weight_.data(), first, last, keeper);
        keeper = to;
        first = i < to ? i : to;
      }
      last = i > to ? i : to;
    });
    if (keeper >= 0) core::merge_rows(rows, stride, dim, weight_.data(), first, last, keeper);
  }

  /// Applies a plan made for the current cells: each evicted cell's weight goes to the kept
  /// cell nearest to it in position (ties: the older), then the kept cells compact.
  /// @param pos [plan.n_kv_before] positions of the cells before the plan, ascending.
  void apply(const eviction_plan& plan, const std::int32_t* pos) {
    AUDIOKV_REQUIRE(plan.n_kv_before == size_, "attention_mass::apply", "plan.n_kv_before",
                    plan.n_kv_before, "must equal the cells held");
    for_each_evicted(plan, pos,
                     [&](std::int32_t i, std::int32_t to) { weight_[to] += weight_[i]; });
    for (std::int32_t i = 0; i < size_; ++i) {
      const std::int32_t to = plan.move_to[i];
      if (to != core::evicted_slot) weight_[to] = weight_[i];
    }
    size_ = plan.n_kv_after;
    for (std::int32_t j = 0; j < size_; ++j) bias_[j] = static_cast<float>(std::log(weight_[j]));
  }

  std::int32_t size() const noexcept { return size_; }
  /// [size()] cells each kept cell stands for.
  const double* weights() const noexcept { return weight_.data(); }
  /// [size()] log(weights()): add to each cell's attention logit.
  const float* logit_bias() const noexcept { return bias_.data(); }

 private:
  /// Calls f(i, t) for each evicted slot i, in slot order, with t the slot of the kept cell
  /// nearest to it in position (ties: the older); nothing when the plan keeps no cell.
  template <class F>
  void for_each_evicted(const eviction_plan& plan, const std::int32_t* pos, F&& f) const {
    std::int32_t previous_kept = -1;  // slot of the latest kept cell before i
    std::int32_t next_kept = 0;       // first kept slot at or after i
    for (std::int32_t i = 0; i < size_; ++i) {
      if (plan.move_to[i] != core::evicted_slot) {
        previous_kept = i;
        continue;
      }
      if (next_kept <= i) {
        next_kept = i + 1;
        while (next_kept < size_ && plan.move_to[next_kept] == core::evicted_slot) ++next_kept;
      }
      const bool has_next = next_kept < size_;
      std::int32_t to = previous_kept;
      if (to < 0 || (has_next && pos[next_kept] - pos[i] < pos[i] - pos[to])) to = next_kept;
      if (to >= 0 && to < size_) f(i, to);
    }
  }

  std::vector<double> weight_;
  std::vector<float> bias_;
  std::int32_t size_ = 0;
};

}  // namespace audiokv::policy::speech

namespace audiokv {
using policy::speech::attention_mass;
}  // namespace audiokv
