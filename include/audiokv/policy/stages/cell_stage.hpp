// SPDX-License-Identifier: Apache-2.0
/// @file
/// The per-cell smoothing-stage contract: a stage written as a functor over one cell and its
/// neighbourhood, callable on the host and in a CUDA kernel (the pattern of FlashInfer's
/// attention variants and CUTLASS's epilogues). A type S is a cell stage when it is trivially
/// copyable (a kernel argument) and has
///   AUDIOKV_HOST_DEVICE float operator()(const cell_neighbourhood& cell,
///                                        const stage_context& ctx) const;
/// returning the cell's new score from the previous stage's scores around it. The same object
/// then runs in smoothing_pipeline on the CPU (a loop over the cells) and in
/// cuda::smoothing_pipeline_rows (a thread per cell); an operator() without __device__ fails
/// to compile in the kernel, so nvcc checks a user's stage on the device side.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "../../config.hpp"
#include "stage_context.hpp"

namespace audiokv::policy::stages {

/// @brief What a per-cell stage reads: the previous stage's scores of the whole row (time
/// order, n cells) and the index of the cell it computes. Reads outside [0, n) through at()
/// replicate the nearest end (edge padding).
struct cell_neighbourhood {
  const float* in = nullptr;  ///< [n] previous stage's scores
  std::int32_t n = 0;         ///< cells in the row
  std::int32_t j = 0;         ///< the cell this call computes, 0 <= j < n

  /// The score of cell j itself.
  AUDIOKV_HOST_DEVICE float centre() const { return in[j]; }
  /// The score `offset` cells away from j, with the ends replicated.
  AUDIOKV_HOST_DEVICE float at(std::int32_t offset) const {
    const std::int64_t i = static_cast<std::int64_t>(j) + offset;
    return in[i < 0 ? 0 : (i >= n ? n - 1 : i)];
  }
};

template <class S, class = void>
struct has_cell_operator : std::false_type {};

template <class S>
struct has_cell_operator<
    S, std::void_t<decltype(std::declval<const S&>()(std::declval<const cell_neighbourhood&>(),
                                                     std::declval<const stage_context&>()))>>
    : std::is_convertible<decltype(std::declval<const S&>()(
                              std::declval<const cell_neighbourhood&>(),
                              std::declval<const stage_context&>())),
                          float> {};

/// True when S is a per-cell stage: the operator() above, and trivially copyable so that it can
/// be passed to a kernel by value.
template <class S>
struct is_cell_stage
    : std::bool_constant<has_cell_operator<S>::value && std::is_trivially_copyable<S>::value> {};

/// is_cell_stage<S>::value.
template <class S>
inline constexpr bool is_cell_stage_v = is_cell_stage<S>::value;

namespace detail {

/// One cell of a per-cell stage.
template <class Stage>
AUDIOKV_HOST_DEVICE float eval_cell(const Stage& stage, const float* in, std::int32_t n,
                                    std::int32_t j, const stage_context& ctx) {
  return stage(cell_neighbourhood{in, n, j}, ctx);
}

/// A per-cell stage over a whole row on the host: out[j] = stage(cell j) for j in [0, n).
template <class Stage>
void apply_cells(const Stage& stage, const float* in, float* out, std::int32_t n,
                 const stage_context& ctx) {
  for (std::int32_t j = 0; j < n; ++j) out[j] = eval_cell(stage, in, n, j, ctx);
}

}  // namespace detail

}  // namespace audiokv::policy::stages

namespace audiokv {
using policy::stages::cell_neighbourhood;
using policy::stages::has_cell_operator;
using policy::stages::is_cell_stage;
using policy::stages::is_cell_stage_v;
}  // namespace audiokv
