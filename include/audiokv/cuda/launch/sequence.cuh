// SPDX-License-Identifier: Apache-2.0
/// @file
/// Launchers of the temporal and sequence stages (rows = KV heads, `stride` floats apart):
/// importance EMA and entry prior, group reduction, median, Holt trend.
/// Launcher contract (stream, workspace, graph capture, errors): cuda/launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../kernels/sequence_kernel.cuh"
#include "workspace.cuh"

namespace audiokv::cuda {

/// @brief importance[h, j] = alpha * attention[h, j] + (1 - alpha) * importance[h, j] for
/// j < live count. @param importance, attention [rows, stride]. No workspace.
inline cudaError_t importance_update(float* importance, const float* attention, std::int32_t rows,
                                     std::int32_t num_cells, std::int32_t stride, float alpha,
                                     const std::int32_t* live_cells, cudaStream_t stream) {
  if (rows < 0 || num_cells < 0 || stride < num_cells) return cudaErrorInvalidValue;
  if (rows == 0 || num_cells == 0) return cudaSuccess;
  kernels::
      importance_update_kernel<<<dim3(detail::blocks_for(num_cells, 256), rows), 256, 0, stream>>>(
          importance, attention, num_cells, live_cells, stride, alpha);
  return cudaGetLastError();
}

/// @brief Entry prior of new cells [first, first + count): importance[h, first - 1] or 0.
inline cudaError_t importance_enter(float* importance, std::int32_t rows, std::int32_t stride,
                                    std::int32_t first, std::int32_t count, bool neighbour_prior,
                                    cudaStream_t stream) {
  if (rows < 0 || first < 0 || count < 0 || first + count > stride) return cudaErrorInvalidValue;
  if (rows == 0 || count == 0) return cudaSuccess;
  kernels::importance_enter_kernel<<<dim3(detail::blocks_for(count, 256), rows), 256, 0, stream>>>(
      importance, stride, first, count, neighbour_prior);
  return cudaGetLastError();
}

/// @brief scores[h, j] = reduce over the group's query heads of attention (GQA), for
/// probabilities produced by the engine's own attention kernel.
/// @param attention [num_kv_heads * group, stride]  @param scores [num_kv_heads, stride]
inline cudaError_t reduce_group(const float* attention, float* scores, std::int32_t num_kv_heads,
                                std::int32_t group, std::int32_t num_cells, std::int32_t stride,
                                gqa_reduce mode, cudaStream_t stream) {
  if (num_kv_heads < 0 || group < 1 || num_cells < 0 || stride < num_cells)
    return cudaErrorInvalidValue;
  if (num_kv_heads == 0 || num_cells == 0) return cudaSuccess;
  kernels::reduce_group_kernel<<<dim3(detail::blocks_for(num_cells, 256), num_kv_heads), 256, 0,
                                 stream>>>(attention, scores, group, num_cells, stride, mode);
  return cudaGetLastError();
}

/// @brief out[h, j] = median_at<W>(in[h, :num_cells], j), edge padded. out must not alias in.
template <int W = 5>
cudaError_t median(const float* in, float* out, std::int32_t rows, std::int32_t num_cells,
                   std::int32_t stride, cudaStream_t stream) {
  if (rows < 0 || num_cells < 0 || stride < num_cells || in == out) return cudaErrorInvalidValue;
  if (rows == 0 || num_cells == 0) return cudaSuccess;
  kernels::median_kernel<W><<<dim3(detail::blocks_for(num_cells, 256), rows), 256, 0, stream>>>(
      in, out, num_cells, stride);
  return cudaGetLastError();
}

/// @brief Holt trend per row (core/trend.hpp), output clamped at 0; out may alias in.
/// Sequential per row (one thread per row).
inline cudaError_t trend(const float* in, float* out, std::int32_t rows, std::int32_t num_cells,
                         std::int32_t stride, float level_weight, float slope_gain,
                         cudaStream_t stream) {
  if (rows < 0 || num_cells < 0 || stride < num_cells) return cudaErrorInvalidValue;
  if (rows == 0 || num_cells == 0) return cudaSuccess;
  kernels::trend_kernel<<<detail::blocks_for(rows, 32), 32, 0, stream>>>(
      in, out, rows, num_cells, stride, level_weight, slope_gain);
  return cudaGetLastError();
}

}  // namespace audiokv::cuda
