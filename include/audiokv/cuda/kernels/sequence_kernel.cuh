// SPDX-License-Identifier: Apache-2.0
/// @file
/// Importance, median and trend on the device: importance EMA (temporal stage), the entry prior,
/// the GQA group reduction of external attention, median W (core::median_at) and the Holt trend
/// (core::trend_step). Rows are KV heads, `stride` elements apart.
#pragma once

#include <cstdint>

#include "../../core/gqa.hpp"
#include "../../core/importance.hpp"
#include "../../core/median.hpp"
#include "../../core/trend.hpp"

namespace audiokv::cuda::kernels {

// Kernels are static (internal linkage): every translation unit that includes this header
// compiles and registers its own copy, so any number of them link into one program.

/// Thread per (cell, row): importance = importance_update(importance, attention, alpha).
static __global__ void importance_update_kernel(float* importance, const float* attention,
                                                std::int32_t num_cells,
                                                const std::int32_t* live_cells, std::int32_t stride,
                                                float alpha) {
  const std::int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  const std::int32_t n = live_cells != nullptr ? core::min_of(*live_cells, num_cells) : num_cells;
  if (j >= n) return;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.y) * stride + j;
  importance[i] = core::importance_update(importance[i], attention[i], alpha);
}

/// Thread per (new cell, row): the entry prior of tiered_cache::append. Reads only cell
/// first - 1, which this kernel never writes.
static __global__ void importance_enter_kernel(float* importance, std::int32_t stride,
                                               std::int32_t first, std::int32_t count,
                                               bool neighbour_prior) {
  const std::int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= count) return;
  float* row = importance + static_cast<std::int64_t>(blockIdx.y) * stride;
  row[first + j] = neighbour_prior && first > 0 ? row[first - 1] : 0.0f;
}

/// Thread per (cell, kv head): scores = reduce_group(attention of the group's query heads).
static __global__ void reduce_group_kernel(const float* attention, float* scores,
                                           std::int32_t group, std::int32_t num_cells,
                                           std::int32_t stride, gqa_reduce mode) {
  const std::int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= num_cells) return;
  const std::int64_t h = blockIdx.y;
  scores[h * stride + j] =
      core::reduce_group(attention + h * group * stride, group, stride, j, mode);
}

/// Thread per (cell, row): out = median_at<W>(in row).
template <int W>
static __global__ void median_kernel(const float* in, float* out, std::int32_t num_cells,
                                     std::int32_t stride) {
  const std::int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= num_cells) return;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * stride;
  out[row + j] = core::median_at<W>(in + row, num_cells, j);
}

/// Thread per row: the Holt recurrence in time order, output clamped at 0 (trend_stage). The
/// recurrence is sequential; this is the correctness-first form (a chunked affine scan is the
/// planned optimisation).
static __global__ void trend_kernel(const float* in, float* out, std::int32_t rows,
                                    std::int32_t num_cells, std::int32_t stride, float level_weight,
                                    float slope_gain) {
  const std::int32_t h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= rows || num_cells == 0) return;
  const float* m = in + static_cast<std::int64_t>(h) * stride;
  float* s = out + static_cast<std::int64_t>(h) * stride;
  core::trend_row(m, s, num_cells, level_weight, slope_gain);
}

}  // namespace audiokv::cuda::kernels
