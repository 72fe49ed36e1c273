// SPDX-License-Identifier: Apache-2.0
// Prints the CUDA device the GPU checks run on, as "key: value" lines (name, compute capability,
// memory, peak DRAM bandwidth, driver and runtime versions). Exit 0 with a device, 77 without one
// (the reason on stdout), 1 when the runtime reports a device it cannot query.
#include <cuda_runtime.h>

#include <cstdio>

#include "device_peak.hpp"

int main() {
  int runtime = 0, driver = 0, count = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);  // 0 when no driver is installed
  std::printf("runtime_version: %d\ndriver_version: %d\n", runtime, driver);
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    const char* why = driver == 0        ? "no NVIDIA driver loaded"
                      : e != cudaSuccess ? cudaGetErrorString(e)
                                         : "the driver reports 0 devices";
    std::printf("no CUDA device: %s\n", why);
    return 77;
  }
  cudaDeviceProp p{};
  int mem_khz = 0;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0) != cudaSuccess) {
    std::printf("device 0 cannot be queried\n");
    return 1;
  }
  std::printf("device_count: %d\nname: %s\ncompute_capability: %d.%d\nmultiprocessors: %d\n", count,
              p.name, p.major, p.minor, p.multiProcessorCount);
  std::printf("global_memory_bytes: %zu\nl2_bytes: %d\nmemory_clock_khz: %d\nbus_width_bits: %d\n",
              p.totalGlobalMem, p.l2CacheSize, mem_khz, p.memoryBusWidth);
  std::printf("peak_dram_bytes_per_second: %.6g\n", audiokv::bench::peak_bytes_per_second());
  return 0;
}
