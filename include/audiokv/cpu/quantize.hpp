// SPDX-License-Identifier: Apache-2.0
/// @file
/// int8 rows on the CPU: int8 row quantisation with one float scale per row, the oracle of
/// cuda::quantize_rows / cuda::dequantize_rows. Plain loops over core/quantize.hpp; never
/// allocates.
#pragma once

#include <cstdint>

#include "../core/math.hpp"
#include "../core/quantize.hpp"

namespace audiokv::cpu {

/// @brief q[r, i] = quantize_int8(x[r, i], scale[r]), scale[r] = int8_scale(max_i |x[r, i]|).
/// @param x       [num_rows, row_stride] (first `dim` elements of each row are used)
/// @param q       [num_rows, dim] output
/// @param scales  [num_rows] output
inline void quantize_rows(const float* x, std::int64_t row_stride, std::int32_t num_rows,
                          std::int32_t dim, std::int8_t* q, float* scales) {
  for (std::int32_t r = 0; r < num_rows; ++r) {
    const float* row = x + r * row_stride;
    float max_abs = 0.0f;
    for (std::int32_t i = 0; i < dim; ++i)
      max_abs = core::max_of(max_abs, row[i] < 0.0f ? -row[i] : row[i]);
    const float scale = core::int8_scale(max_abs);
    scales[r] = scale;
    for (std::int32_t i = 0; i < dim; ++i)
      q[static_cast<std::int64_t>(r) * dim + i] = core::quantize_int8(row[i], scale);
  }
}

/// @brief x[r, i] = dequantize_int8(q[r, i], scales[r]).
/// @param q       [num_rows, dim]
/// @param scales  [num_rows]
/// @param x       [num_rows, row_stride] output (first `dim` elements of each row)
inline void dequantize_rows(const std::int8_t* q, const float* scales, std::int32_t num_rows,
                            std::int32_t dim, float* x, std::int64_t row_stride) {
  for (std::int32_t r = 0; r < num_rows; ++r)
    for (std::int32_t i = 0; i < dim; ++i)
      x[r * row_stride + i] =
          core::dequantize_int8(q[static_cast<std::int64_t>(r) * dim + i], scales[r]);
}

}  // namespace audiokv::cpu
