// SPDX-License-Identifier: Apache-2.0
/// @file
/// The smoothing-stage contract. A stage is any copyable type with
///   void apply(const float* in, float* out, std::int32_t n, const stage_context&) const;
/// mapping the time-ordered scores of n cells to n new scores (in != out).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "stage_context.hpp"

namespace audiokv {

template <class S, class = void>
struct is_smoothing_stage : std::false_type {};

template <class S>
struct is_smoothing_stage<S, std::void_t<decltype(std::declval<const S&>().apply(
                                 std::declval<const float*>(), std::declval<float*>(),
                                 std::int32_t{}, std::declval<const stage_context&>()))>>
    : std::is_copy_constructible<S> {};

template <class S>
inline constexpr bool is_smoothing_stage_v = is_smoothing_stage<S>::value;

#if defined(AUDIOKV_HAS_CONCEPTS)
template <class S>
concept smoothing_stage = is_smoothing_stage_v<S>;
#endif

}  // namespace audiokv
