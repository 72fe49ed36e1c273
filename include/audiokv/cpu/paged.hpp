// SPDX-License-Identifier: Apache-2.0
/// @file
/// F26 / F9 on the CPU: the paged compaction rule of core/paged.hpp as plain loops — the oracle
/// of cuda::paged_compact. Allocates its result vectors (host reference, not the decode path).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "../core/paged.hpp"
#include "../error.hpp"

namespace audiokv::cpu {

/// One row copy of a paged compaction: (page, entry) -> (page, entry), every head.
struct paged_row_move {
  std::int32_t src_page = 0;
  std::int32_t src_entry = 0;
  std::int32_t dst_page = 0;
  std::int32_t dst_entry = 0;
  bool operator==(const paged_row_move& o) const {
    return src_page == o.src_page && src_entry == o.src_entry && dst_page == o.dst_page &&
           dst_entry == o.dst_entry;
  }
};

/// @brief Result of a paged compaction (CSR, like the input page table).
struct paged_compaction {
  std::vector<std::int32_t> new_indices;        // [new_indptr.back()]
  std::vector<std::int32_t> new_indptr;         // [batch + 1]
  std::vector<std::int32_t> new_last_page_len;  // [batch]
  std::vector<std::int32_t> freed_pages;        // [freed_indptr.back()], page-list order
  std::vector<std::int32_t> freed_indptr;       // [batch + 1]
  std::vector<paged_row_move> moves;            // sequence order, then new-cell order
  std::int32_t spare_pages_used = 0;
  /// False when the spare pages did not suffice; then the table is returned unchanged, nothing
  /// is freed and nothing moves.
  bool ok = true;
};

/// @brief Applies the rule of core/paged.hpp to a batch.
/// @param indices        [indptr[batch]] page ids
/// @param indptr         [batch + 1]
/// @param last_page_len  [batch]
/// @param keep           [indptr[batch] * page_size] 1 = keep (layout of core/paged.hpp)
/// @param spare_pages    [num_spare] free page ids the rule may write copy pages into
inline paged_compaction plan_paged_compaction(const std::int32_t* indices,
                                              const std::int32_t* indptr,
                                              const std::int32_t* last_page_len, std::int32_t batch,
                                              std::int32_t page_size, const std::uint8_t* keep,
                                              const std::int32_t* spare_pages,
                                              std::int32_t num_spare) {
  const char* where = "cpu::plan_paged_compaction";
  AUDIOKV_REQUIRE(page_size >= 1, where, "page_size", page_size, "must be >= 1");
  AUDIOKV_REQUIRE(batch >= 0, where, "batch", batch, "must be >= 0");
  paged_compaction out;
  out.new_indptr.assign(batch + 1, 0);
  out.freed_indptr.assign(batch + 1, 0);
  out.new_last_page_len.assign(batch, 0);
  std::int32_t spare_offset = 0;
  std::vector<std::int32_t> src_of, evicted;
  for (std::int32_t b = 0; b < batch; ++b) {
    const std::int32_t p0 = indptr[b];
    const std::int32_t np = indptr[b + 1] - p0;
    AUDIOKV_REQUIRE(np >= 0, where, ::audiokv::detail::indexed("indptr", b + 1), indptr[b + 1],
                    "must be >= indptr[b]");
    AUDIOKV_REQUIRE(np == 0 || (last_page_len[b] >= 1 && last_page_len[b] <= page_size), where,
                    ::audiokv::detail::indexed("last_page_len", b), last_page_len[b],
                    "must be in [1, page_size] for a non-empty sequence");
    const std::int32_t n = core::sequence_cells(np, last_page_len[b], page_size);
    const std::uint8_t* k = keep + static_cast<std::int64_t>(p0) * page_size;
    src_of.clear();
    for (std::int32_t c = 0; c < n; ++c)
      if (k[c]) src_of.push_back(c);
    const auto n_kept = static_cast<std::int32_t>(src_of.size());
    const std::int32_t new_np = core::pages_for(n_kept, page_size);
    std::vector<std::int32_t> reuse(new_np), rank(new_np, -1);
    std::vector<bool> reused(np, false), used(np, false);
    std::int32_t copies = 0;
    for (std::int32_t s = 0; s < new_np; ++s) {
      reuse[s] = core::aligned_source_page(src_of.data(), n_kept, page_size, s);
      if (reuse[s] >= 0) {
        reused[reuse[s]] = true;
      } else {
        rank[s] = copies++;
      }
    }
    evicted.clear();
    for (std::int32_t p = 0; p < np; ++p) {
      const std::int32_t len = p == np - 1 ? last_page_len[b] : page_size;
      if (!core::page_has_kept(k + p * page_size, len)) evicted.push_back(p);
    }
    const auto num_evicted = static_cast<std::int32_t>(evicted.size());
    for (std::int32_t r = 0; r < copies && r < num_evicted; ++r) used[evicted[r]] = true;
    out.spare_pages_used += core::spare_pages_needed(copies, num_evicted);
    out.new_indptr[b + 1] = out.new_indptr[b] + new_np;
    out.new_last_page_len[b] = core::last_page_len_for(n_kept, page_size);
    std::vector<std::int32_t> evicted_ids(num_evicted);
    for (std::int32_t r = 0; r < num_evicted; ++r) evicted_ids[r] = indices[p0 + evicted[r]];
    for (std::int32_t s = 0; s < new_np; ++s) {
      if (reuse[s] >= 0) {
        out.new_indices.push_back(indices[p0 + reuse[s]]);
        continue;
      }
      const bool spare = rank[s] >= num_evicted;
      const std::int32_t dst = spare && spare_offset + rank[s] - num_evicted >= num_spare
                                   ? -1
                                   : core::copy_destination(rank[s], evicted_ids.data(),
                                                            num_evicted, spare_pages, spare_offset);
      out.new_indices.push_back(dst);
      for (std::int32_t e = 0; e < core::page_fill(n_kept, page_size, s); ++e) {
        const std::int32_t c = src_of[s * page_size + e];
        out.moves.push_back({indices[p0 + c / page_size], c % page_size, dst, e});
      }
    }
    spare_offset += core::spare_pages_needed(copies, num_evicted);
    for (std::int32_t p = 0; p < np; ++p)
      if (!reused[p] && !used[p]) out.freed_pages.push_back(indices[p0 + p]);
    out.freed_indptr[b + 1] = static_cast<std::int32_t>(out.freed_pages.size());
    AUDIOKV_ASSERT(out.freed_indptr[b + 1] - out.freed_indptr[b] ==
                   core::pages_freed(np, new_np, copies, num_evicted));
  }
  if (out.spare_pages_used > num_spare) {  // rule 4: all or nothing
    paged_compaction unchanged;
    unchanged.new_indptr.assign(indptr, indptr + batch + 1);
    unchanged.new_indices.assign(indices, indices + indptr[batch]);
    unchanged.new_last_page_len.assign(last_page_len, last_page_len + batch);
    unchanged.freed_indptr.assign(batch + 1, 0);
    unchanged.spare_pages_used = out.spare_pages_used;
    unchanged.ok = false;
    return unchanged;
  }
  return out;
}

/// @brief Executes the moves on one paged K or V pool, byte for byte, every head.
/// Strides are in bytes; a row is row_bytes long. Never allocates.
inline void apply_paged_moves(unsigned char* pool, std::int64_t page_stride_bytes,
                              std::int64_t entry_stride_bytes, std::int64_t head_stride_bytes,
                              std::int32_t num_heads, std::int64_t row_bytes,
                              const std::vector<paged_row_move>& moves) {
  for (const paged_row_move& m : moves) {
    for (std::int32_t h = 0; h < num_heads; ++h) {
      std::memcpy(pool + m.dst_page * page_stride_bytes + m.dst_entry * entry_stride_bytes +
                      h * head_stride_bytes,
                  pool + m.src_page * page_stride_bytes + m.src_entry * entry_stride_bytes +
                      h * head_stride_bytes,
                  static_cast<std::size_t>(row_bytes));
    }
  }
}

}  // namespace audiokv::cpu
