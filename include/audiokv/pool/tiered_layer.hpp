// SPDX-License-Identifier: Apache-2.0
/// @file
/// The AudioKV heads of one layer that compress together: each KV head is a tiered_cache, and a
/// one-shot compression of the layer shares its cells out by what each head was seen to attend
/// (entropy_head_budgets), instead of giving every head the same number.
///
///   compress_to(T):  layer budget = H * T cells
///                    share_h     = entropy_head_budgets::split(H * T) (P_h^G, exact total,
///                                  floor 1), or T for every head while a head has observed
///                                  no step
///                    plan_h      = head h's plan_to(share_h)
///
/// Between compressions each head keeps its own budget (its plan(), its trigger), as a
/// tiered_cache on its own does: the split was measured for a compression after a prompt or an
/// utterance (Whisper offline, benchmarks/results/quality_head_entropy_test.md); splitting
/// afresh at every make-room of a stream was not better on the dev clips
/// (quality_dev_head_entropy_streaming.md), so a streaming host makes room per head.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../error.hpp"
#include "../policy/audiokv/tiered_cache.hpp"
#include "../policy/audiokv_config.hpp"
#include "../span.hpp"
#include "../types/eviction_plan.hpp"
#include "entropy_head_budgets.hpp"

namespace audiokv::pool {

/// @brief H tiered_cache heads of one layer and the attention entropy that splits its budget.
/// @tparam Pipeline the heads' smoothing stages (tiered_cache's parameter).
///
/// Every head is built from the same configuration, so each has config.budget as its own
/// budget (its trigger, and what it may hold before a compression: a prompt compressed once
/// must fit in it) and the layer H * config.budget. The engine appends, applies and compacts
/// per head (head(h)); it observes through the layer, so that the entropy sees every step the
/// heads see. A call that throws leaves every head and the entropy as they were.
template <class Pipeline = default_pipeline>
class tiered_layer {
 public:
  using cache_type = tiered_cache<Pipeline>;  ///< one KV head

  /// Builds `num_heads` heads from `config` and `pipeline`, and the layer's entropy state.
  /// @param exponent G of the split (entropy_head_budgets; 0 gives equal shares).
  /// @throws audiokv::error naming "num_heads", "exponent" or the first invalid field of
  ///         `config`.
  tiered_layer(const audiokv_config& config, std::int32_t num_heads, Pipeline pipeline = Pipeline{},
               double exponent = entropy_head_budgets::default_exponent)
      : entropy_(num_heads, exponent) {
    heads_.reserve(static_cast<std::size_t>(num_heads));
    for (std::int32_t h = 0; h < num_heads; ++h) heads_.emplace_back(config, pipeline);
    head_ptrs_.resize(heads_.size());
  }

  /// KV heads of the layer.
  std::int32_t num_heads() const noexcept { return static_cast<std::int32_t>(heads_.size()); }
  /// Head h, to append, apply a plan, or read (num_cells, positions, tiers, ...).
  /// @throws audiokv::error naming "head" when h is out of range.
  cache_type& head(std::int32_t h) {
    check_head("tiered_layer::head", h);
    return heads_[static_cast<std::size_t>(h)];
  }
  /// Head h, read only.
  /// @throws audiokv::error naming "head" when h is out of range.
  const cache_type& head(std::int32_t h) const {
    check_head("tiered_layer::head", h);
    return heads_[static_cast<std::size_t>(h)];
  }
  /// The steps observed so far and their entropy per head.
  const entropy_head_budgets& attention_entropy() const noexcept { return entropy_; }

  /// One step of head h: its attention probabilities over its cells, to the head
  /// (tiered_cache::observe) and to the entropy.
  /// @throws audiokv::error naming "head", or what tiered_cache::observe names; nothing changes.
  void observe(std::int32_t h, span<const float> attention) {
    head(h).observe(attention.data(), static_cast<std::int32_t>(attention.size()));
    entropy_.observe(h, attention);
  }

  /// One step of every head: attention[h] over head h's cells (tiered_cache::observe_heads,
  /// the heads side by side), then the entropy.
  /// @throws audiokv::error naming "attention.size()" unless it equals num_heads(), or what
  ///         observe_heads names; nothing changes.
  void observe_all(span<const span<const float>> attention) {
    AUDIOKV_REQUIRE(attention.size() == heads_.size(), "tiered_layer::observe_all",
                    "attention.size()", attention.size(), "must equal num_heads()");
    // Refreshed per call: a copy of the layer holds its own heads.
    for (std::size_t h = 0; h < heads_.size(); ++h) head_ptrs_[h] = &heads_[h];
    cache_type::observe_heads(span<cache_type* const>(head_ptrs_.data(), head_ptrs_.size()),
                              attention);
    for (std::size_t h = 0; h < heads_.size(); ++h) {
      entropy_.observe(static_cast<std::int32_t>(h), attention[h]);
    }
  }

  /// Each head's share of a compression to `target_per_head` cells a head on average:
  /// entropy_head_budgets::shares of the layer's H * target_per_head (by attention once every
  /// head has observed a step, else target_per_head each). Allocates the returned vector.
  /// @throws audiokv::error naming "target_per_head" when it is below 1.
  std::vector<std::int32_t> shares(std::int32_t target_per_head) const {
    AUDIOKV_REQUIRE(target_per_head >= 1, "tiered_layer::shares", "target_per_head",
                    target_per_head, "must be >= 1");
    return entropy_.shares(static_cast<std::int64_t>(num_heads()) * target_per_head, 1);
  }

  /// The one-shot compression: plans[h] = head h's plan_to(shares(target_per_head)[h]). Apply
  /// each with head(h).apply(plans[h]) and compact head h's K/V by plans[h].move_to. Reads the
  /// heads only.
  /// @throws audiokv::error naming "plans.size()" unless it equals num_heads(), or
  ///         "target_per_head" when it is below 1; no plan is written then.
  void compress_to(std::int32_t target_per_head, span<eviction_plan> plans) const {
    AUDIOKV_REQUIRE(plans.size() == heads_.size(), "tiered_layer::compress_to", "plans.size()",
                    plans.size(), "must equal num_heads()");
    const std::vector<std::int32_t> share = shares(target_per_head);
    for (std::size_t h = 0; h < heads_.size(); ++h) heads_[h].plan_to(share[h], plans[h]);
  }

  /// Every head and the entropy as after construction (a new sequence); allocates nothing.
  void reset() noexcept {
    for (cache_type& cache : heads_) cache.reset();
    entropy_.reset();
  }

 private:
  void check_head(const char* where, std::int32_t h) const {
    AUDIOKV_REQUIRE(h >= 0 && h < num_heads(), where, "head", h, "must be in [0, num_heads())");
  }

  std::vector<cache_type> heads_;
  std::vector<cache_type*> head_ptrs_;  // [heads] observe_all's argument to observe_heads
  entropy_head_budgets entropy_;
};

}  // namespace audiokv::pool

namespace audiokv {
using pool::tiered_layer;
}  // namespace audiokv
