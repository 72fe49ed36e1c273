// SPDX-License-Identifier: Apache-2.0
/// @file
/// Launchers of compaction for contiguous layouts: move maps from keep masks, and the
/// out-of-place row gather.
/// Launcher contract (stream, workspace, graph capture, errors): cuda/launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cub/device/device_scan.cuh>

#include "../check.cuh"
#include "../kernels/compact_kernel.cuh"
#include "../params.cuh"
#include "workspace.cuh"

namespace audiokv::cuda {

/// @brief Workspace of move_to_from_mask.
inline std::size_t move_to_workspace_bytes(std::int32_t rows, std::int32_t num_cells) {
  const std::size_t n = static_cast<std::size_t>(rows) * num_cells;
  std::size_t scan_bytes = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const std::int32_t*>(nullptr),
                                static_cast<std::int32_t*>(nullptr), static_cast<int>(n));
  detail::workspace_carver w(nullptr);
  w.take<std::int32_t>(n);
  w.take<std::int32_t>(n);
  w.take<unsigned char>(scan_bytes);
  return w.used();
}

/// @brief move_to[h, j] = number of kept cells before j in row h (or -1 when dropped) and
/// n_kv_after[h] = kept cells, from a device-wide prefix sum (core::compaction_target).
/// @param keep [rows, stride]  @param move_to [rows, stride]  @param n_kv_after [rows] or null
inline cudaError_t move_to_from_mask(const std::uint8_t* keep, std::int32_t rows,
                                     std::int32_t num_cells, std::int32_t stride,
                                     std::int32_t* move_to, std::int32_t* n_kv_after,
                                     void* workspace, std::size_t workspace_bytes,
                                     cudaStream_t stream) {
  if (rows < 0 || num_cells < 0 || stride < num_cells ||
      static_cast<std::int64_t>(rows) * num_cells > INT32_MAX ||
      workspace_bytes < move_to_workspace_bytes(rows, num_cells))
    return cudaErrorInvalidValue;
  if (rows == 0 || num_cells == 0) return cudaSuccess;
  const std::size_t n = static_cast<std::size_t>(rows) * num_cells;
  detail::workspace_carver w(workspace);
  std::int32_t* counts = w.take<std::int32_t>(n);
  std::int32_t* prefix = w.take<std::int32_t>(n);
  std::size_t scan_bytes = 0;
  AUDIOKV_CUDA_TRY(cub::DeviceScan::ExclusiveSum(
      nullptr, scan_bytes, static_cast<const std::int32_t*>(counts), prefix, static_cast<int>(n)));
  void* scan_tmp = w.take<unsigned char>(scan_bytes);
  const dim3 grid(detail::blocks_for(num_cells, 256), static_cast<unsigned>(rows));
  kernels::keep_counts_kernel<<<grid, 256, 0, stream>>>(keep, num_cells, stride, counts);
  AUDIOKV_CUDA_TRY(cudaGetLastError());
  AUDIOKV_CUDA_TRY(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes,
                                                 static_cast<const std::int32_t*>(counts), prefix,
                                                 static_cast<int>(n), stream));
  kernels::move_to_kernel<<<grid, 256, 0, stream>>>(keep, prefix, num_cells, stride, move_to,
                                                    n_kv_after);
  return cudaGetLastError();
}

/// @brief Out-of-place, byte-exact gather: dst row (move_to[j], h) = src row (j, h) for every
/// kept cell j < num_cells and head h (layout.page_stride is ignored; rows are
/// j * entry_stride + h * head_stride bytes from the base). The plan is shared by all heads
/// (plan_rows == 1) or per head (plan_rows == num_heads, move_to row h drives head h).
/// dst must not overlap src (the engine ping-pongs two buffers or compacts from a copy).
/// @param move_to [plan_rows, move_stride] (a plan's move_to uploaded, or move_to_from_mask's)
inline cudaError_t gather_rows(const void* src, void* dst, const row_layout& layout,
                               const std::int32_t* move_to, std::int32_t plan_rows,
                               std::int32_t move_stride, std::int32_t num_cells,
                               cudaStream_t stream) {
  if (num_cells < 0 || layout.row_bytes <= 0 || layout.num_heads <= 0 ||
      (plan_rows != 1 && plan_rows != layout.num_heads) || src == dst)
    return cudaErrorInvalidValue;
  if (num_cells == 0) return cudaSuccess;
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  const int width =
      core::row_copy_width(layout.row_bytes, d, s, layout.entry_stride | layout.head_stride);
  kernels::gather_rows_kernel<<<2048, 256, 0, stream>>>(s, d, layout, width, move_to, plan_rows,
                                                        move_stride, num_cells);
  return cudaGetLastError();
}

}  // namespace audiokv::cuda
