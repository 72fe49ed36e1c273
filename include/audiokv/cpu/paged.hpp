// SPDX-License-Identifier: Apache-2.0
/// @file
/// Paged compaction on the CPU: the paged compaction rule of core/paged.hpp as plain loops — the
/// oracle of cuda::paged_compact — into caller-owned, reserved memory (no allocation), and
/// compaction inside each sequence's own pages (hole-filling, no spare pages).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../core/paged.hpp"
#include "../core/row_copy.hpp"
#include "../error.hpp"
#include "../pool/slot_map.hpp"
#include "../span.hpp"
#include "../types/eviction_plan.hpp"

namespace audiokv::cpu {

/// One row copy of a paged compaction: (page, entry) -> (page, entry), every head.
struct paged_row_move {
  std::int32_t src_page = 0;   ///< page id read
  std::int32_t src_entry = 0;  ///< entry (cell) within it
  std::int32_t dst_page = 0;   ///< page id written
  std::int32_t dst_entry = 0;  ///< entry within it
  /// Field-wise equality.
  bool operator==(const paged_row_move& o) const {
    return src_page == o.src_page && src_entry == o.src_entry && dst_page == o.dst_page &&
           dst_entry == o.dst_entry;
  }
};

/// @brief Result of a paged compaction (CSR, like the input page table).
struct paged_compaction {
  std::vector<std::int32_t> new_indices;        ///< [new_indptr.back()]
  std::vector<std::int32_t> new_indptr;         ///< [batch + 1]
  std::vector<std::int32_t> new_last_page_len;  ///< [batch]
  std::vector<std::int32_t> freed_pages;        ///< [freed_indptr.back()], page-list order
  std::vector<std::int32_t> freed_indptr;       ///< [batch + 1]
  std::vector<paged_row_move> moves;            ///< sequence order, then new-cell order
  std::int32_t spare_pages_used = 0;  ///< spare pages the batch needed (all of them, even if short)
  /// False when the spare pages did not suffice; then the table is returned unchanged, nothing
  /// is freed and nothing moves.
  bool ok = true;

  /// Reserves every array for a batch of `batch` sequences holding at most `nnz_pages` pages
  /// of `page_size` cells, so later plans of such batches never allocate.
  void reserve(std::int32_t batch, std::int32_t nnz_pages, std::int32_t page_size) {
    const auto b = static_cast<std::size_t>(batch > 0 ? batch : 0);
    const auto np = static_cast<std::size_t>(nnz_pages > 0 ? nnz_pages : 0);
    new_indices.reserve(np);
    new_indptr.reserve(b + 1);
    new_last_page_len.reserve(b);
    freed_pages.reserve(np);
    freed_indptr.reserve(b + 1);
    moves.reserve(np * static_cast<std::size_t>(page_size > 0 ? page_size : 0));
  }
};

/// @brief Working memory of plan_paged_compaction, reserved by the caller once.
struct paged_compaction_workspace {
  std::vector<std::int32_t> src_of;       ///< [cells of one sequence] new cell -> old cell
  std::vector<std::int32_t> reuse;        ///< [pages of one sequence] aligned source page or -1
  std::vector<std::int32_t> rank;         ///< [pages] copy-page rank or -1
  std::vector<std::uint8_t> reused;       ///< [pages] old page reused in place
  std::vector<std::uint8_t> used;         ///< [pages] old page taken as a copy destination
  std::vector<std::int32_t> evicted;      ///< [pages] fully evicted old pages (positions)
  std::vector<std::int32_t> evicted_ids;  ///< [pages] their page ids

  /// Reserves for sequences of at most `max_pages` pages of `page_size` cells.
  void reserve(std::int32_t max_pages, std::int32_t page_size) {
    const auto np = static_cast<std::size_t>(max_pages > 0 ? max_pages : 0);
    src_of.reserve(np * static_cast<std::size_t>(page_size > 0 ? page_size : 0));
    reuse.reserve(np);
    rank.reserve(np);
    reused.reserve(np);
    used.reserve(np);
    evicted.reserve(np);
    evicted_ids.reserve(np);
  }
};

namespace detail {

/// Empties `out` for a batch of `batch` sequences (capacity kept: no allocation once reserved).
inline void start_paged_output(paged_compaction& out, std::int32_t batch) {
  out.new_indptr.assign(static_cast<std::size_t>(batch) + 1, 0);
  out.freed_indptr.assign(static_cast<std::size_t>(batch) + 1, 0);
  out.new_last_page_len.assign(static_cast<std::size_t>(batch), 0);
  out.new_indices.clear();
  out.freed_pages.clear();
  out.moves.clear();
  out.spare_pages_used = 0;
  out.ok = true;
}

/// Sequence b keeps the first ceil(n_after / P) of its `np` pages and frees the rest (compaction
/// inside its own pages); appends both to `out` and closes b's rows of the CSR outputs.
inline void keep_first_pages(paged_compaction& out, std::int32_t b, const std::int32_t* pages,
                             std::int32_t np, std::int32_t n_after, std::int32_t page_size) {
  const std::int32_t new_np = core::pages_for(n_after, page_size);
  for (std::int32_t p = 0; p < new_np; ++p) out.new_indices.push_back(pages[p]);
  for (std::int32_t p = new_np; p < np; ++p) out.freed_pages.push_back(pages[p]);
  out.new_indptr[b + 1] = out.new_indptr[b] + new_np;
  out.freed_indptr[b + 1] = static_cast<std::int32_t>(out.freed_pages.size());
  out.new_last_page_len[b] = core::last_page_len_for(n_after, page_size);
}

/// Checks the CSR table of a batch before anything is written: page_size >= 1, batch >= 0,
/// indptr from 0 and non-decreasing, last_page_len in [1, page_size] for non-empty sequences,
/// and indptr[batch] x page_size <= core::max_table_cells.
inline void validate_page_table(const char* where, const std::int32_t* indices,
                                const std::int32_t* indptr, const std::int32_t* last_page_len,
                                std::int32_t batch, std::int32_t page_size) {
  AUDIOKV_REQUIRE(page_size >= 1, where, "page_size", page_size, "must be >= 1");
  AUDIOKV_REQUIRE(batch >= 0, where, "batch", batch, "must be >= 0");
  if (batch == 0) return;
  AUDIOKV_REQUIRE(indptr != nullptr && last_page_len != nullptr, where,
                  indptr == nullptr ? "indptr" : "last_page_len", "nullptr",
                  "must hold the batch's page table");
  AUDIOKV_REQUIRE(indptr[0] == 0, where, "indptr[0]", indptr[0], "must be 0");
  for (std::int32_t b = 0; b < batch; ++b) {
    // In 64 bits: indptr[b + 1] may be any int32 until it is checked here.
    const std::int64_t np = std::int64_t{indptr[b + 1]} - indptr[b];
    AUDIOKV_REQUIRE(np >= 0, where, ::audiokv::detail::indexed("indptr", b + 1), indptr[b + 1],
                    "must be >= indptr[b]");
    AUDIOKV_REQUIRE(np == 0 || (last_page_len[b] >= 1 && last_page_len[b] <= page_size), where,
                    ::audiokv::detail::indexed("last_page_len", b), last_page_len[b],
                    "must be in [1, page_size] for a non-empty sequence");
  }
  AUDIOKV_REQUIRE(indptr[batch] == 0 || indices != nullptr, where, "indices", "nullptr",
                  "must hold indptr[batch] page ids");
  // Every cell index and keep-mask offset of the table then fits in int32 (core/paged.hpp).
  AUDIOKV_REQUIRE(core::table_cells_fit(indptr[batch], page_size), where,
                  ::audiokv::detail::indexed("indptr", batch), indptr[batch],
                  ::audiokv::detail::describe("x page_size (", page_size,
                                              ") must be <= ", core::max_table_cells,
                                              " cells (core::max_table_cells)")
                      .c_str());
}

/// out := the input table unchanged (nothing freed, nothing moved).
inline void unchanged_table(const std::int32_t* indices, const std::int32_t* indptr,
                            const std::int32_t* last_page_len, std::int32_t batch,
                            paged_compaction& out) {
  out.new_indptr.assign(indptr, indptr + batch + 1);
  out.new_indices.assign(indices, indices + indptr[batch]);
  out.new_last_page_len.assign(last_page_len, last_page_len + batch);
  out.freed_pages.clear();
  out.freed_indptr.assign(static_cast<std::size_t>(batch) + 1, 0);
  out.moves.clear();
}

}  // namespace detail

/// @brief Applies the rule of core/paged.hpp to a batch, into caller-owned memory.
/// @param indices        [indptr[batch]] page ids
/// @param indptr         [batch + 1]
/// @param last_page_len  [batch]
/// @param keep           [indptr[batch] * page_size] 1 = keep (layout of core/paged.hpp)
/// @param spare_pages    [num_spare] free page ids the rule may write copy pages into
/// @param out            the result; reserved with out.reserve(batch, nnz_pages, page_size) it
///                       does not allocate
/// @param ws             scratch; reserved with ws.reserve(max pages of a sequence, page_size)
///                       it does not allocate
/// @throws audiokv::error naming "page_size", "batch", "indptr[b]" (also when indptr[batch] x
///         page_size exceeds core::max_table_cells), "last_page_len[b]" or "num_spare"; `out` is
///         then unchanged.
inline void plan_paged_compaction(const std::int32_t* indices, const std::int32_t* indptr,
                                  const std::int32_t* last_page_len, std::int32_t batch,
                                  std::int32_t page_size, const std::uint8_t* keep,
                                  const std::int32_t* spare_pages, std::int32_t num_spare,
                                  paged_compaction& out, paged_compaction_workspace& ws) {
  const char* where = "cpu::plan_paged_compaction";
  detail::validate_page_table(where, indices, indptr, last_page_len, batch, page_size);
  AUDIOKV_REQUIRE(num_spare >= 0 && (num_spare == 0 || spare_pages != nullptr), where, "num_spare",
                  num_spare, "must be >= 0, with spare_pages holding that many ids");
  detail::start_paged_output(out, batch);
  std::int32_t spare_offset = 0;
  for (std::int32_t b = 0; b < batch; ++b) {
    const std::int32_t p0 = indptr[b];
    const std::int32_t np = indptr[b + 1] - p0;
    const std::int32_t n = core::sequence_cells(np, last_page_len[b], page_size);
    const std::uint8_t* k = keep + static_cast<std::int64_t>(p0) * page_size;
    ws.src_of.clear();
    for (std::int32_t c = 0; c < n; ++c)
      if (k[c]) ws.src_of.push_back(c);
    const auto n_kept = static_cast<std::int32_t>(ws.src_of.size());
    const std::int32_t new_np = core::pages_for(n_kept, page_size);
    ws.reuse.assign(static_cast<std::size_t>(new_np), -1);
    ws.rank.assign(static_cast<std::size_t>(new_np), -1);
    ws.reused.assign(static_cast<std::size_t>(np), 0);
    ws.used.assign(static_cast<std::size_t>(np), 0);
    std::int32_t copies = 0;
    for (std::int32_t s = 0; s < new_np; ++s) {
      ws.reuse[s] = core::aligned_source_page(ws.src_of.data(), n_kept, page_size, s);
      if (ws.reuse[s] >= 0) {
        ws.reused[ws.reuse[s]] = 1;
      } else {
        ws.rank[s] = copies++;
      }
    }
    ws.evicted.clear();
    ws.evicted_ids.clear();
    for (std::int32_t p = 0; p < np; ++p) {
      const std::int32_t len = p == np - 1 ? last_page_len[b] : page_size;
      if (!core::page_has_kept(k + p * page_size, len)) {
        ws.evicted.push_back(p);
        ws.evicted_ids.push_back(indices[p0 + p]);
      }
    }
    const auto num_evicted = static_cast<std::int32_t>(ws.evicted.size());
    for (std::int32_t r = 0; r < copies && r < num_evicted; ++r) ws.used[ws.evicted[r]] = 1;
    out.spare_pages_used += core::spare_pages_needed(copies, num_evicted);
    out.new_indptr[b + 1] = out.new_indptr[b] + new_np;
    out.new_last_page_len[b] = core::last_page_len_for(n_kept, page_size);
    for (std::int32_t s = 0; s < new_np; ++s) {
      if (ws.reuse[s] >= 0) {
        out.new_indices.push_back(indices[p0 + ws.reuse[s]]);
        continue;
      }
      const bool spare = ws.rank[s] >= num_evicted;
      const std::int32_t dst = spare && spare_offset + ws.rank[s] - num_evicted >= num_spare
                                   ? -1
                                   : core::copy_destination(ws.rank[s], ws.evicted_ids.data(),
                                                            num_evicted, spare_pages, spare_offset);
      out.new_indices.push_back(dst);
      for (std::int32_t e = 0; e < core::page_fill(n_kept, page_size, s); ++e) {
        const std::int32_t c = ws.src_of[s * page_size + e];
        out.moves.push_back({indices[p0 + c / page_size], c % page_size, dst, e});
      }
    }
    spare_offset += core::spare_pages_needed(copies, num_evicted);
    for (std::int32_t p = 0; p < np; ++p)
      if (!ws.reused[p] && !ws.used[p]) out.freed_pages.push_back(indices[p0 + p]);
    out.freed_indptr[b + 1] = static_cast<std::int32_t>(out.freed_pages.size());
    AUDIOKV_ASSERT(out.freed_indptr[b + 1] - out.freed_indptr[b] ==
                   core::pages_freed(np, new_np, copies, num_evicted));
  }
  if (out.spare_pages_used > num_spare) {  // rule 4: all or nothing
    detail::unchanged_table(indices, indptr, last_page_len, batch, out);
    out.ok = false;
  }
}

/// @brief The allocating form of plan_paged_compaction (host reference and tests).
inline paged_compaction plan_paged_compaction(const std::int32_t* indices,
                                              const std::int32_t* indptr,
                                              const std::int32_t* last_page_len, std::int32_t batch,
                                              std::int32_t page_size, const std::uint8_t* keep,
                                              const std::int32_t* spare_pages,
                                              std::int32_t num_spare) {
  paged_compaction out;
  paged_compaction_workspace ws;
  plan_paged_compaction(indices, indptr, last_page_len, batch, page_size, keep, spare_pages,
                        num_spare, out, ws);
  return out;
}

/// @brief Compaction of each sequence inside its own pages: no spare page, no page changes
/// owner. Sequence b's slots are its page list read in order (slot s = entry s % P of page
/// indices[indptr[b] + s / P]), and plans[b] (a hole_fill_plan over those slots, from the
/// sequence's slot_map) says which rows move where. The sequence keeps its first
/// ceil(n_after / P) pages in order and frees the rest (the trailing pages, page-list order).
/// Moves <= evicted cells per sequence, all independent (apply_paged_moves, or in parallel).
/// @param plans [batch] plans[b].n_before must equal sequence b's cells; a plan with
///              n_after == n_before and no moves leaves the sequence as it is.
/// @param out   reserved with out.reserve(batch, nnz_pages, page_size) it does not allocate.
/// @throws audiokv::error naming the table's fields, "plans.size()" or "plans[b].n_before";
///         `out` is then unchanged.
inline void plan_paged_in_place(const std::int32_t* indices, const std::int32_t* indptr,
                                const std::int32_t* last_page_len, std::int32_t batch,
                                std::int32_t page_size, span<const hole_fill_plan> plans,
                                paged_compaction& out) {
  const char* where = "cpu::plan_paged_in_place";
  detail::validate_page_table(where, indices, indptr, last_page_len, batch, page_size);
  AUDIOKV_REQUIRE(plans.size() == static_cast<std::size_t>(batch), where, "plans.size()",
                  plans.size(), "must equal batch");
  for (std::int32_t b = 0; b < batch; ++b) {
    const std::int32_t n =
        core::sequence_cells(indptr[b + 1] - indptr[b], last_page_len[b], page_size);
    AUDIOKV_REQUIRE(
        plans[b].n_before == n, where, ::audiokv::detail::indexed("plans", b) + ".n_before",
        plans[b].n_before,
        ::audiokv::detail::describe("must equal sequence ", b, "'s cells (", n, ")").c_str());
    ::audiokv::pool::detail::validate_hole_fill(where, "plans", b, plans[b], n);
  }
  detail::start_paged_output(out, batch);
  for (std::int32_t b = 0; b < batch; ++b) {
    const std::int32_t* pages = indices + indptr[b];
    const std::int32_t np = indptr[b + 1] - indptr[b];
    const hole_fill_plan& h = plans[b];
    for (std::size_t m = 0; m < h.src.size(); ++m)
      out.moves.push_back({pages[h.src[m] / page_size], h.src[m] % page_size,
                           pages[h.dst[m] / page_size], h.dst[m] % page_size});
    detail::keep_first_pages(out, b, pages, np, h.n_after, page_size);
  }
}

/// @brief Stable compaction of each sequence inside its own pages: time order kept in memory,
/// no spare page, no page changes owner. Sequence b's slots are its page list read in order;
/// plans[b] (the cache's eviction_plan over those cells) moves every kept cell i to slot
/// move_to[i] <= i. The sequence keeps its first ceil(n_kv_after / P) pages and frees the rest.
/// Moves = the kept cells after the first hole; they are listed in ascending source order and
/// must run in that order (a forward in-place copy: each destination is at or before its source
/// and every earlier source has already moved), as apply_paged_moves does — not in parallel.
/// @param plans [batch] plans[b].n_kv_before must equal sequence b's cells.
/// @param out   reserved with out.reserve(batch, nnz_pages, page_size) it does not allocate.
/// @throws audiokv::error naming the table's fields, "plans.size()", "plans[b].n_kv_before" or
///         "plans[b].move_to[i]"; `out` is then unchanged.
inline void plan_paged_in_place(const std::int32_t* indices, const std::int32_t* indptr,
                                const std::int32_t* last_page_len, std::int32_t batch,
                                std::int32_t page_size, span<const eviction_plan> plans,
                                paged_compaction& out) {
  const char* where = "cpu::plan_paged_in_place";
  detail::validate_page_table(where, indices, indptr, last_page_len, batch, page_size);
  AUDIOKV_REQUIRE(plans.size() == static_cast<std::size_t>(batch), where, "plans.size()",
                  plans.size(), "must equal batch");
  for (std::int32_t b = 0; b < batch; ++b) {
    const std::int32_t n =
        core::sequence_cells(indptr[b + 1] - indptr[b], last_page_len[b], page_size);
    const eviction_plan& p = plans[b];
    AUDIOKV_REQUIRE(p.n_kv_before == n && static_cast<std::int32_t>(p.move_to.size()) == n, where,
                    ::audiokv::detail::indexed("plans", b) + ".n_kv_before", p.n_kv_before,
                    ::audiokv::detail::describe("must equal sequence ", b, "'s cells (", n,
                                                ") and move_to.size()")
                        .c_str());
    std::int32_t kept = 0;  // the stable rule, with the error's name built only to throw
    for (std::int32_t i = 0; i < n; ++i) {
      const std::int32_t to = p.move_to[i];
      AUDIOKV_REQUIRE(to == core::evicted_slot || to == kept, where,
                      ::audiokv::detail::indexed(
                          (::audiokv::detail::indexed("plans", b) + ".move_to").c_str(), i),
                      to, "must be -1 or the number of kept cells before it");
      if (to != core::evicted_slot) ++kept;
    }
    AUDIOKV_REQUIRE(p.n_kv_after == kept, where,
                    ::audiokv::detail::indexed("plans", b) + ".n_kv_after", p.n_kv_after,
                    ::audiokv::detail::describe("must equal the kept cells (", kept, ")").c_str());
  }
  detail::start_paged_output(out, batch);
  for (std::int32_t b = 0; b < batch; ++b) {
    const std::int32_t* pages = indices + indptr[b];
    const std::int32_t np = indptr[b + 1] - indptr[b];
    const eviction_plan& p = plans[b];
    for (std::int32_t i = 0; i < p.n_kv_before; ++i) {
      const std::int32_t to = p.move_to[i];
      if (to == core::evicted_slot || to == i) continue;
      out.moves.push_back(
          {pages[i / page_size], i % page_size, pages[to / page_size], to % page_size});
    }
    detail::keep_first_pages(out, b, pages, np, p.n_kv_after, page_size);
  }
}

/// @brief Executes the moves on one paged K or V pool, byte for byte, every head, in list order
/// (core::copy_row per row). Strides are in bytes; a row is row_bytes long. Never allocates.
inline void apply_paged_moves(unsigned char* pool, std::int64_t page_stride_bytes,
                              std::int64_t entry_stride_bytes, std::int64_t head_stride_bytes,
                              std::int32_t num_heads, std::int64_t row_bytes,
                              span<const paged_row_move> moves) {
  for (const paged_row_move& m : moves) {
    for (std::int32_t h = 0; h < num_heads; ++h) {
      core::copy_row(pool + m.dst_page * page_stride_bytes + m.dst_entry * entry_stride_bytes +
                         h * head_stride_bytes,
                     pool + m.src_page * page_stride_bytes + m.src_entry * entry_stride_bytes +
                         h * head_stride_bytes,
                     row_bytes);
    }
  }
}

}  // namespace audiokv::cpu
