// SPDX-License-Identifier: Apache-2.0
/// @file
/// int8 rows on the device: warp per row, max |x| by warp shuffle, then core::int8_scale,
/// core::quantize_int8 / core::dequantize_int8 per element.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../core/quantize.hpp"
#include "../dtype.cuh"

namespace audiokv::cuda::kernels {

// Kernels are static (internal linkage): every translation unit that includes this header
// compiles and registers its own copy, so any number of them link into one program.

/// Warp per row r: q[r, :dim], scales[r] from x[r * row_stride, :dim].
template <class T>
static __global__ void quantize_rows_kernel(const T* x, std::int64_t row_stride,
                                            std::int32_t num_rows, std::int32_t dim, std::int8_t* q,
                                            float* scales) {
  const std::int64_t r = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= num_rows) return;  // warp-uniform
  const T* row = x + r * row_stride;
  float max_abs = 0.0f;
  for (int i = lane; i < dim; i += 32)
    max_abs = core::max_of(max_abs, fabsf(cuda::detail::to_float(row[i])));
  for (int o = 16; o > 0; o /= 2)
    max_abs = core::max_of(max_abs, __shfl_xor_sync(0xffffffffu, max_abs, o));
  const float scale = core::int8_scale(max_abs);
  if (lane == 0) scales[r] = scale;
  for (int i = lane; i < dim; i += 32)
    q[r * dim + i] = core::quantize_int8(cuda::detail::to_float(row[i]), scale);
}

/// Thread per element: x[r * row_stride + i] = dequantize_int8(q[r, i], scales[r]).
template <class T>
static __global__ void dequantize_rows_kernel(const std::int8_t* q, const float* scales,
                                              std::int32_t num_rows, std::int32_t dim, T* x,
                                              std::int64_t row_stride) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<std::int64_t>(num_rows) * dim) return;
  const std::int64_t r = i / dim;
  x[r * row_stride + i % dim] = cuda::detail::from_float<T>(core::dequantize_int8(q[i], scales[r]));
}

}  // namespace audiokv::cuda::kernels
