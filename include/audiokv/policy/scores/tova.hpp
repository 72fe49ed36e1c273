// SPDX-License-Identifier: Apache-2.0
/// @file
/// TOVA scores: the last query row averaged over ALL query heads of the layer, one set shared
/// by every KV head. kvpress TOVAPress additionally forces the last token (max + 1 pad).
#pragma once

#include <cstdint>
#include <limits>

#include "../../error.hpp"
#include "validate.hpp"

namespace audiokv::policy::scores {

/// @brief TOVA scores, repeated for every KV head.
///
///   force_last (kvpress):  out[kv][j] = mean_h last[h][j] for j < n-1; out[kv][n-1] = max + 1
///   official (schwartz-lab-NLP/TOVA): out[kv][j] = mean_h last[h][j] for every j
///
/// @param last_rows [num_q_heads, n] the attention row of the last query of every query head.
/// @param out       [num_kv_heads, n].
/// @pre n >= 2 when force_last. Never allocates.
inline void tova_scores(const float* last_rows, std::int32_t num_q_heads, std::int32_t num_kv_heads,
                        std::int32_t n, bool force_last, float* out) {
  constexpr const char* where = "scores::tova_scores";
  AUDIOKV_REQUIRE(num_q_heads >= 1, where, "num_q_heads", num_q_heads, "must be >= 1");
  AUDIOKV_REQUIRE(num_kv_heads >= 1, where, "num_kv_heads", num_kv_heads, "must be >= 1");
  AUDIOKV_REQUIRE(n >= (force_last ? 2 : 1), where, "n", n,
                  force_last ? "must be >= 2 (the last token is forced)" : "must be >= 1");
  detail::require_attention(where, "last_rows", last_rows,
                            static_cast<std::int64_t>(num_q_heads) * n);
  AUDIOKV_REQUIRE(out != nullptr, where, "out", "nullptr", "must point to num_kv_heads * n");
  const std::int32_t m = force_last ? n - 1 : n;
  float best = -std::numeric_limits<float>::infinity();
  for (std::int32_t j = 0; j < m; ++j) {
    double sum = 0.0;
    for (std::int32_t h = 0; h < num_q_heads; ++h) {
      sum += last_rows[static_cast<std::int64_t>(h) * n + j];
    }
    out[j] = static_cast<float>(sum / num_q_heads);
    if (out[j] > best) best = out[j];
  }
  if (force_last) out[n - 1] = static_cast<float>(static_cast<double>(best) + 1.0);
  for (std::int32_t kv = 1; kv < num_kv_heads; ++kv) {
    for (std::int32_t j = 0; j < n; ++j) out[static_cast<std::int64_t>(kv) * n + j] = out[j];
  }
}

}  // namespace audiokv::policy::scores

namespace audiokv {
namespace scores = policy::scores;
}  // namespace audiokv
