// SPDX-License-Identifier: Apache-2.0
/// @file
/// Launchers for shared rows (rows = KV heads, each with its own slot table): the ln m logit
/// bias and each cell's share of its row's probability.
/// Launcher contract (stream, workspace, graph capture, errors): cuda/launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../kernels/shared_rows_kernel.cuh"
#include "workspace.cuh"

namespace audiokv::cuda {

/// @brief bias[h, r] = ln multiplicity[h, r] for r < num_rows: the logit_bias of
/// decode_attention over physical rows. @param multiplicity, bias [rows, row_stride].
inline cudaError_t multiplicity_bias(const std::int32_t* multiplicity, float* bias,
                                     std::int32_t rows, std::int32_t num_rows,
                                     std::int32_t row_stride, cudaStream_t stream) {
  if (rows < 0 || num_rows < 0 || row_stride < num_rows) return cudaErrorInvalidValue;
  if (rows == 0 || num_rows == 0) return cudaSuccess;
  kernels::
      multiplicity_bias_kernel<<<dim3(detail::blocks_for(num_rows, 256), rows), 256, 0, stream>>>(
          multiplicity, bias, num_rows, row_stride);
  return cudaGetLastError();
}

/// @brief cell_probs[h, c] = row_probs[h, cell_row[h, c]] / multiplicity[h, cell_row[h, c]]:
/// each logical cell's probability, for the policy's observe().
/// @param row_probs, multiplicity [rows, row_stride]  @param cell_row, cell_probs
/// [rows, cell_stride]
inline cudaError_t shared_cell_probs(const float* row_probs, const std::int32_t* multiplicity,
                                     const std::int32_t* cell_row, float* cell_probs,
                                     std::int32_t rows, std::int32_t num_cells,
                                     std::int32_t cell_stride, std::int32_t row_stride,
                                     cudaStream_t stream) {
  if (rows < 0 || num_cells < 0 || cell_stride < num_cells || row_stride < 0)
    return cudaErrorInvalidValue;
  if (rows == 0 || num_cells == 0) return cudaSuccess;
  kernels::
      shared_cell_probs_kernel<<<dim3(detail::blocks_for(num_cells, 256), rows), 256, 0, stream>>>(
          row_probs, multiplicity, cell_row, cell_probs, num_cells, cell_stride, row_stride);
  return cudaGetLastError();
}

}  // namespace audiokv::cuda
