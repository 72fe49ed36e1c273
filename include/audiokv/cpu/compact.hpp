// SPDX-License-Identifier: Apache-2.0
/// @file
/// Compaction on the CPU: applies an eviction plan's move map to K or V in place. Kept rows are
/// copied byte for byte. Two modes: stable (an eviction_plan: kept rows keep their time order,
/// every row after the first hole shifts) and hole-filling (a hole_fill_plan from slot_map: the
/// rows beyond the new end fill the holes, moves <= evicted cells; core/hole_filling.hpp).
#pragma once

#include <cstdint>

#include "../core/compaction.hpp"
#include "../core/kv_view.hpp"
#include "../core/row_copy.hpp"
#include "../error.hpp"
#include "../pool/slot_map.hpp"
#include "../types/eviction_plan.hpp"
#include "../types/move_map.hpp"

namespace audiokv::cpu {

namespace detail {

template <class T, class Layout>
void validate_compact(const char* where, const kv_view<T, Layout>& kv, const eviction_plan& plan) {
  AUDIOKV_REQUIRE(plan.n_kv_before <= kv.num_cells(), where, "plan.n_kv_before", plan.n_kv_before,
                  "exceeds the view's num_cells");
  AUDIOKV_REQUIRE(static_cast<std::int32_t>(plan.move_to.size()) == plan.n_kv_before, where,
                  "plan.move_to.size()", plan.move_to.size(), "must equal plan.n_kv_before");
  AUDIOKV_REQUIRE(kv.num_cells() == 0 || kv.data_handle() != nullptr, where, "kv.data_handle()",
                  "nullptr", "must point to the tensor");
  // A stable move map: no write can leave [0, i] — checked before any row moves.
  ::audiokv::types::detail::require_stable_move_map(where, "plan.move_to", plan.move_to.data(),
                                                    plan.n_kv_before);
}

/// Hole-filling moves (checks of ::audiokv::pool::detail::validate_hole_fill) within the view.
template <class T, class Layout>
void validate_hole_fill(const char* where, const kv_view<T, Layout>& kv,
                        const hole_fill_plan& plan) {
  ::audiokv::pool::detail::validate_hole_fill(where, "plan", -1, plan, kv.num_cells());
  AUDIOKV_REQUIRE(kv.num_cells() == 0 || kv.data_handle() != nullptr, where, "kv.data_handle()",
                  "nullptr", "must point to the tensor");
}

template <class T, class Layout>
void move_head_row(const kv_view<T, Layout>& kv, std::int32_t head, std::int32_t from,
                   std::int32_t to) {
  if (kv.mapping().dim_stride() == 1) {  // a contiguous row: the row copy (to < from)
    core::copy_row(kv.row(to, head), kv.row(from, head),
                   static_cast<std::int64_t>(sizeof(T)) * kv.head_dim());
  } else {
    for (std::int32_t d = 0; d < kv.head_dim(); ++d) kv(to, head, d) = kv(from, head, d);
  }
}

}  // namespace detail

/// @brief Moves the rows of one head by `plan.move_to` (per-head plans, e.g. layout_hnd).
/// @param kv   [num_cells, num_heads, head_dim] view over K or V; only `head` is touched.
/// @pre plan.move_to[i] <= i for kept cells (always true of plans made by this library).
/// Never allocates.
template <class T, class Layout>
void compact(const kv_view<T, Layout>& kv, std::int32_t head, const eviction_plan& plan) {
  detail::validate_compact("cpu::compact", kv, plan);
  AUDIOKV_REQUIRE(head >= 0 && head < kv.num_heads(), "cpu::compact", "head", head,
                  "must be in [0, num_heads)");
  for (std::int32_t i = 0; i < plan.n_kv_before; ++i) {
    const std::int32_t to = plan.move_to[i];
    if (to != core::evicted_slot && to != i) detail::move_head_row(kv, head, i, to);
  }
}

/// @brief Moves the rows of every head by one shared plan (cells shared across heads, as in
/// llama.cpp's [cells, heads, dim] K). Never allocates.
template <class T, class Layout>
void compact_all_heads(const kv_view<T, Layout>& kv, const eviction_plan& plan) {
  detail::validate_compact("cpu::compact_all_heads", kv, plan);
  for (std::int32_t i = 0; i < plan.n_kv_before; ++i) {
    const std::int32_t to = plan.move_to[i];
    if (to == core::evicted_slot || to == i) continue;
    for (std::int32_t h = 0; h < kv.num_heads(); ++h) detail::move_head_row(kv, h, i, to);
  }
}

/// @brief Hole-filling mode for one head: row (plan.src[k], head) -> (plan.dst[k], head).
/// Moves plan.num_moves() rows (<= cells evicted); rows not listed stay. Never allocates.
/// @throws audiokv::error naming the plan field or "head"; nothing moves then.
template <class T, class Layout>
void compact(const kv_view<T, Layout>& kv, std::int32_t head, const hole_fill_plan& plan) {
  detail::validate_hole_fill("cpu::compact", kv, plan);
  AUDIOKV_REQUIRE(head >= 0 && head < kv.num_heads(), "cpu::compact", "head", head,
                  "must be in [0, num_heads)");
  for (std::size_t k = 0; k < plan.src.size(); ++k)
    detail::move_head_row(kv, head, plan.src[k], plan.dst[k]);
}

/// @brief Hole-filling mode for every head by one shared plan. Never allocates.
template <class T, class Layout>
void compact_all_heads(const kv_view<T, Layout>& kv, const hole_fill_plan& plan) {
  detail::validate_hole_fill("cpu::compact_all_heads", kv, plan);
  for (std::size_t k = 0; k < plan.src.size(); ++k)
    for (std::int32_t h = 0; h < kv.num_heads(); ++h)
      detail::move_head_row(kv, h, plan.src[k], plan.dst[k]);
}

}  // namespace audiokv::cpu
