// SPDX-License-Identifier: Apache-2.0
/// @file
/// Launcher of a smoothing_pipeline of cell stages over rows of cells (one row per KV head).
/// Launcher contract (stream, no allocation, graph capture, errors): cuda/launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../../policy/stages/smoothing_pipeline.hpp"
#include "../../policy/stages/stage_context.hpp"
#include "../kernels/pipeline_kernel.cuh"

namespace audiokv::cuda {

/// @brief out[r][0, n) = pipeline(in[r][0, n)) for rows r in [0, rows), the same values as
/// pipeline.apply_per_cell() on the host (every stage's operator() is __host__ __device__).
///
/// `in`, `out`, `scratch`: device arrays of rows x stride floats (stride >= n; `scratch` is the
/// ping-pong buffer, `in` is only read and may not alias `out` or `scratch`); `contexts`:
/// device array of `rows` stage_context whose pointers are device pointers, or nullptr for an
/// empty context. The pipeline is passed by value (every cell stage is trivially copyable).
/// Enqueues one kernel of `rows` blocks on `stream`; allocates nothing, never synchronises.
/// @return cudaErrorInvalidValue for n < 0, rows < 0, stride < n or a null array with n > 0;
///         else the launch error.
template <class Pipeline>
cudaError_t smoothing_pipeline_rows(const Pipeline& pipeline, const float* in, float* out,
                                    float* scratch, std::int32_t n, std::int32_t rows,
                                    std::int64_t stride, const stage_context* contexts,
                                    cudaStream_t stream) {
  static_assert(Pipeline::runs_on_device,
                "audiokv::cuda::smoothing_pipeline_rows: every stage must be a cell stage "
                "(policy/stages/cell_stage.hpp)");
  if (n < 0 || rows < 0 || stride < n) return cudaErrorInvalidValue;
  if (n > 0 && (in == nullptr || out == nullptr || scratch == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (n == 0 || rows == 0) return cudaSuccess;
  constexpr int threads = 256;
  kernels::smoothing_pipeline_kernel<Pipeline>
      <<<rows, threads, 0, stream>>>(pipeline, in, out, scratch, n, stride, contexts);
  return cudaGetLastError();
}

}  // namespace audiokv::cuda
