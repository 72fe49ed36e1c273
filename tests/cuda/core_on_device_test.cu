// SPDX-License-Identifier: Apache-2.0
// The same core/ functions the CPU tests prove, executed in a kernel and compared with the host.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <audiokv/core/median.hpp>
#include <audiokv/core/quantize.hpp>
#include <audiokv/core/selection.hpp>
#include <vector>

namespace {

__global__ void median5_kernel(const float* x, int n, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = audiokv::core::median_at<5>(x, n, i);
}

bool has_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TEST(CudaCore, MedianMatchesHost) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device: kernel execution not tested here";
  std::vector<float> x(1000);
  for (int i = 0; i < 1000; ++i) x[i] = static_cast<float>((i * 7919) % 101);
  float *dx = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, x.size() * sizeof(float)), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  median5_kernel<<<4, 256>>>(dx, 1000, dy);
  std::vector<float> y(1000);
  cudaMemcpy(y.data(), dy, y.size() * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(y[i], audiokv::core::median_at<5>(x.data(), 1000, i));
}

}  // namespace
