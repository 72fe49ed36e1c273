// SPDX-License-Identifier: Apache-2.0
/// @file
/// Knorm (kvpress KnormPress; alessiodevoto/l2compress): keep the cells whose key has the
/// lowest L2 norm. The policy needs each cell's key norm, which the attention row does not
/// carry, so knorm has its own append overloads.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "../../error.hpp"
#include "../scores/knorm.hpp"
#include "baseline_policy.hpp"

namespace audiokv::policy::baselines {

/// @brief Knorm: score = -||k_j||_2 of the post-RoPE key of this KV head.
///
/// Key norms enter in one of three ways, all validated before any state changes:
///  - append_with_norms(frames, key_norms, count): norms computed by the engine;
///  - append_with_keys(frames, keys, head_dim, count): keys [count, head_dim], norms here;
///  - append(frames, count) (the eviction_policy interface) then set_key_norms(first, norms,
///    count) before the next plan.
/// A plan over a cell whose norm was never given throws audiokv::error naming
/// "key_norms[slot]", so nothing is scored silently. Attention is validated and ignored.
class knorm final : public baseline_policy {
 public:
  /// Validates `config` and allocates every per-cell array for its capacity; nothing allocates
  /// afterwards. Not thread-safe: one thread at a time per object.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit knorm(const baseline_config& config)
      : baseline_policy("knorm", config),
        score_(config.reserved_capacity()),
        order_(config.reserved_capacity()) {}

  const char* name() const noexcept override { return "knorm"; }

  /// Appends frames with their key norms [count] (finite, >= 0).
  void append_with_norms(const frame_meta* frames, const float* key_norms, std::int32_t count) {
    validate_norms("knorm::append_with_norms", key_norms, count);
    const std::int32_t first = num_cells();
    append(frames, count);
    for (std::int32_t i = 0; i < count; ++i) score_[first + i] = -key_norms[i];
  }

  /// Appends frames with their keys [count, head_dim] (finite); norms in double.
  void append_with_keys(const frame_meta* frames, const float* keys, std::int32_t head_dim,
                        std::int32_t count) {
    constexpr const char* where = "knorm::append_with_keys";
    AUDIOKV_REQUIRE(head_dim >= 1, where, "head_dim", head_dim, "must be >= 1");
    AUDIOKV_REQUIRE(count <= 0 || keys != nullptr, where, "keys", "nullptr",
                    "must point to count * head_dim values");
    const std::int64_t total = static_cast<std::int64_t>(count > 0 ? count : 0) * head_dim;
    for (std::int64_t i = 0; i < total; ++i) {
      AUDIOKV_REQUIRE(std::isfinite(keys[i]), where, ::audiokv::detail::indexed("keys", i), keys[i],
                      "must be finite");
    }
    const std::int32_t first = num_cells();
    append(frames, count);
    for (std::int32_t i = 0; i < count; ++i) {
      score_[first + i] =
          -scores::key_norm(keys + static_cast<std::int64_t>(i) * head_dim, head_dim);
    }
  }

  /// append_with_norms() with checked lengths: key_norms.size() must equal frames.size().
  void append_with_norms(span<const frame_meta> frames, span<const float> key_norms) {
    constexpr const char* where = "knorm::append_with_norms";
    check_count(where, "frames.size()", frames.size());
    AUDIOKV_REQUIRE(
        key_norms.size() == frames.size(), where, "key_norms.size()", key_norms.size(),
        ::audiokv::detail::describe("must equal frames.size() = ", frames.size()).c_str());
    append_with_norms(frames.data(), key_norms.data(), static_cast<std::int32_t>(frames.size()));
  }

  /// append_with_keys() with checked lengths: keys.size() must equal frames.size() * head_dim,
  /// checked before any key is read.
  void append_with_keys(span<const frame_meta> frames, span<const float> keys,
                        std::int32_t head_dim) {
    constexpr const char* where = "knorm::append_with_keys";
    check_count(where, "frames.size()", frames.size());
    AUDIOKV_REQUIRE(head_dim >= 1, where, "head_dim", head_dim, "must be >= 1");
    const std::size_t expected = frames.size() * static_cast<std::size_t>(head_dim);
    AUDIOKV_REQUIRE(keys.size() == expected, where, "keys.size()", keys.size(),
                    ::audiokv::detail::describe("must equal frames.size() x head_dim = ",
                                                frames.size(), " x ", head_dim, " = ", expected)
                        .c_str());
    append_with_keys(frames.data(), keys.data(), head_dim,
                     static_cast<std::int32_t>(frames.size()));
  }

  /// Sets the key norms of cells [first_slot, first_slot + count).
  void set_key_norms(std::int32_t first_slot, const float* key_norms, std::int32_t count) {
    constexpr const char* where = "knorm::set_key_norms";
    AUDIOKV_REQUIRE(first_slot >= 0 && count >= 0 &&
                        static_cast<std::int64_t>(first_slot) + count <= num_cells(),
                    where, "first_slot", first_slot,
                    "[first_slot, first_slot + count) must be cached cells");
    validate_norms(where, key_norms, count);
    for (std::int32_t i = 0; i < count; ++i) score_[first_slot + i] = -key_norms[i];
  }

  /// set_key_norms() of key_norms.size() norms.
  void set_key_norms(std::int32_t first_slot, span<const float> key_norms) {
    check_count("knorm::set_key_norms", "key_norms.size()", key_norms.size());
    set_key_norms(first_slot, key_norms.data(), static_cast<std::int32_t>(key_norms.size()));
  }

  /// [num_cells()] the score -||k|| of each cell (NaN where no norm was given).
  const float* scores() const noexcept { return score_.data(); }

 protected:
  void on_append(std::int32_t first, std::int32_t count) override {
    for (std::int32_t j = first; j < first + count; ++j) {
      score_[j] = std::numeric_limits<float>::quiet_NaN();
    }
  }
  void on_observe_rows(const float*, std::int32_t, gqa_reduce) override {}
  void select_evictions(std::int32_t target, std::uint8_t* mask) const override {
    const std::int32_t n = store().size();
    for (std::int32_t j = 0; j < n; ++j) {
      AUDIOKV_REQUIRE(!std::isnan(score_[j]), where_plan(),
                      ::audiokv::detail::indexed("key_norms", j), "missing",
                      "no key norm was given for this cell (use append_with_norms, "
                      "append_with_keys or set_key_norms)");
      order_[j] = j;
    }
    evict_lowest_by_partition(score_.data(), order_.data(), n, n - target, mask);
  }
  void on_apply(const eviction_plan& plan) override { policy::detail::compact_array(score_, plan); }

 private:
  static void check_count(const char* where, const char* argument, std::size_t count) {
    AUDIOKV_REQUIRE(count <= static_cast<std::size_t>(INT32_MAX), where, argument, count,
                    "must be <= INT32_MAX");
  }

  static void validate_norms(const char* where, const float* key_norms, std::int32_t count) {
    AUDIOKV_REQUIRE(count <= 0 || key_norms != nullptr, where, "key_norms", "nullptr",
                    "must point to count norms");
    for (std::int32_t i = 0; i < count; ++i) {
      AUDIOKV_REQUIRE(std::isfinite(key_norms[i]) && key_norms[i] >= 0.0f, where,
                      ::audiokv::detail::indexed("key_norms", i), key_norms[i],
                      "must be finite and >= 0");
    }
  }

  std::vector<float> score_;                 // [capacity] -||k||, NaN = not given
  mutable std::vector<std::int32_t> order_;  // [capacity] scratch
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::knorm;
}  // namespace audiokv
