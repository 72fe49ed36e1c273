// SPDX-License-Identifier: Apache-2.0
/// @file
/// A C++17 stand-in for std::span with a run-time length: the (pointer, length) form of every
/// host entry point that reads a caller's buffer, so the length is checked before any read.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace audiokv {

template <class T>
class span;

namespace detail {

template <class T>
struct is_span : std::false_type {};
template <class T>
struct is_span<span<T>> : std::true_type {};

/// True when `C&` has data() convertible to T* and size(), and C is neither a span nor an
/// array (arrays have their own constructor); an rvalue container binds only to span<const T>.
template <class C, class T, class = void>
struct span_compatible : std::false_type {};
template <class C, class T>
struct span_compatible<
    C, T, std::void_t<decltype(std::declval<C&>().data()), decltype(std::declval<C&>().size())>>
    : std::bool_constant<!is_span<std::remove_cv_t<std::remove_reference_t<C>>>::value &&
                         !std::is_array_v<std::remove_reference_t<C>> &&
                         std::is_convertible_v<decltype(std::declval<C&>().data()), T*> &&
                         (std::is_lvalue_reference_v<C> || std::is_const_v<T>)> {};

}  // namespace detail

/// @brief A non-owning view of `size()` contiguous T. Converts implicitly from any contiguous
/// container with data() and size() (std::vector, std::array, std::string for char, ...), from
/// a C array, and from `span<U>` when `U*` converts to `T*`; (pointer, count) builds one
/// explicitly. Only the length is checked by the entry points that take it; the view never owns or
/// frees.
template <class T>
class span {
 public:
  /// The element type, possibly const.
  using element_type = T;
  /// The element type without const/volatile.
  using value_type = std::remove_cv_t<T>;
  /// Type of size() and of indices.
  using size_type = std::size_t;
  /// Pointer to an element.
  using pointer = T*;
  /// Contiguous iterator (a plain pointer).
  using iterator = T*;

  constexpr span() noexcept = default;
  /// `count` elements from `data` (data may be null only when count == 0).
  constexpr span(T* data, size_type count) noexcept : data_(data), size_(count) {}
  template <std::size_t N>
  /// Views all N elements of a C array.
  constexpr span(T (&array)[N]) noexcept : data_(array), size_(N) {}  // NOLINT: implicit
  /// Views the elements of a contiguous container (data() and size()); a temporary only
  /// when T is const.
  template <class C, std::enable_if_t<detail::span_compatible<C, T>::value, int> = 0>
  constexpr span(C&& container) noexcept(noexcept(container.data()))  // NOLINT: implicit
      : data_(container.data()), size_(static_cast<size_type>(container.size())) {}
  /// Views the same elements as a span of a convertible element type (e.g. T = const U).
  template <class U, std::enable_if_t<!std::is_same_v<U, T> && std::is_convertible_v<U*, T*>,
                                      int> = 0>
  constexpr span(const span<U>& other) noexcept  // NOLINT: implicit
      : data_(other.data()), size_(other.size()) {}

  /// First element (null for an empty default span).
  constexpr T* data() const noexcept { return data_; }
  /// Number of elements.
  constexpr size_type size() const noexcept { return size_; }
  /// True when size() == 0.
  constexpr bool empty() const noexcept { return size_ == 0; }
  /// @pre i < size().
  constexpr T& operator[](size_type i) const noexcept { return data_[i]; }
  /// Iterator to the first element.
  constexpr T* begin() const noexcept { return data_; }
  /// Iterator one past the last element.
  constexpr T* end() const noexcept { return data_ + size_; }

 private:
  T* data_ = nullptr;
  size_type size_ = 0;
};

}  // namespace audiokv
