// SPDX-License-Identifier: Apache-2.0
/// @file
/// Hole-filling compaction on the device (rule of core/hole_filling.hpp; CPU oracle
/// audiokv::slot_map::plan and cpu::compact's hole_fill_plan mode). Same contract as every
/// launcher (cuda/launch.cuh): the caller's stream and workspace, no allocation, no
/// synchronisation, fixed grids (the move count stays in device memory), cudaErrorInvalidValue
/// before anything is enqueued for a bad argument.
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

/// @brief Workspace of hole_fill_from_mask for up to `num_slots` slots.
inline std::size_t hole_fill_workspace_bytes(std::int32_t num_slots) {
  const std::size_t n = num_slots > 0 ? static_cast<std::size_t>(num_slots) : 0;
  std::size_t scan_bytes = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const std::int32_t*>(nullptr),
                                static_cast<std::int32_t*>(nullptr), static_cast<int>(n));
  detail::workspace_carver w(nullptr);
  w.take<std::int32_t>(n);  // keep counts
  w.take<std::int32_t>(n);  // exclusive prefix
  w.take<std::int32_t>(n);  // hole of each rank
  w.take<unsigned char>(scan_bytes);
  return w.used();
}

/// @brief The hole-filling moves of one buffer from its physical keep mask.
/// @param keep       [num_slots] 1 = the row in this slot survives
/// @param move_to    [num_slots] out: new slot of each row, -1 evicted (hole_fill_plan::move_to)
/// @param src, dst   [num_slots] out: the first *num_moves entries are the moves, src ascending,
///                   dst ascending (hole_fill_plan::src / dst)
/// @param num_moves  [1] out: rows to copy (<= evicted rows)
/// @param n_after    [1] out, or nullptr: kept rows
inline cudaError_t hole_fill_from_mask(const std::uint8_t* keep, std::int32_t num_slots,
                                       std::int32_t* move_to, std::int32_t* src, std::int32_t* dst,
                                       std::int32_t* num_moves, std::int32_t* n_after,
                                       void* workspace, std::size_t workspace_bytes,
                                       cudaStream_t stream) {
  if (num_slots < 0 || keep == nullptr || move_to == nullptr || src == nullptr || dst == nullptr ||
      num_moves == nullptr || workspace_bytes < hole_fill_workspace_bytes(num_slots))
    return cudaErrorInvalidValue;
  if (num_slots == 0) {
    AUDIOKV_CUDA_TRY(cudaMemsetAsync(num_moves, 0, sizeof(std::int32_t), stream));
    if (n_after != nullptr)
      AUDIOKV_CUDA_TRY(cudaMemsetAsync(n_after, 0, sizeof(std::int32_t), stream));
    return cudaSuccess;
  }
  const auto n = static_cast<std::size_t>(num_slots);
  detail::workspace_carver w(workspace);
  std::int32_t* counts = w.take<std::int32_t>(n);
  std::int32_t* prefix = w.take<std::int32_t>(n);
  std::int32_t* hole_of_rank = w.take<std::int32_t>(n);
  std::size_t scan_bytes = 0;
  AUDIOKV_CUDA_TRY(cub::DeviceScan::ExclusiveSum(
      nullptr, scan_bytes, static_cast<const std::int32_t*>(counts), prefix, static_cast<int>(n)));
  void* scan_tmp = w.take<unsigned char>(scan_bytes);
  const dim3 grid(detail::blocks_for(num_slots, 256), 1);
  kernels::keep_counts_kernel<<<grid, 256, 0, stream>>>(keep, num_slots, num_slots, counts);
  AUDIOKV_CUDA_TRY(cudaGetLastError());
  AUDIOKV_CUDA_TRY(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes,
                                                 static_cast<const std::int32_t*>(counts), prefix,
                                                 static_cast<int>(n), stream));
  kernels::hole_fill_holes_kernel<<<grid, 256, 0, stream>>>(keep, prefix, num_slots, hole_of_rank,
                                                            num_moves, n_after);
  AUDIOKV_CUDA_TRY(cudaGetLastError());
  kernels::hole_fill_moves_kernel<<<grid, 256, 0, stream>>>(keep, prefix, num_slots, hole_of_rank,
                                                            move_to, src, dst);
  return cudaGetLastError();
}

/// @brief Copies row (src[k], h) to (dst[k], h) in place for k < *num_moves and every head h of
/// `layout` (page_stride ignored; rows are slot * entry_stride + h * head_stride bytes from
/// `kv`). Byte-exact; the moves must come from hole_fill_from_mask or slot_map::plan (no source
/// is a destination). For K and V, call once per buffer; for per-head plans (one slot map per
/// head), call once per head with `kv` advanced by h * head_stride and layout.num_heads = 1.
inline cudaError_t hole_fill_rows(void* kv, const row_layout& layout, const std::int32_t* src,
                                  const std::int32_t* dst, const std::int32_t* num_moves,
                                  cudaStream_t stream) {
  if (kv == nullptr || src == nullptr || dst == nullptr || num_moves == nullptr ||
      layout.row_bytes <= 0 || layout.num_heads <= 0)
    return cudaErrorInvalidValue;
  auto* bytes = static_cast<unsigned char*>(kv);
  const int width = core::row_copy_width(layout.row_bytes, bytes, bytes,
                                         layout.entry_stride | layout.head_stride);
  kernels::hole_fill_rows_kernel<<<1024, 256, 0, stream>>>(bytes, layout, width, src, dst,
                                                           num_moves);
  return cudaGetLastError();
}

/// @brief Hole-filling inside one sequence's own pages (the device form of
/// cpu::plan_paged_in_place + cpu::apply_paged_moves): slot s is entry s % page_size of page
/// pages[s / page_size]; row (dst[k], h) = row (src[k], h) for k < *num_moves, every head of
/// `layout` (page_stride, entry_stride, head_stride in bytes). No spare page is used; afterwards
/// the sequence needs only its first ceil(n_after / page_size) pages.
/// @param pool  a FlashInfer-style page pool (K or V)
/// @param pages [the sequence's pages] its page list in slot order (device memory)
inline cudaError_t hole_fill_paged_rows(void* pool, const row_layout& layout,
                                        const std::int32_t* pages, std::int32_t page_size,
                                        const std::int32_t* src, const std::int32_t* dst,
                                        const std::int32_t* num_moves, cudaStream_t stream) {
  if (pool == nullptr || pages == nullptr || src == nullptr || dst == nullptr ||
      num_moves == nullptr || page_size < 1 || layout.row_bytes <= 0 || layout.num_heads <= 0)
    return cudaErrorInvalidValue;
  auto* bytes = static_cast<unsigned char*>(pool);
  const int width =
      core::row_copy_width(layout.row_bytes, bytes, bytes,
                           layout.page_stride | layout.entry_stride | layout.head_stride);
  kernels::hole_fill_paged_rows_kernel<<<1024, 256, 0, stream>>>(bytes, layout, width, pages,
                                                                 page_size, src, dst, num_moves);
  return cudaGetLastError();
}

}  // namespace audiokv::cuda
