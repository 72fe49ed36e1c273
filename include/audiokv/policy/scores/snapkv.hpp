// SPDX-License-Identifier: Apache-2.0
/// @file
/// kvpress SnapKVPress.score (v0.5.5) on given attention weights: mean over the window queries,
/// reduce over a kernel along tokens, then the GQA group mean; the window is padded with max + 1 so
/// it is kept and counts against the budget. PyramidKV uses the same scores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "../../error.hpp"
#include "kernel_reduce.hpp"
#include "validate.hpp"

namespace audiokv::policy::scores {

/// Doubles of workspace snapkv_scores needs: 3 * (n - window).
inline std::size_t snapkv_workspace_size(std::int32_t n, std::int32_t window) {
  return n > window ? 3 * static_cast<std::size_t>(n - window) : 0;
}

/// @brief SnapKV scores of every KV head (kvpress `snapkv_press.py`).
///
///   s_h[j]  = (1 / w) * sum_{i in window} A[h, i, j]          j < n - w, per query head h
///   p_h     = reduce(s_h)                                      kernel k, zero / -inf padding
///   out[kv] = mean_{g < G} p_{kv*G + g}                        kernel BEFORE the group mean
///   out[kv][n-w .. n) = max(out[:, :n-w]) + 1                  global max over all KV heads
///
/// @param window_attn [num_kv_heads * group_size, window, n] rows n-w..n-1 of the causal
///        attention, row-major; columns >= n - w are ignored.
/// @param out         [num_kv_heads, n] higher means keep.
/// @param workspace   [snapkv_workspace_size(n, window)] doubles.
/// @pre n > window (kvpress asserts q_len > window_size). Never allocates.
inline void snapkv_scores(const float* window_attn, std::int32_t num_kv_heads,
                          std::int32_t group_size, std::int32_t window, std::int32_t n,
                          std::int32_t kernel, kernel_reduce reduce, float* out,
                          double* workspace) {
  constexpr const char* where = "scores::snapkv_scores";
  detail::require_heads(where, num_kv_heads, group_size);
  AUDIOKV_REQUIRE(window >= 1, where, "window", window, "must be >= 1");
  AUDIOKV_REQUIRE(n > window, where, "n", n, "must be greater than window (kvpress asserts it)");
  validate_kernel(where, kernel);
  const std::int64_t num_q_heads = static_cast<std::int64_t>(num_kv_heads) * group_size;
  detail::require_attention(where, "window_attn", window_attn, num_q_heads * window * n);
  AUDIOKV_REQUIRE(out != nullptr && workspace != nullptr, where, "out", "nullptr",
                  "out and workspace must be provided");
  const std::int32_t m = n - window;
  double* mean = workspace;         // [m] window mean of one query head
  double* reduced = workspace + m;  // [m] its kernel-reduced scores
  double* acc = workspace + 2 * m;  // [m] group sum of the reduced scores
  float best = -std::numeric_limits<float>::infinity();
  for (std::int32_t kv = 0; kv < num_kv_heads; ++kv) {
    for (std::int32_t j = 0; j < m; ++j) acc[j] = 0.0;
    for (std::int32_t g = 0; g < group_size; ++g) {
      const float* rows =
          window_attn + (static_cast<std::int64_t>(kv) * group_size + g) * window * n;
      for (std::int32_t j = 0; j < m; ++j) mean[j] = 0.0;
      for (std::int32_t i = 0; i < window; ++i) {
        const float* row = rows + static_cast<std::int64_t>(i) * n;
        for (std::int32_t j = 0; j < m; ++j) mean[j] += row[j];
      }
      for (std::int32_t j = 0; j < m; ++j) mean[j] /= window;
      reduce_1d(mean, reduced, m, kernel, reduce);
      for (std::int32_t j = 0; j < m; ++j) acc[j] += reduced[j];
    }
    float* row_out = out + static_cast<std::int64_t>(kv) * n;
    for (std::int32_t j = 0; j < m; ++j) {
      row_out[j] = static_cast<float>(acc[j] / group_size);
      if (row_out[j] > best) best = row_out[j];
    }
  }
  const float pad = static_cast<float>(static_cast<double>(best) + 1.0);
  for (std::int32_t kv = 0; kv < num_kv_heads; ++kv) {
    for (std::int32_t j = m; j < n; ++j) out[static_cast<std::int64_t>(kv) * n + j] = pad;
  }
}

}  // namespace audiokv::policy::scores

namespace audiokv {
namespace scores = policy::scores;
}  // namespace audiokv
