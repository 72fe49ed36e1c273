// SPDX-License-Identifier: Apache-2.0
/// @file
/// Median smoothing as a stage: sliding median of width W with edge padding (W = 5 is about
/// 50 ms of 10 ms frames).
#pragma once

#include <cstdint>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "../../config.hpp"
#include "../../core/median.hpp"
#include "cell_stage.hpp"
#include "stage_context.hpp"

namespace audiokv::policy::stages {

/// @brief out[j] = median(in[j - W/2 .. j + W/2]) with the ends replicated. W odd.
///
/// A cell stage (operator(), host and device) with a faster row form for the host (apply(),
/// SSE for W = 5); both compute core::median_at<W>, so they agree bit for bit.
template <int W = 5>
struct median_stage {
  static_assert(W % 2 == 1, "audiokv::median_stage: W must be odd so the window is centred.");
  static constexpr int width = W;  ///< the window width

  /// The median of the cell's window.
  AUDIOKV_HOST_DEVICE float operator()(const cell_neighbourhood& cell, const stage_context&) const {
    return core::median_at<W>(cell.in, cell.n, cell.j);
  }

  /// The row form (host, SSE for W = 5): out[j] for every cell j < n (in != out).
  void apply(const float* in, float* out, std::int32_t n, const stage_context&) const {
    constexpr std::int32_t half = W / 2;
    const std::int32_t edge = n < half ? n : half;
    for (std::int32_t head = 0; head < edge; ++head) out[head] = core::median_at<W>(in, n, head);
    // Interior cells need no padding. x86 minps/maxps return the second operand when unordered,
    // exactly min_of/max_of, so the SSE path computes the same network four cells at a time.
    std::int32_t j = half;
#if defined(__SSE__)
    if constexpr (W == 5) {
      for (; j + 4 <= n - half; j += 4) {
        const __m128 a = _mm_loadu_ps(in + j - 2), b = _mm_loadu_ps(in + j - 1);
        const __m128 c = _mm_loadu_ps(in + j), d = _mm_loadu_ps(in + j + 1);
        const __m128 e = _mm_loadu_ps(in + j + 2);
        // min_of(p, q) == _mm_min_ps(q, p) and max_of(p, q) == _mm_max_ps(q, p).
        const __m128 x = _mm_max_ps(_mm_min_ps(e, d), _mm_min_ps(b, a));
        const __m128 y = _mm_min_ps(_mm_max_ps(e, d), _mm_max_ps(b, a));
        _mm_storeu_ps(out + j, _mm_max_ps(_mm_min_ps(c, _mm_max_ps(y, x)), _mm_min_ps(y, x)));
      }
    }
#endif
    for (; j < n - half; ++j) {
      if constexpr (W == 5) {
        out[j] = core::median_of_5(in[j - 2], in[j - 1], in[j], in[j + 1], in[j + 2]);
      } else {
        out[j] = core::median_at<W>(in, n, j);
      }
    }
    for (std::int32_t tail = n - half > edge ? n - half : edge; tail < n; ++tail) {
      out[tail] = core::median_at<W>(in, n, tail);
    }
  }
};

}  // namespace audiokv::policy::stages

namespace audiokv {
using policy::stages::median_stage;
}  // namespace audiokv
