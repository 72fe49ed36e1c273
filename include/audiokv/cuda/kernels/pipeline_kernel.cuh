// SPDX-License-Identifier: Apache-2.0
/// @file
/// A smoothing_pipeline of cell stages on the device: one thread block per row (KV head), a
/// thread per cell and stage, the block synchronised between stages. Each stage reads the
/// previous stage's whole row, so a cell may read any neighbour.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../policy/stages/cell_stage.hpp"
#include "../../policy/stages/smoothing_pipeline.hpp"
#include "../../policy/stages/stage_context.hpp"

namespace audiokv::cuda::kernels {

/// Stage I of `pipeline` over cells [0, n) of one row, then the following stages, ping-ponging
/// between buffers[0] and buffers[1] (the last stage writes the row's output).
template <std::size_t I, class Pipeline>
__device__ void run_pipeline_stages(const Pipeline& pipeline, const float* in,
                                    float* const (&buffers)[2], std::int32_t n,
                                    const stage_context& ctx) {
  float* out = buffers[I % 2];
  const auto& stage = pipeline.template stage<I>();
  for (std::int32_t j = threadIdx.x; j < n; j += blockDim.x) {
    out[j] = audiokv::policy::stages::detail::eval_cell(stage, in, n, j, ctx);
  }
  __syncthreads();
  if constexpr (I + 1 < Pipeline::num_stages) {
    run_pipeline_stages<I + 1>(pipeline, out, buffers, n, ctx);
  }
}

/// Block per row r: out[r] = pipeline(in[r]) over n cells, rows `stride` floats apart in `in`,
/// `out` and `scratch`; contexts[r] is row r's stage_context (device pointers).
template <class Pipeline>
static __global__ void smoothing_pipeline_kernel(Pipeline pipeline, const float* in, float* out,
                                                 float* scratch, std::int32_t n,
                                                 std::int64_t stride,
                                                 const stage_context* contexts) {
  static_assert(Pipeline::runs_on_device,
                "audiokv::cuda::smoothing_pipeline_kernel: every stage must be a cell stage");
  const std::int64_t row = blockIdx.x;
  const float* row_in = in + row * stride;
  float* row_out = out + row * stride;
  float* row_scratch = scratch + row * stride;
  const stage_context ctx = contexts != nullptr ? contexts[row] : stage_context{};
  if constexpr (Pipeline::num_stages == 0) {
    for (std::int32_t j = threadIdx.x; j < n; j += blockDim.x) row_out[j] = row_in[j];
  } else {
    float* const buffers[2] = {Pipeline::num_stages % 2 == 1 ? row_out : row_scratch,
                               Pipeline::num_stages % 2 == 1 ? row_scratch : row_out};
    run_pipeline_stages<0>(pipeline, row_in, buffers, n, ctx);
  }
}

}  // namespace audiokv::cuda::kernels
