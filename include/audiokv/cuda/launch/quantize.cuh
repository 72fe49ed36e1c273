// SPDX-License-Identifier: Apache-2.0
/// @file
/// Launchers of int8 rows: quantise and dequantise rows with one float scale per row.
/// Launcher contract (stream, workspace, graph capture, errors): cuda/launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../dispatch.cuh"
#include "../kernels/quantize_kernel.cuh"
#include "workspace.cuh"

namespace audiokv::cuda {

/// @brief q[r, :dim] and scales[r] from rows x[r * row_stride, :dim] of element type `type`.
/// @param x [num_rows, row_stride]  @param q [num_rows, dim]  @param scales [num_rows]
inline cudaError_t quantize_rows(dtype type, const void* x, std::int64_t row_stride,
                                 std::int32_t num_rows, std::int32_t dim, std::int8_t* q,
                                 float* scales, cudaStream_t stream) {
  if (num_rows < 0 || dim < 1 || row_stride < dim) return cudaErrorInvalidValue;
  if (num_rows == 0) return cudaSuccess;
  AUDIOKV_DISPATCH_DTYPE(type, T, {
    kernels::quantize_rows_kernel<T>
        <<<detail::blocks_for(static_cast<std::int64_t>(num_rows) * 32, 256), 256, 0, stream>>>(
            static_cast<const T*>(x), row_stride, num_rows, dim, q, scales);
  })
  return cudaGetLastError();
}

/// @brief x[r * row_stride + i] = q[r, i] * scales[r], converted to `type` (round to nearest).
inline cudaError_t dequantize_rows(dtype type, const std::int8_t* q, const float* scales,
                                   std::int32_t num_rows, std::int32_t dim, void* x,
                                   std::int64_t row_stride, cudaStream_t stream) {
  if (num_rows < 0 || dim < 1 || row_stride < dim) return cudaErrorInvalidValue;
  if (num_rows == 0) return cudaSuccess;
  AUDIOKV_DISPATCH_DTYPE(type, T, {
    kernels::dequantize_rows_kernel<T>
        <<<detail::blocks_for(static_cast<std::int64_t>(num_rows) * dim, 256), 256, 0, stream>>>(
            q, scales, num_rows, dim, static_cast<T*>(x), row_stride);
  })
  return cudaGetLastError();
}

}  // namespace audiokv::cuda
