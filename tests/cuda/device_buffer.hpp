// SPDX-License-Identifier: Apache-2.0
/// @file
/// Test-only device memory for the GPU tests (the library itself never allocates): whether a
/// device is present, and a zero-initialised device array that frees itself.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace audiokv::test {

/// True when the CUDA runtime sees at least one device; the GPU tests skip otherwise.
inline bool has_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

/// `n` elements of T on the device, zeroed, with 16 bytes of slack past the end (kernels that
/// read whole 16-byte words at a row's tail stay inside the allocation); at least one element
/// is allocated so `p` is never null.
template <class T>
struct device_buffer {
  T* p = nullptr;
  std::size_t n = 0;
  explicit device_buffer(std::size_t count) : n(count) {
    const std::size_t bytes = (count > 0 ? count : 1) * sizeof(T) + 16;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, 0, bytes), cudaSuccess);
  }
  explicit device_buffer(const std::vector<T>& h) : device_buffer(h.size()) { up(h); }
  ~device_buffer() { cudaFree(p); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  /// Copies `h` to the start of the buffer.
  void up(const std::vector<T>& h) {
    EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  /// The first `count` elements on the host.
  std::vector<T> down(std::size_t count) const {
    std::vector<T> h(count);
    EXPECT_EQ(cudaMemcpy(h.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  /// All `n` elements on the host.
  std::vector<T> down() const { return down(n); }
};

}  // namespace audiokv::test
