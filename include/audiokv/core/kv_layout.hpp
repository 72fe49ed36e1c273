// SPDX-License-Identifier: Apache-2.0
/// @file
/// Mappings from (cell, head, dim) to an element offset, in mdspan's vocabulary:
///   layout_nhd      [num_cells, num_heads, head_dim]  (FlashInfer kNHD, llama.cpp K)
///   layout_hnd      [num_heads, num_cells, head_dim]  (FlashInfer kHND, HF transformers)
///   layout_strided  any three element strides (llama.cpp's transposed V, padded rows)
#pragma once

#include <cstdint>

#include "../config.hpp"

namespace audiokv::core {

/// Extents shared by every layout.
struct kv_extents {
  /// Cells (time steps) in the tensor.
  std::int32_t num_cells = 0;
  /// KV heads.
  std::int32_t num_heads = 0;
  /// Elements per (cell, head) row.
  std::int32_t head_dim = 0;
};

/// [num_cells, num_heads, head_dim], rows of one cell are contiguous across heads.
struct layout_nhd {
  /// Tensor extents.
  kv_extents extents;
  /// Element offset of (cell, head, dim).
  AUDIOKV_HOST_DEVICE constexpr std::int64_t operator()(std::int32_t cell, std::int32_t head,
                                                        std::int32_t dim) const {
    return (static_cast<std::int64_t>(cell) * extents.num_heads + head) * extents.head_dim + dim;
  }
  /// Elements between the same (head, dim) of consecutive cells.
  AUDIOKV_HOST_DEVICE constexpr std::int64_t cell_stride() const {
    return static_cast<std::int64_t>(extents.num_heads) * extents.head_dim;
  }
  /// Elements between consecutive dims of one row (1: rows are contiguous).
  AUDIOKV_HOST_DEVICE constexpr std::int64_t dim_stride() const { return 1; }
  /// Elements the tensor spans: num_cells * num_heads * head_dim.
  AUDIOKV_HOST_DEVICE constexpr std::int64_t required_span_size() const {
    return static_cast<std::int64_t>(extents.num_cells) * extents.num_heads * extents.head_dim;
  }
};

/// [num_heads, num_cells, head_dim], each head's cells are contiguous.
struct layout_hnd {
  /// Tensor extents.
  kv_extents extents;
  /// Element offset of (cell, head, dim).
  AUDIOKV_HOST_DEVICE constexpr std::int64_t operator()(std::int32_t cell, std::int32_t head,
                                                        std::int32_t dim) const {
    return (static_cast<std::int64_t>(head) * extents.num_cells + cell) * extents.head_dim + dim;
  }
  /// Elements between the same (head, dim) of consecutive cells.
  AUDIOKV_HOST_DEVICE constexpr std::int64_t cell_stride() const { return extents.head_dim; }
  /// Elements between consecutive dims of one row (1: rows are contiguous).
  AUDIOKV_HOST_DEVICE constexpr std::int64_t dim_stride() const { return 1; }
  /// Elements the tensor spans: num_cells * num_heads * head_dim.
  AUDIOKV_HOST_DEVICE constexpr std::int64_t required_span_size() const {
    return static_cast<std::int64_t>(extents.num_cells) * extents.num_heads * extents.head_dim;
  }
};

/// Arbitrary element strides; covers padded rows and transposed (dim-major) V.
struct layout_strided {
  /// Tensor extents.
  kv_extents extents;
  /// Elements between consecutive cells.
  std::int64_t cell_stride_elems = 0;
  /// Elements between consecutive heads.
  std::int64_t head_stride_elems = 0;
  /// Elements between consecutive dims (1 for rows, num_cells for transposed V).
  std::int64_t dim_stride_elems = 1;
  /// Element offset of (cell, head, dim).
  AUDIOKV_HOST_DEVICE constexpr std::int64_t operator()(std::int32_t cell, std::int32_t head,
                                                        std::int32_t dim) const {
    return cell * cell_stride_elems + head * head_stride_elems + dim * dim_stride_elems;
  }
  /// Elements between the same (head, dim) of consecutive cells.
  AUDIOKV_HOST_DEVICE constexpr std::int64_t cell_stride() const { return cell_stride_elems; }
  /// Elements between consecutive dims of one row.
  AUDIOKV_HOST_DEVICE constexpr std::int64_t dim_stride() const { return dim_stride_elems; }
  /// One past the largest offset reached (strides are non-negative).
  AUDIOKV_HOST_DEVICE constexpr std::int64_t required_span_size() const {
    if (extents.num_cells == 0 || extents.num_heads == 0 || extents.head_dim == 0) return 0;
    return (extents.num_cells - 1) * cell_stride_elems +
           (extents.num_heads - 1) * head_stride_elems + (extents.head_dim - 1) * dim_stride_elems +
           1;
  }
};

}  // namespace audiokv::core

namespace audiokv {
using core::kv_extents;
using core::layout_hnd;
using core::layout_nhd;
using core::layout_strided;
}  // namespace audiokv
