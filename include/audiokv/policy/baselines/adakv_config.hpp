// SPDX-License-Identifier: Apache-2.0
/// @file
/// The configuration of an AdaKV group (policy/baselines/adakv.hpp): per-head SnapKV storage
/// and scoring, the heads sharing the layer budget, and kvpress's alpha safeguard.
#pragma once

#include <cstdint>

#include "../../error.hpp"
#include "snapkv.hpp"

namespace audiokv::policy::baselines {

/// @brief Configuration of adakv_group.
struct adakv_config {
  /// Per-head storage and SnapKV scoring; snap.base.budget is the MEAN budget B per head and
  /// snap.base.capacity the slots of each head (0 means B + 1).
  snapkv_config snap{};
  /// KV heads sharing the layer budget num_heads * B.
  std::int32_t num_heads = 1;
  /// kvpress alpha_safeguard: each head keeps at least n_safe = max(1, int(B * alpha)) cells.
  double alpha_safeguard = 0.2;

  /// Checks every field; `where` names the caller in the message.
  /// @throws audiokv::error naming the first invalid field (e.g. "config.budget").
  void validate(const char* where) const {
    AUDIOKV_REQUIRE(num_heads >= 1, where, "config.num_heads", num_heads, "must be >= 1");
    AUDIOKV_REQUIRE(alpha_safeguard >= 0.0 && alpha_safeguard <= 1.0, where,
                    "config.alpha_safeguard", alpha_safeguard, "must be in [0, 1]");
  }
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::adakv_config;
}  // namespace audiokv
