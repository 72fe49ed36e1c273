// SPDX-License-Identifier: Apache-2.0
/// @file
/// kvpress StreamingLLMPress scores: 1 everywhere except 0 on [n_sink, n_sink + n_pruned), so
/// top-n_kept keeps the n_sink first tokens plus the last n_kept - n_sink.
#pragma once

#include <cstdint>

#include "../../error.hpp"
#include "budget.hpp"

namespace audiokv::scores {

/// @brief out[j] = 0 for j in [n_sink, n_sink + n - n_kept), else 1; n_kept = kvpress_n_kept.
/// @param out [n]. @pre n > n_sink (kvpress asserts it). Never allocates.
inline void streaming_llm_scores(std::int32_t n, double compression_ratio, std::int32_t n_sink,
                                 float* out) {
  constexpr const char* where = "scores::streaming_llm_scores";
  AUDIOKV_REQUIRE(n_sink >= 0, where, "n_sink", n_sink, "must be >= 0");
  AUDIOKV_REQUIRE(n > n_sink, where, "n", n, "must be greater than n_sink (kvpress asserts it)");
  AUDIOKV_REQUIRE(out != nullptr, where, "out", "nullptr", "must point to n floats");
  const std::int64_t pruned = n - kvpress_n_kept(n, compression_ratio);
  for (std::int32_t j = 0; j < n; ++j) {
    out[j] = (j >= n_sink && j < n_sink + pruned) ? 0.0f : 1.0f;
  }
}

}  // namespace audiokv::scores
