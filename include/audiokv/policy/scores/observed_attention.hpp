// SPDX-License-Identifier: Apache-2.0
/// @file
/// kvpress ObservedAttentionPress: the average attention key j received from the N - j queries
/// that can see it, then the GQA group mean. No window, no sinks.
#pragma once

#include <cstdint>

#include "../../error.hpp"
#include "validate.hpp"

namespace audiokv::policy::scores {

/// @brief out[kv][j] = mean_{g<G} ( sum_{i<n} A[kv*G+g][i][j] / (n - j) ).
/// @param attn      [num_kv_heads * group_size, n, n] the full causal attention (zeros above
///                  the diagonal), row-major.
/// @param out       [num_kv_heads, n].
/// @param workspace [n] doubles. Never allocates.
inline void observed_attention_scores(const float* attn, std::int32_t num_kv_heads,
                                      std::int32_t group_size, std::int32_t n, float* out,
                                      double* workspace) {
  constexpr const char* where = "scores::observed_attention_scores";
  detail::require_heads(where, num_kv_heads, group_size);
  AUDIOKV_REQUIRE(n >= 1, where, "n", n, "must be >= 1");
  const std::int64_t num_q_heads = static_cast<std::int64_t>(num_kv_heads) * group_size;
  detail::require_attention(where, "attn", attn, num_q_heads * n * n);
  AUDIOKV_REQUIRE(out != nullptr && workspace != nullptr, where, "out", "nullptr",
                  "out and workspace must be provided");
  for (std::int32_t kv = 0; kv < num_kv_heads; ++kv) {
    for (std::int32_t j = 0; j < n; ++j) workspace[j] = 0.0;
    for (std::int32_t g = 0; g < group_size; ++g) {
      const float* a = attn + (static_cast<std::int64_t>(kv) * group_size + g) * n * n;
      for (std::int32_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (std::int32_t i = 0; i < n; ++i) sum += a[static_cast<std::int64_t>(i) * n + j];
        workspace[j] += sum / (n - j);
      }
    }
    for (std::int32_t j = 0; j < n; ++j) {
      out[static_cast<std::int64_t>(kv) * n + j] = static_cast<float>(workspace[j] / group_size);
    }
  }
}

}  // namespace audiokv::policy::scores

namespace audiokv {
namespace scores = policy::scores;
}  // namespace audiokv
