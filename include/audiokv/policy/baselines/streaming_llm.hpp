// SPDX-License-Identifier: Apache-2.0
/// @file
/// StreamingLLM (attention sinks + recent window) and FIFO (StreamingLLM with no sinks).
#pragma once

#include <cstdint>

#include "../../error.hpp"
#include "baseline_policy.hpp"

namespace audiokv::policy::baselines {

/// @brief Configuration of streaming_llm: keep the first n_sink cells and the most recent ones.
struct streaming_llm_config {
  /// Budget, capacity and speakers shared by every baseline.
  baseline_config base{};
  /// Attention sinks: cache slots [0, n_sink) are never evicted (kvpress and official: 4).
  std::int32_t n_sink = 4;

  /// Checks every field; `where` names the caller in the message.
  /// @throws audiokv::error naming the first invalid field (e.g. "config.budget").
  void validate(const char* where) const {
    AUDIOKV_REQUIRE(n_sink >= 0, where, "config.n_sink", n_sink, "must be >= 0");
    AUDIOKV_REQUIRE(n_sink <= base.budget, where, "config.n_sink", n_sink,
                    "must be <= config.budget (the sinks count against the budget)");
  }
};

/// @brief mit-han-lab/streaming-llm `StartRecentKVCache`: when num_cells > budget, keep slots
/// [0, n_sink) and the last budget - n_sink slots (`__call__`). plan_to(target) keeps the
/// sinks and the last target - n_sink slots, which is `evict_for_space(num_coming)` with
/// target = budget - num_coming. Below the sinks (target < n_sink) it keeps slots [0, target):
/// kvpress StreamingLLMPress then keeps n_kept of its n_sink tied sinks (which ones is torch's
/// tie order; the first ones are one valid choice), whereas the official evict_for_space never
/// evicts a sink and leaves more than target cells. Sinks are cache slots, as in the official
/// code, so they are the first n_sink frames ever appended. Attention is validated and
/// ignored. kvpress StreamingLLMPress keeps the same set at prefill (scores/streaming_llm).
class streaming_llm : public baseline_policy {
 public:
  /// Validates `config` and allocates every per-cell array for its capacity; nothing allocates
  /// afterwards. Not thread-safe: one thread at a time per object.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit streaming_llm(const streaming_llm_config& config)
      : streaming_llm("streaming_llm", config) {}

  const char* name() const noexcept override { return "streaming_llm"; }
  /// Sink cells kept at the start of the stream.
  std::int32_t n_sink() const noexcept { return n_sink_; }

 protected:
  /// For policies built on it (fifo): `policy_name` prefixes error locations.
  /// @throws audiokv::error naming the first invalid field of `config`.
  streaming_llm(const char* policy_name, const streaming_llm_config& config)
      : baseline_policy(policy_name, (config.validate(policy_name), config.base)),
        n_sink_(config.n_sink) {}

  void on_observe_rows(const float*, std::int32_t, gqa_reduce) override {}

  void select_evictions(std::int32_t target, std::uint8_t* mask) const override {
    // keep [0, s) and the last target - s slots, s = min(n_sink, target) <= target < n.
    const std::int32_t n = store().size();
    const std::int32_t kept_sinks = target < n_sink_ ? target : n_sink_;
    for (std::int32_t j = kept_sinks; j < kept_sinks + (n - target); ++j) mask[j] = 1;
  }

 private:
  std::int32_t n_sink_;
};

/// @brief FIFO: evict the oldest cells first (StreamingLLM with n_sink = 0).
class fifo final : public streaming_llm {
 public:
  /// Validates `config` and allocates every per-cell array for its capacity; nothing allocates
  /// afterwards. Not thread-safe: one thread at a time per object.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit fifo(const baseline_config& config)
      : streaming_llm("fifo", streaming_llm_config{config, 0}) {}
  const char* name() const noexcept override { return "fifo"; }
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::fifo;
using policy::baselines::streaming_llm;
using policy::baselines::streaming_llm_config;
}  // namespace audiokv
