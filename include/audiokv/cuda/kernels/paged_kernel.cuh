// SPDX-License-Identifier: Apache-2.0
/// @file
/// Paged compaction: the paged compaction rule of core/paged.hpp on the device, four launches:
///  analyse (block per sequence): prefix of the keep mask -> src_of, slot alignment, copy ranks,
///          fully evicted pages;
///  batch   (one block): new indptr, freed indptr, spare offsets, the all-or-nothing status;
///  table   (block per sequence): new indices, last_page_len, freed pages, copy destinations;
///  move    (blocks x sequences): byte-exact row copies (core::copy_row) into the destination
///          pages.
/// Also page-granular eviction (rule of pool/page_granular.hpp): page scores and candidates from
/// cell scores, and the cell keep mask of the chosen pages.
#pragma once

#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "../../core/paged.hpp"
#include "../../core/row_copy.hpp"
#include "../params.cuh"

namespace audiokv::cuda::kernels {

// Kernels are static (internal linkage): every translation unit that includes this header
// compiles and registers its own copy, so any number of them link into one program.

inline constexpr int paged_block = 256;

/// Per-sequence scratch of the paged kernels (one entry per page of the input table unless
/// noted). Trivially copyable, lives in the caller's workspace.
struct paged_scratch {
  std::int32_t* src_of = nullptr;        // [nnz_pages * page_size] new cell -> old cell
  std::int32_t* slot_reuse = nullptr;    // [nnz_pages] reused old page position or -1
  std::int32_t* slot_rank = nullptr;     // [nnz_pages] copy rank or -1
  std::int32_t* slot_dest = nullptr;     // [nnz_pages] destination page id of copy pages, else -1
  std::int32_t* reused = nullptr;        // [nnz_pages] 1 when the old page is reused in place
  std::int32_t* fe_rank = nullptr;       // [nnz_pages] rank among fully evicted pages or -1
  std::int32_t* fe_ids = nullptr;        // [nnz_pages] ids of fully evicted pages, by rank
  std::int32_t* seq = nullptr;           // [batch, 4] n_kept, new pages, copies, fully evicted
  std::int32_t* spare_offset = nullptr;  // [batch]
};

struct paged_table {
  const std::int32_t* indices = nullptr;        // [nnz_pages]
  const std::int32_t* indptr = nullptr;         // [batch + 1]
  const std::int32_t* last_page_len = nullptr;  // [batch]
  const std::uint8_t* keep = nullptr;           // [nnz_pages * page_size]
  const std::int32_t* spare_pages = nullptr;    // [num_spare]
  std::int32_t batch = 0;
  std::int32_t page_size = 1;
  std::int32_t num_spare = 0;
};

struct paged_result {
  std::int32_t* new_indices = nullptr;        // [nnz_pages] (first new_indptr[batch] used)
  std::int32_t* new_indptr = nullptr;         // [batch + 1]
  std::int32_t* new_last_page_len = nullptr;  // [batch]
  std::int32_t* freed_pages = nullptr;        // [nnz_pages] (first freed_indptr[batch] used)
  std::int32_t* freed_indptr = nullptr;       // [batch + 1]
  std::int32_t* status = nullptr;             // [2] ok (1/0), spare pages needed
};

using paged_scan = cub::BlockScan<std::int32_t, paged_block>;

/// Exclusive block-wide sum of flag; returns the prefix, adds the block total to carry.
AUDIOKV_DEVICE std::int32_t scan_step(std::int32_t flag, std::int32_t& carry,
                                      paged_scan::TempStorage& tmp) {
  std::int32_t excl = 0, total = 0;
  paged_scan(tmp).ExclusiveSum(flag, excl, total);
  __syncthreads();
  const std::int32_t out = carry + excl;
  carry += total;
  return out;
}

static __global__ void __launch_bounds__(paged_block)
    paged_analyse_kernel(const paged_table t, const paged_scratch s) {
  __shared__ paged_scan::TempStorage tmp;
  const int b = blockIdx.x;
  const std::int32_t P = t.page_size;
  const std::int32_t p0 = t.indptr[b];
  const std::int32_t np = t.indptr[b + 1] - p0;
  const std::int32_t n = core::sequence_cells(np, t.last_page_len[b], P);
  const std::int64_t cell0 = static_cast<std::int64_t>(p0) * P;
  std::int32_t n_kept = 0;
  for (std::int32_t base = 0; base < n; base += paged_block) {
    const std::int32_t c = base + threadIdx.x;
    const std::int32_t kept = c < n && t.keep[cell0 + c] != 0 ? 1 : 0;
    const std::int32_t to = scan_step(kept, n_kept, tmp);
    if (kept) s.src_of[cell0 + to] = c;
  }
  for (std::int32_t p = threadIdx.x; p < np; p += paged_block) s.reused[p0 + p] = 0;
  __syncthreads();
  const std::int32_t new_np = core::pages_for(n_kept, P);
  std::int32_t copies = 0;
  for (std::int32_t base = 0; base < new_np; base += paged_block) {
    const std::int32_t k = base + threadIdx.x;
    const std::int32_t reuse =
        k < new_np ? core::aligned_source_page(s.src_of + cell0, n_kept, P, k) : 0;
    const std::int32_t is_copy = k < new_np && reuse < 0 ? 1 : 0;
    const std::int32_t rank = scan_step(is_copy, copies, tmp);
    if (k < new_np) {
      s.slot_reuse[p0 + k] = reuse;
      s.slot_rank[p0 + k] = is_copy ? rank : -1;
      if (reuse >= 0) s.reused[p0 + reuse] = 1;
    }
  }
  std::int32_t evicted = 0;
  for (std::int32_t base = 0; base < np; base += paged_block) {
    const std::int32_t p = base + threadIdx.x;
    const std::int32_t len = p == np - 1 ? t.last_page_len[b] : P;
    const std::int32_t fe = p < np && !core::page_has_kept(t.keep + cell0 + p * P, len) ? 1 : 0;
    const std::int32_t rank = scan_step(fe, evicted, tmp);
    if (p < np) s.fe_rank[p0 + p] = fe ? rank : -1;
    if (fe) s.fe_ids[p0 + rank] = t.indices[p0 + p];
  }
  if (threadIdx.x == 0) {
    s.seq[4 * b + 0] = n_kept;
    s.seq[4 * b + 1] = new_np;
    s.seq[4 * b + 2] = copies;
    s.seq[4 * b + 3] = evicted;
  }
}

/// One block: batch-wide prefix sums and the all-or-nothing decision.
static __global__ void __launch_bounds__(paged_block)
    paged_batch_kernel(const paged_table t, const paged_scratch s, const paged_result r) {
  __shared__ paged_scan::TempStorage tmp;
  __shared__ std::int32_t s_ok;
  std::int32_t spare = 0;
  for (std::int32_t base = 0; base < t.batch; base += paged_block) {
    const std::int32_t b = base + threadIdx.x;
    const std::int32_t need =
        b < t.batch ? core::spare_pages_needed(s.seq[4 * b + 2], s.seq[4 * b + 3]) : 0;
    const std::int32_t off = scan_step(need, spare, tmp);
    if (b < t.batch) s.spare_offset[b] = off;
  }
  if (threadIdx.x == 0) {
    s_ok = spare <= t.num_spare ? 1 : 0;
    r.status[0] = s_ok;
    r.status[1] = spare;
    r.new_indptr[0] = 0;
    r.freed_indptr[0] = 0;
  }
  __syncthreads();
  std::int32_t pages = 0, freed = 0;
  for (std::int32_t base = 0; base < t.batch; base += paged_block) {
    const std::int32_t b = base + threadIdx.x;
    std::int32_t np = 0, fr = 0;
    if (b < t.batch) {
      const std::int32_t old_np = t.indptr[b + 1] - t.indptr[b];
      np = s_ok ? s.seq[4 * b + 1] : old_np;
      fr = s_ok ? core::pages_freed(old_np, s.seq[4 * b + 1], s.seq[4 * b + 2], s.seq[4 * b + 3])
                : 0;
    }
    const std::int32_t page_off = scan_step(np, pages, tmp);
    const std::int32_t freed_off = scan_step(fr, freed, tmp);
    if (b < t.batch) {
      r.new_indptr[b + 1] = page_off + np;
      r.freed_indptr[b + 1] = freed_off + fr;
      r.new_last_page_len[b] =
          s_ok ? core::last_page_len_for(s.seq[4 * b], t.page_size) : t.last_page_len[b];
    }
  }
}

/// Block per sequence: the new page list, freed pages and copy destinations.
static __global__ void __launch_bounds__(paged_block)
    paged_table_kernel(const paged_table t, const paged_scratch s, const paged_result r) {
  __shared__ paged_scan::TempStorage tmp;
  const int b = blockIdx.x;
  const std::int32_t p0 = t.indptr[b];
  const std::int32_t np = t.indptr[b + 1] - p0;
  const std::int32_t out0 = r.new_indptr[b];
  if (r.status[0] == 0) {  // spares short: the table stays as it was
    for (std::int32_t p = threadIdx.x; p < np; p += paged_block)
      r.new_indices[out0 + p] = t.indices[p0 + p];
    return;
  }
  const std::int32_t new_np = s.seq[4 * b + 1];
  const std::int32_t copies = s.seq[4 * b + 2];
  const std::int32_t evicted = s.seq[4 * b + 3];
  for (std::int32_t k = threadIdx.x; k < new_np; k += paged_block) {
    const std::int32_t reuse = s.slot_reuse[p0 + k];
    const std::int32_t dst =
        reuse >= 0 ? t.indices[p0 + reuse]
                   : core::copy_destination(s.slot_rank[p0 + k], s.fe_ids + p0, evicted,
                                            t.spare_pages, s.spare_offset[b]);
    r.new_indices[out0 + k] = dst;
    s.slot_dest[p0 + k] = reuse >= 0 ? -1 : dst;
  }
  std::int32_t freed = 0;
  for (std::int32_t base = 0; base < np; base += paged_block) {
    const std::int32_t p = base + threadIdx.x;
    const bool is_freed =
        p < np && s.reused[p0 + p] == 0 && !(s.fe_rank[p0 + p] >= 0 && s.fe_rank[p0 + p] < copies);
    const std::int32_t rank = scan_step(is_freed ? 1 : 0, freed, tmp);
    if (is_freed) r.freed_pages[r.freed_indptr[b] + rank] = t.indices[p0 + p];
  }
}

/// Grid (x, sequence): copies every (cell, head) row of every copy page, core::row_copy_lanes
/// threads per row, by core::copy_row in words of `width` bytes (the launch's
/// core::row_copy_width). A destination page (spare or fully evicted) holds no kept row, so no
/// source is a destination.
static __global__ void paged_move_kernel(const paged_table t, const paged_scratch s,
                                         const std::int32_t* status, unsigned char* pool,
                                         const row_layout layout, int width) {
  if (status[0] == 0) return;
  const int b = blockIdx.y;
  const std::int32_t P = t.page_size;
  const std::int32_t p0 = t.indptr[b];
  const std::int64_t cell0 = static_cast<std::int64_t>(p0) * P;
  const std::int32_t n_kept = s.seq[4 * b];
  const std::int64_t lanes = core::row_copy_lanes(layout.row_bytes / width);
  const core::row_lane_assignment a =
      core::assign_row_lanes(static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                             static_cast<std::int64_t>(gridDim.x) * blockDim.x, lanes);
  const std::int64_t rows = static_cast<std::int64_t>(n_kept) * layout.num_heads;
  for (std::int64_t rh = a.first; rh < rows; rh += a.step) {
    const auto h = static_cast<std::int32_t>(rh % layout.num_heads);
    const auto cell = static_cast<std::int32_t>(rh / layout.num_heads);
    const std::int32_t dst_page = s.slot_dest[p0 + cell / P];
    if (dst_page < 0) continue;
    const std::int32_t src = s.src_of[cell0 + cell];
    const std::int64_t col = h * layout.head_stride;
    const std::int64_t from =
        t.indices[p0 + src / P] * layout.page_stride + (src % P) * layout.entry_stride + col;
    const std::int64_t to = dst_page * layout.page_stride + (cell % P) * layout.entry_stride + col;
    core::copy_row(pool + to, pool + from, layout.row_bytes, width, a.lane, lanes);
  }
}

/// Thread per page p of one sequence of n cells: page_scores[p] = mean (or max when use_max) of
/// its cells' scores; candidate[p] = 1 unless p is the last page or holds a protected cell.
static __global__ void page_scores_kernel(const float* cell_scores,
                                          const std::uint8_t* protected_cells, std::int32_t n,
                                          std::int32_t page_size, bool use_max, float* page_scores,
                                          std::uint8_t* candidate) {
  const std::int32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  const std::int32_t pages = core::pages_for(n, page_size);
  if (p >= pages) return;
  bool locked = p == pages - 1;
  float sum = 0.0f, best = 0.0f;
  for (std::int32_t c = p * page_size; c < min((p + 1) * page_size, n); ++c) {
    const float s = cell_scores[c];
    sum += s;
    best = c == p * page_size ? s : fmaxf(best, s);
    locked = locked || (protected_cells != nullptr && protected_cells[c] != 0);
  }
  page_scores[p] = use_max ? best : sum / static_cast<float>(page_size);
  candidate[p] = locked ? 0 : 1;
}

/// Thread per cell: keep[c] = 0 when its page is evicted.
static __global__ void page_keep_kernel(const std::uint8_t* evict_pages, std::int32_t n,
                                        std::int32_t page_size, std::uint8_t* keep) {
  const std::int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < n) keep[c] = evict_pages[c / page_size] != 0 ? 0 : 1;
}

}  // namespace audiokv::cuda::kernels
