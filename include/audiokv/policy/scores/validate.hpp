// SPDX-License-Identifier: Apache-2.0
/// @file
/// Shared argument checks of the one-shot scorers.
#pragma once

#include <cmath>
#include <cstdint>

#include "../../core/importance.hpp"
#include "../../error.hpp"

namespace audiokv::policy::scores::detail {

/// Throws naming `name[i]` unless values[0..count) are finite and >= 0 (attention weights).
inline void require_attention(const char* where, const char* name, const float* values,
                              std::int64_t count) {
  AUDIOKV_REQUIRE(count == 0 || values != nullptr, where, name, "nullptr",
                  "must point to the attention weights");
  for (std::int64_t i = 0; i < count; ++i) {
    AUDIOKV_REQUIRE(core::is_valid_attention(values[i]), where, ::audiokv::detail::indexed(name, i),
                    values[i], "must be finite and >= 0");
  }
}

/// Throws unless num_kv_heads >= 1 and group_size >= 1.
inline void require_heads(const char* where, std::int32_t num_kv_heads, std::int32_t group_size) {
  AUDIOKV_REQUIRE(num_kv_heads >= 1, where, "num_kv_heads", num_kv_heads, "must be >= 1");
  AUDIOKV_REQUIRE(group_size >= 1, where, "group_size", group_size,
                  "must be >= 1 (num_q_heads / num_kv_heads)");
}

}  // namespace audiokv::policy::scores::detail
