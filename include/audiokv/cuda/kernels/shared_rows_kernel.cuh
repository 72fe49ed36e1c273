// SPDX-License-Identifier: Apache-2.0
/// @file
/// Shared rows on the device: the logit bias of shared rows (core::multiplicity_bias) and each
/// cell's probability from its row's (core::shared_cell_probability). Rows are KV heads, `*_stride`
/// elements apart; every row has its own slot table.
#pragma once

#include <cstdint>

#include "../../core/shared_rows.hpp"

namespace audiokv::cuda::kernels {

// Kernels are static (internal linkage): every translation unit that includes this header
// compiles and registers its own copy, so any number of them link into one program.

/// Thread per (physical row r, head h): bias[h, r] = ln multiplicity[h, r].
static __global__ void multiplicity_bias_kernel(const std::int32_t* multiplicity, float* bias,
                                                std::int32_t num_rows, std::int32_t row_stride) {
  const std::int32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= num_rows) return;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.y) * row_stride + r;
  bias[i] = core::multiplicity_bias(multiplicity[i]);
}

/// Thread per (cell c, head h): cell_probs[h, c] = row_probs[h, r] / multiplicity[h, r] with
/// r = cell_row[h, c].
static __global__ void shared_cell_probs_kernel(const float* row_probs,
                                                const std::int32_t* multiplicity,
                                                const std::int32_t* cell_row, float* cell_probs,
                                                std::int32_t num_cells, std::int32_t cell_stride,
                                                std::int32_t row_stride) {
  const std::int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= num_cells) return;
  const std::int64_t head = blockIdx.y;
  const std::int64_t r = head * row_stride + cell_row[head * cell_stride + c];
  cell_probs[head * cell_stride + c] = core::shared_cell_probability(row_probs[r], multiplicity[r]);
}

}  // namespace audiokv::cuda::kernels
