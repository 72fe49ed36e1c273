// SPDX-License-Identifier: Apache-2.0
/// @file
/// kvpress StreamingLLMPress scores: 1 everywhere except 0 on [n_sink, n_sink + n_pruned), so
/// top-n_kept keeps the n_sink first tokens plus the last n_kept - n_sink. When n_kept < n_sink
/// the n_sink ones tie and top-k keeps n_kept of the sinks (which ones is torch's tie order).
#pragma once

#include <cmath>
#include <cstdint>

#include "../../error.hpp"

namespace audiokv::policy::scores {

/// @brief out[j] = 0 for j in [n_sink, n_sink + n_pruned), else 1, with
/// n_pruned = n - int(n (1 - r)) as kvpress computes it: int() truncation WITHOUT the >= 1 clamp
/// of kvpress_n_kept, so with n_sink = 0 and n (1 - r) < 1 every score is 0 (top-k then keeps
/// one of n tied tokens).
/// @param out [n]. @pre n > n_sink (kvpress asserts it). Never allocates.
inline void streaming_llm_scores(std::int32_t n, double compression_ratio, std::int32_t n_sink,
                                 float* out) {
  constexpr const char* where = "scores::streaming_llm_scores";
  AUDIOKV_REQUIRE(n_sink >= 0, where, "n_sink", n_sink, "must be >= 0");
  AUDIOKV_REQUIRE(n > n_sink, where, "n", n, "must be greater than n_sink (kvpress asserts it)");
  AUDIOKV_REQUIRE(out != nullptr, where, "out", "nullptr", "must point to n floats");
  AUDIOKV_REQUIRE(
      std::isfinite(compression_ratio) && compression_ratio >= 0.0 && compression_ratio <= 1.0,
      where, "compression_ratio", compression_ratio, "must be in [0, 1]");
  const std::int64_t pruned =
      n - static_cast<std::int64_t>(static_cast<double>(n) * (1.0 - compression_ratio));
  for (std::int32_t j = 0; j < n; ++j) {
    out[j] = (j >= n_sink && j < n_sink + pruned) ? 0.0f : 1.0f;
  }
}

}  // namespace audiokv::policy::scores

namespace audiokv {
namespace scores = policy::scores;
}  // namespace audiokv
