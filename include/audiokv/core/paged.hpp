// SPDX-License-Identifier: Apache-2.0
/// @file
/// Paged KV (FlashInfer / vLLM CSR page tables) and the page-table form of compaction.
///
/// A batch of sequences shares one page pool. Sequence b owns the pages
/// indices[indptr[b] .. indptr[b+1]) in time order; all are full except the last, which holds
/// last_page_len[b] cells (FlashInfer paged_kv_t). Cell c of sequence b lives at page
/// indices[indptr[b] + c / page_size], entry c % page_size. A keep mask over the same cells is
/// laid out like the page list: keep[(indptr[b] + c / P) * P + c % P].
///
/// **Paged compaction rule** (the CPU reference is cpu/paged.hpp, the GPU one cuda/paged.cuh):
///  1. Kept cells keep their time order and are packed densely: cell c gets the new logical index
///     t(c) = number of kept cells before c (the contiguous rule of core/compaction.hpp).
///     The sequence then needs ceil(n_kept / P) pages, the last one holding the remainder.
///  2. New page k is *aligned* when the cells landing in it already sit in one old page j at the
///     same entries (t - kP == c - jP for all of them). Because c - t (cells evicted before c)
///     never decreases, this holds iff the first and last cell of new page k have the same
///     c - t and it is a multiple of P; then j = k + (c - t) / P. Aligned pages are reused in
///     place: no byte moves.
///  3. Every other new page is a *copy page*. The r-th copy page (ascending k) is written into
///     the r-th old page of the sequence whose cells are all evicted (ascending), and when those
///     run out into caller-supplied spare pages (shared across the batch, taken in batch
///     order). Destination pages hold no kept cell, so no move reads a row another move writes:
///     all moves run in parallel, in place, and each is a byte-exact row copy.
///  4. Old pages that are neither reused nor a destination are freed whole (listed in page-list
///     order). If the spares do not suffice for the whole batch, nothing changes (status
///     reports it) — a plan is applied only when complete.
/// Consequences: page_size 1 never copies (new indices = the kept pages); evicting whole pages
/// (block-granular eviction) never copies; a hole early in a sequence turns every later page
/// into a copy page (the cost of keeping the table dense and time-ordered).
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "math.hpp"

namespace audiokv::core {

/// Cells one page table may address: every sequence's pages together (indptr[batch] x
/// page_size), or the whole pages covering one sequence's cells. 2^30, so the sum of any two
/// cell indices or counts of an accepted table, and a block-strided loop stepping past its
/// last cell, stay within int32.
inline constexpr std::int32_t max_table_cells = std::int32_t{1} << 30;

/// True when `pages` pages of `page_size` cells hold at most max_table_cells cells
/// (pages x page_size <= 2^30, decided without forming the product), pages >= 0 and
/// page_size >= 1. The entry points that take a page table or a page size check it first.
AUDIOKV_HOST_DEVICE constexpr bool table_cells_fit(std::int64_t pages, std::int32_t page_size) {
  return pages >= 0 && page_size >= 1 && pages <= max_table_cells / page_size;
}

/// Cells held by a sequence of num_pages pages whose last page holds last_page_len cells.
/// No overflow when table_cells_fit(num_pages, page_size) and 1 <= last_page_len <= page_size.
AUDIOKV_HOST_DEVICE std::int32_t sequence_cells(std::int32_t num_pages, std::int32_t last_page_len,
                                                std::int32_t page_size) {
  return num_pages > 0 ? (num_pages - 1) * page_size + last_page_len : 0;
}

/// Pages needed by n >= 0 cells: ceil(n / page_size), as n / P + (n % P != 0) so that no
/// intermediate exceeds n (no overflow for any n >= 0, page_size >= 1).
AUDIOKV_HOST_DEVICE std::int32_t pages_for(std::int32_t n, std::int32_t page_size) {
  return n / page_size + (n % page_size != 0 ? 1 : 0);
}

/// Entries used in the last of pages_for(n) pages (0 when n == 0): (n - 1) % P + 1, which
/// equals n - (pages_for(n) - 1) * P and never overflows.
AUDIOKV_HOST_DEVICE std::int32_t last_page_len_for(std::int32_t n, std::int32_t page_size) {
  return n > 0 ? (n - 1) % page_size + 1 : 0;
}

/// True when any of the `len` cells of one page is kept.
/// @param keep [len] keep mask of the page's cells
AUDIOKV_HOST_DEVICE bool page_has_kept(const std::uint8_t* keep, std::int32_t len) {
  for (std::int32_t e = 0; e < len; ++e)
    if (keep[e] != 0) return true;
  return false;
}

/// Cells in new page k (0 <= k < pages_for(n_kept)) of a sequence of n_kept cells. k x P <
/// n_kept for such k, so nothing overflows.
AUDIOKV_HOST_DEVICE std::int32_t page_fill(std::int32_t n_kept, std::int32_t page_size,
                                           std::int32_t k) {
  return min_of(page_size, n_kept - k * page_size);
}

/// Old page (position within the sequence's page list) that new page k reuses in place, or -1
/// when k is a copy page (rule 2). 0 <= k < pages_for(n_kept, page_size).
/// @param src_of [n_kept] old cell index of every new cell (t -> c).
AUDIOKV_HOST_DEVICE std::int32_t aligned_source_page(const std::int32_t* src_of,
                                                     std::int32_t n_kept, std::int32_t page_size,
                                                     std::int32_t k) {
  const std::int32_t first = k * page_size;
  const std::int32_t last = first + page_fill(n_kept, page_size, k) - 1;  // no first + P
  const std::int32_t d_first = src_of[first] - first;
  const std::int32_t d_last = src_of[last] - last;
  if (d_first != d_last || d_first % page_size != 0) return -1;
  return k + d_first / page_size;
}

/// Destination page id of the r-th copy page of a sequence (rule 3).
/// @param evicted_page_ids  [num_evicted_pages] ids of the sequence's fully evicted old pages
/// @param spare_pages       caller's spare page ids; spare_offset = spares taken by earlier
///                          sequences of the batch
AUDIOKV_HOST_DEVICE std::int32_t copy_destination(std::int32_t r,
                                                  const std::int32_t* evicted_page_ids,
                                                  std::int32_t num_evicted_pages,
                                                  const std::int32_t* spare_pages,
                                                  std::int32_t spare_offset) {
  return r < num_evicted_pages ? evicted_page_ids[r]
                               : spare_pages[spare_offset + r - num_evicted_pages];
}

/// Spare pages a sequence needs: copy pages beyond its fully evicted old pages.
AUDIOKV_HOST_DEVICE std::int32_t spare_pages_needed(std::int32_t num_copy_pages,
                                                    std::int32_t num_evicted_pages) {
  return max_of(num_copy_pages - num_evicted_pages, 0);
}

/// Pages a sequence frees: old pages neither reused (aligned) nor used as a copy destination.
AUDIOKV_HOST_DEVICE std::int32_t pages_freed(std::int32_t old_pages, std::int32_t new_pages,
                                             std::int32_t num_copy_pages,
                                             std::int32_t num_evicted_pages) {
  return old_pages - (new_pages - num_copy_pages) - min_of(num_copy_pages, num_evicted_pages);
}

/// Element offset of row (cell, head) in a K or V tensor that is either contiguous
/// (page_indices == nullptr: offset = cell * entry_stride + head * head_stride) or paged
/// (offset = page_indices[cell / page_size] * page_stride + (cell % page_size) * entry_stride +
/// head * head_stride). Covers FlashInfer kNHD ([pages, P, heads, dim]) and kHND
/// ([pages, heads, P, dim]) pools and contiguous NHD / HND tensors.
struct kv_addressing {
  const std::int32_t* page_indices = nullptr;  ///< [num_pages] or nullptr (contiguous)
  std::int32_t page_size = 1;                  ///< cells per page (1 when contiguous)
  std::int64_t page_stride = 0;                ///< elements between pages
  std::int64_t entry_stride = 0;  ///< elements between cells (entries) of one page / tensor
  std::int64_t head_stride = 0;   ///< elements between heads

  /// Element offset of the first element of row (cell, head).
  AUDIOKV_HOST_DEVICE std::int64_t row_offset(std::int32_t cell, std::int32_t head) const {
    if (page_indices == nullptr) return cell * entry_stride + head * head_stride;
    const std::int64_t page = page_indices[cell / page_size];
    return page * page_stride + (cell % page_size) * entry_stride + head * head_stride;
  }
};

/// K (or V) of a batch of sequences: either a FlashInfer-style CSR page table over one page pool
/// (indptr != nullptr: sequence b owns pages indices[indptr[b] .. indptr[b+1]), the last holding
/// last_page_len[b] cells) or contiguous per-sequence rows (indptr == nullptr: sequence b holds
/// seq_lens[b] cells starting seq_stride * b elements into the tensor). Row (cell, head) of
/// sequence b starts at sequence_offset(b) + sequence(b).row_offset(cell, head).
struct kv_batch_addressing {
  const std::int32_t* indptr = nullptr;         ///< [batch + 1] or nullptr (contiguous)
  const std::int32_t* indices = nullptr;        ///< [indptr[batch]] page ids (paged)
  const std::int32_t* last_page_len = nullptr;  ///< [batch] cells in each last page (paged)
  const std::int32_t* seq_lens = nullptr;       ///< [batch] cells per sequence (contiguous)
  std::int32_t page_size = 1;                   ///< cells per page (paged)
  std::int64_t page_stride = 0;                 ///< elements between pages (paged)
  std::int64_t seq_stride = 0;                  ///< elements between sequences (contiguous)
  std::int64_t entry_stride = 0;                ///< elements between cells of a page / sequence
  std::int64_t head_stride = 0;                 ///< elements between heads

  /// True for the CSR page-table form.
  AUDIOKV_HOST_DEVICE bool paged() const { return indptr != nullptr; }

  /// Cells held by sequence b.
  AUDIOKV_HOST_DEVICE std::int32_t num_cells(std::int32_t b) const {
    return paged() ? sequence_cells(indptr[b + 1] - indptr[b], last_page_len[b], page_size)
                   : seq_lens[b];
  }

  /// Element offset of sequence b's base (0 for the paged form: its pages carry the offset).
  AUDIOKV_HOST_DEVICE std::int64_t sequence_offset(std::int32_t b) const {
    return paged() ? 0 : b * seq_stride;
  }

  /// Cell -> row addressing of sequence b, relative to sequence_offset(b).
  AUDIOKV_HOST_DEVICE kv_addressing sequence(std::int32_t b) const {
    return paged() ? kv_addressing{indices + indptr[b], page_size, page_stride, entry_stride,
                                   head_stride}
                   : kv_addressing{nullptr, 1, 0, entry_stride, head_stride};
  }
};

}  // namespace audiokv::core
