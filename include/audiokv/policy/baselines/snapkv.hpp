// SPDX-License-Identifier: Apache-2.0
/// @file
/// SnapKV in streaming form: scores from the observation window (the last `window` observed
/// attention rows), kernel-reduced exactly as kvpress SnapKVPress; the `window` most recent cells
/// are kept and count against the budget.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "../../error.hpp"
#include "../scores/kernel_reduce.hpp"
#include "baseline_policy.hpp"

namespace audiokv::policy::baselines {

/// @brief Configuration of snapkv (defaults: kvpress SnapKVPress, w = 64, k = 5, kernel average).
struct snapkv_config {
  /// Budget, capacity and speakers shared by every baseline.
  baseline_config base{};
  /// Observation window: the last `window` observed rows score the cells, and the `window`
  /// newest cells are kept (the max + 1 pad of kvpress).
  std::int32_t window = 64;
  /// Smoothing kernel along the time axis (odd); padding kernel / 2.
  std::int32_t kernel = 5;
  /// How the kernel reduces (torch avg_pool1d / max_pool1d): avg: zero padding, divide by kernel
  /// (count_include_pad); max: -inf padding.
  scores::kernel_reduce reduce = scores::kernel_reduce::avg;
  /// Query heads per KV head (G). Rows are kernel-reduced per query head, then averaged (kvpress
  /// order), so observe_group must pass exactly G rows; observe() is allowed when G == 1.
  std::int32_t group_size = 1;

  /// Checks every field; `where` names the caller in the message.
  /// @throws audiokv::error naming the first invalid field (e.g. "config.budget").
  void validate(const char* where) const {
    AUDIOKV_REQUIRE(window >= 1, where, "config.window", window, "must be >= 1");
    AUDIOKV_REQUIRE(kernel >= 1 && kernel % 2 == 1, where, "config.kernel", kernel,
                    "must be odd and >= 1");
    AUDIOKV_REQUIRE(reduce == scores::kernel_reduce::avg || reduce == scores::kernel_reduce::max,
                    where, "config.reduce", static_cast<int>(reduce), "must be avg or max");
    AUDIOKV_REQUIRE(group_size >= 1, where, "config.group_size", group_size, "must be >= 1");
  }
};

/// @brief Streaming SnapKV. Per query head g it keeps the last `window` observed rows (a ring)
/// and their running sum in double, so a cell's window score is
///   s_g[j] = (1 / rows) * sum_{last rows} A_g[j],     rows = min(window, rows observed)
/// over the candidates j < n - w (w = min(window, n)); then p_g = reduce(s_g), score = mean_g p_g.
/// The w newest cells are always kept unless the target is below w (then the oldest of them
/// go, as kvpress's tied max + 1 pads). Cells appended after a row was observed read 0 in it
/// (causal). On the same rows this reproduces kvpress SnapKVPress's kept set exactly.
/// Memory: (window + 1) * group_size * capacity floats/doubles besides the metadata.
class snapkv : public baseline_policy {
 public:
  /// Validates `config` and allocates every per-cell array for its capacity; nothing allocates
  /// afterwards. Not thread-safe: one thread at a time per object.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit snapkv(const snapkv_config& config) : snapkv("snapkv", config) {}

  const char* name() const noexcept override { return "snapkv"; }
  /// The validated configuration.
  const snapkv_config& config() const noexcept { return config_; }

  /// Pooled window scores of the candidate cells [0, n - min(window, n)) into `out`
  /// [num_cells()]; returns the candidate count. Window cells are left untouched.
  std::int32_t candidate_scores(float* out) const {
    const std::int32_t n = store().size();
    const std::int32_t m = n - std::min(config_.window, n);
    const std::int32_t groups = config_.group_size;
    const std::int32_t cap = store().capacity();
    for (std::int32_t j = 0; j < m; ++j) acc_[j] = 0.0;
    const double rows = rows_seen_ > 0 ? static_cast<double>(rows_seen_) : 1.0;
    for (std::int32_t g = 0; g < groups; ++g) {
      const double* sum = sums_.data() + static_cast<std::int64_t>(g) * cap;
      for (std::int32_t j = 0; j < m; ++j) mean_[j] = sum[j] / rows;
      scores::reduce_1d(mean_.data(), reduced_.data(), m, config_.kernel, config_.reduce);
      for (std::int32_t j = 0; j < m; ++j) acc_[j] += reduced_[j];
    }
    for (std::int32_t j = 0; j < m; ++j) out[j] = static_cast<float>(acc_[j] / groups);
    return m;
  }

 protected:
  /// For policies built on SnapKV (pyramidkv, adakv): `policy_name` prefixes error locations.
  /// @throws audiokv::error naming the first invalid field of `config`.
  snapkv(const char* policy_name, const snapkv_config& config)
      : baseline_policy(policy_name, (config.validate(policy_name), config.base)), config_(config) {
    const std::int64_t cap = config.base.reserved_capacity();
    const std::int64_t per_row = cap * config.group_size;
    ring_.assign(per_row * config.window, 0.0f);
    sums_.assign(per_row, 0.0);
    mean_.resize(cap);
    reduced_.resize(cap);
    acc_.resize(cap);
    score_.resize(cap);
    order_.resize(cap);
  }

  std::int32_t required_group_size() const noexcept override { return config_.group_size; }

  void on_append(std::int32_t first, std::int32_t count) override {
    const std::int64_t cap = store().capacity();
    const std::int64_t rows = static_cast<std::int64_t>(config_.window) * config_.group_size;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int32_t j = first; j < first + count; ++j) ring_[r * cap + j] = 0.0f;
    }
    for (std::int32_t g = 0; g < config_.group_size; ++g) {
      for (std::int32_t j = first; j < first + count; ++j) sums_[g * cap + j] = 0.0;
    }
  }

  void on_observe_rows(const float* attention, std::int32_t rows, gqa_reduce) override {
    const std::int32_t n = store().size();
    const std::int64_t cap = store().capacity();
    for (std::int32_t g = 0; g < rows; ++g) {
      float* slot =
          ring_.data() + (static_cast<std::int64_t>(next_) * config_.group_size + g) * cap;
      double* sum = sums_.data() + g * cap;
      const float* row = attention + static_cast<std::int64_t>(g) * n;
      const bool full = rows_seen_ == config_.window;
      for (std::int32_t j = 0; j < n; ++j) {
        sum[j] += static_cast<double>(row[j]) - (full ? static_cast<double>(slot[j]) : 0.0);
        slot[j] = row[j];
      }
    }
    next_ = (next_ + 1) % config_.window;
    if (rows_seen_ < config_.window) ++rows_seen_;
  }

  void select_evictions(std::int32_t target, std::uint8_t* mask) const override {
    const std::int32_t n = store().size();
    const std::int32_t m = candidate_scores(score_.data());
    for (std::int32_t j = 0; j < m; ++j) order_[j] = j;
    const std::int32_t needed = n - target;
    const std::int32_t from_candidates =
        evict_lowest_by_partition(score_.data(), order_.data(), m, needed, mask);
    // Target below the window: the oldest window cells go (tied max + 1 pads, older first).
    for (std::int32_t j = m; j < m + (needed - from_candidates); ++j) mask[j] = 1;
  }

  void on_apply(const eviction_plan& plan) override {
    const std::int64_t cap = store().capacity();
    const std::int64_t rows = static_cast<std::int64_t>(config_.window) * config_.group_size;
    for (std::int64_t r = 0; r < rows; ++r) compact(ring_.data() + r * cap, plan);
    for (std::int32_t g = 0; g < config_.group_size; ++g) compact(sums_.data() + g * cap, plan);
  }

 private:
  template <class T>
  static void compact(T* values, const eviction_plan& plan) {
    for (std::int32_t i = 0; i < plan.n_kv_before; ++i) {
      const std::int32_t to = plan.move_to[i];
      if (to != core::evicted_slot && to != i) values[to] = values[i];
    }
  }

  snapkv_config config_;
  std::vector<float> ring_;     // [window, group_size, capacity] the last observed rows
  std::vector<double> sums_;    // [group_size, capacity] running sum of the ring
  std::int32_t next_ = 0;       // ring slot the next row overwrites
  std::int32_t rows_seen_ = 0;  // rows in the ring, <= window
  mutable std::vector<double> mean_, reduced_, acc_;  // [capacity] scratch
  mutable std::vector<float> score_;                  // [capacity] scratch
  mutable std::vector<std::int32_t> order_;           // [capacity] scratch
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::snapkv;
using policy::baselines::snapkv_config;
}  // namespace audiokv
