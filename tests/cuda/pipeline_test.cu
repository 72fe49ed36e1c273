// SPDX-License-Identifier: Apache-2.0
// A smoothing_pipeline of cell stages (the library's and a user's functor) in the CUDA kernel of
// cuda/launch/pipeline.cuh against the same pipeline object run cell by cell on the host. Every
// stage computes the same float operations on both sides, so the rows must be equal bit for
// bit. Skips (GTEST_SKIP) without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <audiokv/cuda/launch/pipeline.cuh>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/device_buffer.hpp"

namespace {

using namespace audiokv;

/// A user's stage: a 1-2-1 blur with the ends replicated.
struct blur_121 {
  AUDIOKV_HOST_DEVICE float operator()(const cell_neighbourhood& cell, const stage_context&) const {
    return 0.25f * cell.at(-1) + 0.5f * cell.centre() + 0.25f * cell.at(1);
  }
};

using audiokv::test::has_device;

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

TEST(CudaPipeline, CellStagesMatchTheHostBitForBit) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device: kernel not executed on this machine";
  using pipeline_t =
      smoothing_pipeline<median_stage<5>, blur_121, local_rank_stage, speaker_norm_stage>;
  pipeline_t pipeline;
  pipeline.stage<2>().block = 16;
  constexpr std::int32_t rows = 3, n = 1000, stride = 1024, speakers = 2;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> in(static_cast<std::size_t>(rows) * stride, 0.0f);
  std::vector<std::int32_t> speaker(static_cast<std::size_t>(rows) * stride, 0);
  std::vector<float> baseline(static_cast<std::size_t>(rows) * speakers);
  for (auto& v : in) v = u(rng);
  for (std::size_t i = 0; i < speaker.size(); ++i)
    speaker[i] = static_cast<std::int32_t>(i / 37 % 2);
  for (auto& v : baseline) v = 0.1f + u(rng);

  float *d_in = nullptr, *d_out = nullptr, *d_scratch = nullptr, *d_baseline = nullptr;
  std::int32_t* d_speaker = nullptr;
  stage_context* d_ctx = nullptr;
  const std::size_t bytes = in.size() * sizeof(float);
  CUDA_OK(cudaMalloc(&d_in, bytes));
  CUDA_OK(cudaMalloc(&d_out, bytes));
  CUDA_OK(cudaMalloc(&d_scratch, bytes));
  CUDA_OK(cudaMalloc(&d_speaker, speaker.size() * sizeof(std::int32_t)));
  CUDA_OK(cudaMalloc(&d_baseline, baseline.size() * sizeof(float)));
  CUDA_OK(cudaMalloc(&d_ctx, rows * sizeof(stage_context)));
  std::vector<stage_context> ctx(rows), host_ctx(rows);
  for (std::int32_t r = 0; r < rows; ++r) {
    ctx[r] = {d_speaker + r * stride, d_baseline + r * speakers, speakers, nullptr};
    host_ctx[r] = {speaker.data() + r * stride, baseline.data() + r * speakers, speakers, nullptr};
  }
  CUDA_OK(cudaMemcpy(d_in, in.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_speaker, speaker.data(), speaker.size() * sizeof(std::int32_t),
                     cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_baseline, baseline.data(), baseline.size() * sizeof(float),
                     cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_ctx, ctx.data(), rows * sizeof(stage_context), cudaMemcpyHostToDevice));
  CUDA_OK(cuda::smoothing_pipeline_rows(pipeline, d_in, d_out, d_scratch, n, rows, stride, d_ctx,
                                        nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> device_out(in.size());
  CUDA_OK(cudaMemcpy(device_out.data(), d_out, bytes, cudaMemcpyDeviceToHost));
  for (std::int32_t r = 0; r < rows; ++r) {
    std::vector<float> expected(n), scratch(n);
    pipeline.apply_per_cell(in.data() + r * stride, expected.data(), scratch.data(), n,
                            host_ctx[r]);
    for (std::int32_t j = 0; j < n; ++j) {
      ASSERT_EQ(device_out[r * stride + j], expected[j]) << "row " << r << " cell " << j;
    }
  }
  EXPECT_EQ(cuda::smoothing_pipeline_rows(pipeline, d_in, d_out, d_scratch, n, rows, n - 1, d_ctx,
                                          nullptr),
            cudaErrorInvalidValue);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_scratch);
  cudaFree(d_speaker);
  cudaFree(d_baseline);
  cudaFree(d_ctx);
}

}  // namespace
