// SPDX-License-Identifier: Apache-2.0
/// @file
/// Compile-time composition of smoothing stages, applied left to right, on the host or, when
/// every stage is a cell stage, in a CUDA kernel (cuda/launch/pipeline.cuh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "../../config.hpp"
#include "cell_stage.hpp"
#include "local_rank_stage.hpp"
#include "median_stage.hpp"
#include "speaker_norm_stage.hpp"
#include "stage_context.hpp"
#include "stage_traits.hpp"
#include "trend_stage.hpp"

namespace audiokv::policy::stages {

namespace detail {

/// Stage I of a pipeline (its own base class, so equal stage types at two indices stay apart).
template <std::size_t I, class S>
struct stage_slot {
  S value{};
};

template <class Indices, class... Stages>
struct stage_storage;

/// The stages, by value; trivially copyable when every stage is (a kernel argument then),
/// unlike std::tuple, and readable from device code.
template <std::size_t... I, class... Stages>
struct stage_storage<std::index_sequence<I...>, Stages...> : stage_slot<I, Stages>... {
  stage_storage() = default;
  explicit stage_storage(std::in_place_t, Stages... stages)
      : stage_slot<I, Stages>{std::move(stages)}... {}
};

template <std::size_t I, class S>
AUDIOKV_HOST_DEVICE S& stage_at(stage_slot<I, S>& slot) {
  return slot.value;
}
template <std::size_t I, class S>
AUDIOKV_HOST_DEVICE const S& stage_at(const stage_slot<I, S>& slot) {
  return slot.value;
}

/// True when S has the multi-row form `apply_rows(const float* const* in, float* const* out,
/// const std::int32_t* n, std::int32_t rows) const` (e.g. trend_stage).
template <class S, class = void>
struct has_rows_apply : std::false_type {};

template <class S>
struct has_rows_apply<S, std::void_t<decltype(std::declval<const S&>().apply_rows(
                             std::declval<const float* const*>(), std::declval<float* const*>(),
                             std::declval<const std::int32_t*>(), std::int32_t{}))>>
    : std::bool_constant<std::is_trivially_copyable<S>::value> {};

}  // namespace detail

/// @brief Applies Stages... in order, ping-ponging between `out` and one scratch array.
///
/// A row stage runs through its apply(); a cell stage without one runs cell by cell. When
/// every stage is a cell stage (runs_on_device), cuda::smoothing_pipeline_rows runs the same
/// object in a kernel, and apply_per_cell() is its host twin.
template <class... Stages>
class smoothing_pipeline {
  static_assert((is_smoothing_stage_v<Stages> && ...),
                "audiokv::smoothing_pipeline: every stage must provide "
                "`void apply(const float* in, float* out, std::int32_t n, const stage_context&) "
                "const` and be copyable, or be a trivially copyable cell stage with "
                "`AUDIOKV_HOST_DEVICE float operator()(const cell_neighbourhood&, const "
                "stage_context&) const` (see policy/stages/stage_traits.hpp).");

 public:
  static constexpr std::size_t num_stages = sizeof...(Stages);  ///< number of stages
  /// True when every stage is a cell stage: the pipeline can run in a CUDA kernel.
  static constexpr bool runs_on_device = (is_cell_stage_v<Stages> && ...);

  smoothing_pipeline() = default;
  /// A pipeline of the given stage objects (their parameters), in order.
  template <std::size_t N = sizeof...(Stages), std::enable_if_t<(N > 0), int> = 0>
  explicit smoothing_pipeline(Stages... stages) : stages_(std::in_place, std::move(stages)...) {}

  /// The I-th stage, to adjust its parameters.
  template <std::size_t I>
  AUDIOKV_HOST_DEVICE auto& stage() {
    return detail::stage_at<I>(stages_);
  }
  /// The I-th stage, read-only.
  template <std::size_t I>
  AUDIOKV_HOST_DEVICE const auto& stage() const {
    return detail::stage_at<I>(stages_);
  }

  /// Pipeline as a stage. Needs a scratch array of n floats; uses `out` as the other one.
  void apply(const float* in, float* out, float* scratch, std::int32_t n,
             const stage_context& ctx) const {
    run<false>(in, out, scratch, n, ctx);
  }

  /// Rows apply_rows() takes through a stage together (the rest in further groups).
  static constexpr std::int32_t max_rows = core::trend_lanes;

  /// @brief apply() of `rows` rows, row r with its own pipeline and context: out[r] is
  /// pipelines[r]->apply(in[r], out[r], scratch[r], n[r], ctx[r])'s, bit for bit.
  ///
  /// Runs stage by stage over a group of up to max_rows rows; a stage with a multi-row form
  /// (`apply_rows`, e.g. trend_stage, whose one-row recurrence is latency-bound) runs it over
  /// consecutive rows whose stage objects are byte-identical (the same parameters), the other
  /// stages row by row. Host only; allocates nothing. Rows must not share any buffer.
  static void apply_rows(const smoothing_pipeline* const* pipelines, const float* const* in,
                         float* const* out, float* const* scratch, const std::int32_t* n,
                         const stage_context* ctx, std::int32_t rows) {
    for (std::int32_t first = 0; first < rows; first += max_rows) {
      const std::int32_t count = rows - first < max_rows ? rows - first : max_rows;
      run_rows(pipelines + first, in + first, out + first, scratch + first, n + first, ctx + first,
               count);
    }
  }

  /// apply() with every stage evaluated cell by cell through its operator() (also those with a
  /// faster row form): the host reference of the kernel. Only when runs_on_device.
  void apply_per_cell(const float* in, float* out, float* scratch, std::int32_t n,
                      const stage_context& ctx) const {
    static_assert(runs_on_device,
                  "audiokv::smoothing_pipeline::apply_per_cell: every stage must "
                  "be a cell stage (policy/stages/cell_stage.hpp)");
    run<true>(in, out, scratch, n, ctx);
  }

 private:
  template <bool PerCell>
  void run(const float* in, float* out, float* scratch, std::int32_t n,
           const stage_context& ctx) const {
    if constexpr (num_stages == 0) {
      for (std::int32_t j = 0; j < n; ++j) out[j] = in[j];
    } else {
      // Ping-pong so that the last stage writes `out`: with an odd count the first writes out.
      float* buffers[2] = {num_stages % 2 == 1 ? out : scratch,
                           num_stages % 2 == 1 ? scratch : out};
      apply_from<0, PerCell>(in, buffers, n, ctx);
    }
  }

  template <std::size_t I, bool PerCell>
  void apply_from(const float* in, float* const (&buffers)[2], std::int32_t n,
                  const stage_context& ctx) const {
    float* out = buffers[I % 2];
    const auto& s = stage<I>();
    using stage_type = std::decay_t<decltype(s)>;
    if constexpr (has_row_apply<stage_type>::value && !PerCell) {
      s.apply(in, out, n, ctx);
    } else {
      detail::apply_cells(s, in, out, n, ctx);
    }
    if constexpr (I + 1 < num_stages) apply_from<I + 1, PerCell>(out, buffers, n, ctx);
  }

  static void run_rows(const smoothing_pipeline* const* pipelines, const float* const* in,
                       float* const* out, float* const* scratch, const std::int32_t* n,
                       const stage_context* ctx, std::int32_t count) {
    if constexpr (num_stages == 0) {
      for (std::int32_t r = 0; r < count; ++r)
        pipelines[r]->apply(in[r], out[r], scratch[r], n[r], ctx[r]);
    } else {
      // Each row's ping-pong as in run(): stage I writes buffers[I % 2], the last one `out`.
      float* buffers[2][max_rows];
      for (std::int32_t r = 0; r < count; ++r) {
        buffers[0][r] = num_stages % 2 == 1 ? out[r] : scratch[r];
        buffers[1][r] = num_stages % 2 == 1 ? scratch[r] : out[r];
      }
      rows_from<0>(pipelines, in, buffers, n, ctx, count);
    }
  }

  template <std::size_t I>
  static void rows_from(const smoothing_pipeline* const* pipelines, const float* const* in,
                        float* const (&buffers)[2][max_rows], const std::int32_t* n,
                        const stage_context* ctx, std::int32_t count) {
    float* const* out = buffers[I % 2];
    using stage_type = std::decay_t<decltype(pipelines[0]->template stage<I>())>;
    if constexpr (detail::has_rows_apply<stage_type>::value) {
      for (std::int32_t r = 0; r < count;) {
        const stage_type& s = pipelines[r]->template stage<I>();
        std::int32_t end = r + 1;
        while (end < count &&
               std::memcmp(&s, &pipelines[end]->template stage<I>(), sizeof(stage_type)) == 0) {
          ++end;
        }
        s.apply_rows(in + r, out + r, n + r, end - r);
        r = end;
      }
    } else {
      for (std::int32_t r = 0; r < count; ++r) {
        const auto& s = pipelines[r]->template stage<I>();
        if constexpr (has_row_apply<stage_type>::value) {
          s.apply(in[r], out[r], n[r], ctx[r]);
        } else {
          detail::apply_cells(s, in[r], out[r], n[r], ctx[r]);
        }
      }
    }
    if constexpr (I + 1 < num_stages) {
      const float* next_in[max_rows];
      for (std::int32_t r = 0; r < count; ++r) next_in[r] = out[r];
      rows_from<I + 1>(pipelines, next_in, buffers, n, ctx, count);
    }
  }

  detail::stage_storage<std::index_sequence_for<Stages...>, Stages...> stages_;
};

/// The pipeline the specification describes: median(5) -> trend -> speaker normalisation, with
/// the within-block rank for temporal continuity before the last (block 0, i.e. off, unless
/// configured). Host only: trend_stage is a row stage.
using default_pipeline =
    smoothing_pipeline<median_stage<5>, trend_stage, local_rank_stage, speaker_norm_stage>;

}  // namespace audiokv::policy::stages

namespace audiokv {
using policy::stages::default_pipeline;
using policy::stages::smoothing_pipeline;
}  // namespace audiokv
