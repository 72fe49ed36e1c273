// SPDX-License-Identifier: Apache-2.0
/// @file
/// Launchers of deterministic selection: the k lowest (score, cell) keys of each row.
/// Launcher contract (stream, workspace, graph capture, errors): cuda/launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "../../core/selection_key.hpp"
#include "../check.cuh"
#include "../kernels/select_kernel.cuh"
#include "workspace.cuh"

namespace audiokv::cuda {

/// @brief Workspace of select_lowest for `rows` rows of `num_cells` cells.
inline std::size_t select_workspace_bytes(std::int32_t rows, std::int32_t num_cells) {
  const std::size_t n = static_cast<std::size_t>(rows) * num_cells;
  std::size_t sort_bytes = 0;
  cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes, static_cast<const std::uint64_t*>(nullptr),
                                 static_cast<std::uint64_t*>(nullptr), static_cast<int>(n), 0, 64);
  detail::workspace_carver w(nullptr);
  w.take<std::uint64_t>(n);
  w.take<std::uint64_t>(n);
  w.take<unsigned char>(sort_bytes);
  return w.used();
}

/// @brief For every row h, marks the k[h] candidates that come first in the order
/// (score, cell) — core::evicts_before, the CPU tie rule — as evicted. Identical sets to
/// cpu::reference::select_lowest.
/// @param scores     [rows, stride] fp32; any value: NaN ranks lowest (core/selection.hpp)
/// @param candidate  [rows, stride] 1 = may be evicted, or nullptr (all)
/// @param k          [rows] device counts
/// @param evict      [rows, stride] 1 = evicted, or nullptr
/// @param keep       [rows, stride] 1 = kept (the complement), or nullptr
/// One radix sort over (row, score, cell) keys (CUB); never allocates or synchronises.
inline cudaError_t select_lowest(const float* scores, const std::uint8_t* candidate,
                                 std::int32_t rows, std::int32_t num_cells, std::int32_t stride,
                                 const std::int32_t* k, std::uint8_t* evict, std::uint8_t* keep,
                                 void* workspace, std::size_t workspace_bytes,
                                 cudaStream_t stream) {
  if (rows < 0 || num_cells < 0 || stride < num_cells || k == nullptr ||
      !core::selection_key_fits(static_cast<std::uint32_t>(rows),
                                static_cast<std::uint32_t>(num_cells)) ||
      static_cast<std::int64_t>(rows) * num_cells > INT32_MAX ||
      workspace_bytes < select_workspace_bytes(rows, num_cells))
    return cudaErrorInvalidValue;
  if (rows == 0 || num_cells == 0) return cudaSuccess;
  const std::size_t n = static_cast<std::size_t>(rows) * num_cells;
  const std::int32_t slot_bits = core::bits_for(static_cast<std::uint32_t>(num_cells));
  const int end_bit = 32 + slot_bits + core::bits_for(static_cast<std::uint32_t>(rows));
  detail::workspace_carver w(workspace);
  std::uint64_t* keys_in = w.take<std::uint64_t>(n);
  std::uint64_t* keys_out = w.take<std::uint64_t>(n);
  std::size_t sort_bytes = 0;
  AUDIOKV_CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes,
                                                  static_cast<const std::uint64_t*>(keys_in),
                                                  keys_out, static_cast<int>(n), 0, 64));
  void* sort_tmp = w.take<unsigned char>(sort_bytes);
  kernels::
      selection_keys_kernel<<<dim3(detail::blocks_for(num_cells, 256), rows), 256, 0, stream>>>(
          scores, candidate, num_cells, stride, slot_bits, keys_in);
  AUDIOKV_CUDA_TRY(cudaGetLastError());
  AUDIOKV_CUDA_TRY(cub::DeviceRadixSort::SortKeys(
      sort_tmp, sort_bytes, static_cast<const std::uint64_t*>(keys_in), keys_out,
      static_cast<int>(n), 0, end_bit, stream));
  kernels::selection_mark_kernel<<<detail::blocks_for(static_cast<std::int64_t>(n), 256), 256, 0,
                                   stream>>>(keys_out, rows, num_cells, stride, slot_bits, k, evict,
                                             keep);
  return cudaGetLastError();
}

}  // namespace audiokv::cuda
