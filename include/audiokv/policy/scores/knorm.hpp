// SPDX-License-Identifier: Apache-2.0
/// @file
/// Knorm (kvpress KnormPress): score = -||k_j||_2 of the post-RoPE cached key, per KV head, so
/// low-norm keys are kept. No window, no sinks.
#pragma once

#include <cmath>
#include <cstdint>

#include "../../error.hpp"

namespace audiokv::policy::scores {

/// L2 norm of one key row, accumulated in double (kvpress 0.5.5 computes it in >= fp32).
inline float key_norm(const float* key, std::int32_t head_dim) {
  double sum = 0.0;
  for (std::int32_t d = 0; d < head_dim; ++d) sum += static_cast<double>(key[d]) * key[d];
  return static_cast<float>(std::sqrt(sum));
}

/// @brief out[kv][j] = -||keys[kv][j][:]||_2.
/// @param keys [num_kv_heads, n, head_dim] finite.
/// @param out  [num_kv_heads, n]. Never allocates.
inline void knorm_scores(const float* keys, std::int32_t num_kv_heads, std::int32_t n,
                         std::int32_t head_dim, float* out) {
  constexpr const char* where = "scores::knorm_scores";
  AUDIOKV_REQUIRE(num_kv_heads >= 1, where, "num_kv_heads", num_kv_heads, "must be >= 1");
  AUDIOKV_REQUIRE(n >= 0, where, "n", n, "must be >= 0");
  AUDIOKV_REQUIRE(head_dim >= 1, where, "head_dim", head_dim, "must be >= 1");
  const std::int64_t total = static_cast<std::int64_t>(num_kv_heads) * n * head_dim;
  AUDIOKV_REQUIRE(total == 0 || (keys != nullptr && out != nullptr), where, "keys", "nullptr",
                  "keys and out must be provided");
  for (std::int64_t i = 0; i < total; ++i) {
    AUDIOKV_REQUIRE(std::isfinite(keys[i]), where, ::audiokv::detail::indexed("keys", i), keys[i],
                    "must be finite");
  }
  const std::int64_t rows = static_cast<std::int64_t>(num_kv_heads) * n;
  for (std::int64_t r = 0; r < rows; ++r) out[r] = -key_norm(keys + r * head_dim, head_dim);
}

}  // namespace audiokv::policy::scores

namespace audiokv {
namespace scores = policy::scores;
}  // namespace audiokv
