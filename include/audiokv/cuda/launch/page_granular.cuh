// SPDX-License-Identifier: Apache-2.0
/// @file
/// Page-granular eviction on the device (rule of pool/page_granular.hpp; CPU oracle
/// audiokv::make_page_granular): page scores and candidates from one sequence's cell scores,
/// then — after cuda::select_lowest over the pages — the cell keep mask of the kept pages, which
/// cuda::paged_compact turns into freed pages with no row copy.
/// The device path is the rule for plans that evict no protected cell (page_protection::page,
/// no due cell): it then equals make_page_granular. A plan that evicts protected cells (its
/// emergency pool's overflow, released boundary protections) is rewritten on the host by
/// make_page_granular, which evicts those due cells too.
/// Both launchers return cudaErrorInvalidValue, before any launch, for num_cells < 0,
/// page_size < 1, pages_for(num_cells) x page_size > core::max_table_cells or a missing
/// buffer.
/// Launcher contract (stream, workspace, graph capture, errors): cuda/launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../../pool/page_granular.hpp"
#include "../kernels/paged_kernel.cuh"
#include "workspace.cuh"

namespace audiokv::cuda {

/// @brief page_scores[p] (mean or max of the page's cell scores) and candidate[p] (0 for the
/// last page and for pages with a protected cell) for the ceil(num_cells / page_size) pages of
/// one sequence whose cell c lives in page c / page_size.
/// @param cell_scores      [num_cells] (e.g. eviction_plan::scores, uploaded)
/// @param protected_cells  [num_cells] 1 = protected, or nullptr
/// @param page_scores, candidate [ceil(num_cells / page_size)] out
inline cudaError_t page_scores(const float* cell_scores, const std::uint8_t* protected_cells,
                               std::int32_t num_cells, std::int32_t page_size, page_score_rule rule,
                               float* page_scores, std::uint8_t* candidate, cudaStream_t stream) {
  if (num_cells < 0 || page_size < 1 ||
      !core::table_cells_fit(core::pages_for(num_cells, page_size), page_size) ||
      (num_cells > 0 && (cell_scores == nullptr || page_scores == nullptr || candidate == nullptr)))
    return cudaErrorInvalidValue;
  if (num_cells == 0) return cudaSuccess;
  const std::int32_t pages = core::pages_for(num_cells, page_size);
  kernels::page_scores_kernel<<<detail::blocks_for(pages, 256), 256, 0, stream>>>(
      cell_scores, protected_cells, num_cells, page_size, rule == page_score_rule::max, page_scores,
      candidate);
  return cudaGetLastError();
}

/// @brief keep[c] = 1 unless page c / page_size is marked in evict_pages (select_lowest's
/// `evict` over the pages): the keep mask of paged_compact for one sequence.
inline cudaError_t page_keep_mask(const std::uint8_t* evict_pages, std::int32_t num_cells,
                                  std::int32_t page_size, std::uint8_t* keep, cudaStream_t stream) {
  if (num_cells < 0 || page_size < 1 ||
      !core::table_cells_fit(core::pages_for(num_cells, page_size), page_size) ||
      (num_cells > 0 && (evict_pages == nullptr || keep == nullptr)))
    return cudaErrorInvalidValue;
  if (num_cells == 0) return cudaSuccess;
  kernels::page_keep_kernel<<<detail::blocks_for(num_cells, 256), 256, 0, stream>>>(
      evict_pages, num_cells, page_size, keep);
  return cudaGetLastError();
}

}  // namespace audiokv::cuda
