// SPDX-License-Identifier: Apache-2.0
/// @file
/// Non-owning view of one K or V tensor of one layer: element (cell, head, dim) through a layout.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "kv_layout.hpp"

namespace audiokv::core {

/// @brief Non-owning (cell, head, dim) view; T may be const for a read-only view.
/// @tparam T element type (float, half, bf16, int8, ...).
/// @tparam Layout layout_nhd, layout_hnd or layout_strided.
template <class T, class Layout = layout_nhd>
class kv_view {
 public:
  /// The element type, possibly const.
  using element_type = T;
  /// The layout mapping (cell, head, dim) to offsets.
  using layout_type = Layout;

  /// Views `data` through `layout`; never owns, allocates or checks.
  AUDIOKV_HOST_DEVICE constexpr kv_view(T* data, Layout layout) noexcept
      : data_(data), layout_(layout) {}

  /// Read-only view of a mutable one.
  template <class U, class = std::enable_if_t<std::is_same_v<const U, T>>>
  AUDIOKV_HOST_DEVICE constexpr kv_view(const kv_view<U, Layout>& other) noexcept
      : data_(other.data_handle()), layout_(other.mapping()) {}

  /// Element (cell, head, dim); unchecked.
  AUDIOKV_HOST_DEVICE constexpr T& operator()(std::int32_t cell, std::int32_t head,
                                              std::int32_t dim) const {
    return data_[layout_(cell, head, dim)];
  }
  /// First element of the (cell, head) row; the row's elements are dim_stride() apart.
  AUDIOKV_HOST_DEVICE constexpr T* row(std::int32_t cell, std::int32_t head) const {
    return data_ + layout_(cell, head, 0);
  }
  /// Cells in the view.
  AUDIOKV_HOST_DEVICE constexpr std::int32_t num_cells() const { return layout_.extents.num_cells; }
  /// KV heads in the view.
  AUDIOKV_HOST_DEVICE constexpr std::int32_t num_heads() const { return layout_.extents.num_heads; }
  /// Elements per row.
  AUDIOKV_HOST_DEVICE constexpr std::int32_t head_dim() const { return layout_.extents.head_dim; }
  /// Base pointer of the tensor.
  AUDIOKV_HOST_DEVICE constexpr T* data_handle() const { return data_; }
  /// The layout.
  AUDIOKV_HOST_DEVICE constexpr const Layout& mapping() const { return layout_; }

 private:
  T* data_;
  Layout layout_;
};

}  // namespace audiokv::core

namespace audiokv {
using core::kv_view;
}  // namespace audiokv
