// SPDX-License-Identifier: Apache-2.0
/// @file
/// The smoothing-stage contract. A stage maps the time-ordered scores of n cells to n new
/// scores and is one of:
///  - a row stage: any copyable type with
///      void apply(const float* in, float* out, std::int32_t n, const stage_context&) const;
///    (in != out), run on the host only; for stages whose cells depend on each other in order
///    (trend_stage's recurrence) or on the whole row at once (spectral_lowpass_stage's FFT);
///  - a cell stage (policy/stages/cell_stage.hpp): a trivially copyable functor
///      AUDIOKV_HOST_DEVICE float operator()(const cell_neighbourhood&, const stage_context&)
///      const;
///    that runs on the host and in a CUDA kernel alike. A type may provide both (median_stage:
///    the row form is a faster host path computing the same values).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "cell_stage.hpp"
#include "stage_context.hpp"

namespace audiokv::policy::stages {

template <class S, class = void>
struct has_row_apply : std::false_type {};

template <class S>
struct has_row_apply<S, std::void_t<decltype(std::declval<const S&>().apply(
                            std::declval<const float*>(), std::declval<float*>(), std::int32_t{},
                            std::declval<const stage_context&>()))>> : std::true_type {};

/// True for a row stage or a cell stage that is copyable.
template <class S>
struct is_smoothing_stage
    : std::bool_constant<(has_row_apply<S>::value || is_cell_stage<S>::value) &&
                         std::is_copy_constructible<S>::value> {};

/// is_smoothing_stage<S>::value.
template <class S>
inline constexpr bool is_smoothing_stage_v = is_smoothing_stage<S>::value;

#if defined(AUDIOKV_HAS_CONCEPTS)
template <class S>
concept smoothing_stage = is_smoothing_stage_v<S>;
template <class S>
concept cell_smoothing_stage = is_cell_stage_v<S>;
#endif

}  // namespace audiokv::policy::stages

namespace audiokv {
using policy::stages::has_row_apply;
using policy::stages::is_smoothing_stage;
using policy::stages::is_smoothing_stage_v;
#if AUDIOKV_HAS_CONCEPTS
using policy::stages::cell_smoothing_stage;
using policy::stages::smoothing_stage;
#endif
}  // namespace audiokv
