// SPDX-License-Identifier: Apache-2.0
// Peak DRAM bandwidth of the current CUDA device, from the attributes CUDA 13 still provides
// (cudaDeviceProp lost memoryClockRate in CUDA 13; the device attributes remain).
#pragma once

#include <cuda_runtime.h>

namespace audiokv::bench {

/// Peak DRAM bandwidth in bytes per second: 2 transfers per memory clock (DDR/HBM) x memory clock
/// (cudaDevAttrMemoryClockRate, kHz) x bus width (cudaDevAttrGlobalMemoryBusWidth, bits) / 8.
/// 0 when there is no device or the driver does not report the attributes.
inline double peak_bytes_per_second() {
  int dev = 0, clock_khz = 0, bus_bits = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0.0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess)
    return 0.0;
  return 2.0 * clock_khz * 1e3 * bus_bits / 8.0;
}

}  // namespace audiokv::bench
