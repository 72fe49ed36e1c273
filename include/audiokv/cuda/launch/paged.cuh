// SPDX-License-Identifier: Apache-2.0
/// @file
/// Launcher of paged compaction (rule in core/paged.hpp): page-table updates and row copies.
/// Launcher contract (stream, workspace, graph capture, errors): cuda/launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../check.cuh"
#include "../kernels/paged_kernel.cuh"
#include "../params.cuh"
#include "workspace.cuh"

namespace audiokv::cuda {

/// @brief Shape of a paged compaction: the batch's page table capacity.
struct paged_shape {
  /// Sequences in the batch.
  std::int32_t batch = 0;
  /// indptr[batch] (an upper bound is fine); nnz_pages x page_size must stay within
  /// core::max_table_cells, so that every cell index of the kernels fits in int32.
  std::int32_t nnz_pages = 0;
  /// Cells per page (P).
  std::int32_t page_size = 1;
};

/// @brief Workspace of paged_compact.
inline std::size_t paged_workspace_bytes(const paged_shape& shape) {
  detail::workspace_carver w(nullptr);
  const std::size_t np = static_cast<std::size_t>(shape.nnz_pages);
  w.take<std::int32_t>(np * shape.page_size);
  for (int i = 0; i < 6; ++i) w.take<std::int32_t>(np);
  w.take<std::int32_t>(4 * static_cast<std::size_t>(shape.batch));
  w.take<std::int32_t>(static_cast<std::size_t>(shape.batch));
  return w.used();
}

/// @brief Page-table compaction of a batch (rule of core/paged.hpp; oracle
/// cpu::plan_paged_compaction) and the row copies in up to two page stores (K and V).
/// @param indices, indptr, last_page_len  input CSR table ([nnz], [batch + 1], [batch])
/// @param keep         [nnz_pages * page_size] 1 = keep
/// @param spare_pages  [num_spare] free page ids copy pages may use
/// @param new_indices  [nnz_pages]  @param new_indptr [batch + 1]  @param new_last_page_len
///                     [batch]  @param freed_pages [nnz_pages]  @param freed_indptr [batch + 1]
/// @param status       [2] {1 ok / 0 spares short (table unchanged, nothing moved), spares
///                     needed}
/// @param k_pages, v_pages  page stores to move rows in (either may be nullptr), both with `layout`
/// Five launches on `stream`; never allocates or synchronises. cudaErrorInvalidValue, before any
/// launch, for batch < 0, page_size < 1, nnz_pages < 0, nnz_pages x page_size >
/// core::max_table_cells, num_spare < 0 or a workspace below paged_workspace_bytes(shape).
inline cudaError_t paged_compact(const paged_shape& shape, const std::int32_t* indices,
                                 const std::int32_t* indptr, const std::int32_t* last_page_len,
                                 const std::uint8_t* keep, const std::int32_t* spare_pages,
                                 std::int32_t num_spare, std::int32_t* new_indices,
                                 std::int32_t* new_indptr, std::int32_t* new_last_page_len,
                                 std::int32_t* freed_pages, std::int32_t* freed_indptr,
                                 std::int32_t* status, void* k_pages, void* v_pages,
                                 const row_layout& layout, void* workspace,
                                 std::size_t workspace_bytes, cudaStream_t stream) {
  if (shape.batch < 0 || !core::table_cells_fit(shape.nnz_pages, shape.page_size) ||
      num_spare < 0 || workspace_bytes < paged_workspace_bytes(shape))
    return cudaErrorInvalidValue;
  if (shape.batch == 0) return cudaSuccess;
  kernels::paged_table t{indices,     indptr,      last_page_len,   keep,
                         spare_pages, shape.batch, shape.page_size, num_spare};
  kernels::paged_result r{new_indices, new_indptr,   new_last_page_len,
                          freed_pages, freed_indptr, status};
  detail::workspace_carver w(workspace);
  const std::size_t np = static_cast<std::size_t>(shape.nnz_pages);
  kernels::paged_scratch s;
  s.src_of = w.take<std::int32_t>(np * shape.page_size);
  s.slot_reuse = w.take<std::int32_t>(np);
  s.slot_rank = w.take<std::int32_t>(np);
  s.slot_dest = w.take<std::int32_t>(np);
  s.reused = w.take<std::int32_t>(np);
  s.fe_rank = w.take<std::int32_t>(np);
  s.fe_ids = w.take<std::int32_t>(np);
  s.seq = w.take<std::int32_t>(4 * static_cast<std::size_t>(shape.batch));
  s.spare_offset = w.take<std::int32_t>(static_cast<std::size_t>(shape.batch));
  constexpr int threads = kernels::paged_block;
  kernels::paged_analyse_kernel<<<shape.batch, threads, 0, stream>>>(t, s);
  kernels::paged_batch_kernel<<<1, threads, 0, stream>>>(t, s, r);
  kernels::paged_table_kernel<<<shape.batch, threads, 0, stream>>>(t, s, r);
  AUDIOKV_CUDA_TRY(cudaGetLastError());
  for (void* pages : {k_pages, v_pages}) {
    if (pages == nullptr) continue;
    auto* bytes = static_cast<unsigned char*>(pages);
    const int width =
        core::row_copy_width(layout.row_bytes, bytes, bytes,
                             layout.page_stride | layout.entry_stride | layout.head_stride);
    const dim3 grid(64, static_cast<unsigned>(shape.batch));
    kernels::paged_move_kernel<<<grid, 256, 0, stream>>>(t, s, status, bytes, layout, width);
    AUDIOKV_CUDA_TRY(cudaGetLastError());
  }
  return cudaSuccess;
}

}  // namespace audiokv::cuda
