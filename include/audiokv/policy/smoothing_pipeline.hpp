// SPDX-License-Identifier: Apache-2.0
/// @file
/// Compile-time composition of smoothing stages, applied left to right.
#pragma once

#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "local_rank_stage.hpp"
#include "median_stage.hpp"
#include "speaker_norm_stage.hpp"
#include "stage_context.hpp"
#include "stage_traits.hpp"
#include "trend_stage.hpp"

namespace audiokv {

/// @brief Applies Stages... in order, ping-ponging between `out` and one scratch array.
template <class... Stages>
class smoothing_pipeline {
  static_assert((is_smoothing_stage_v<Stages> && ...),
                "audiokv::smoothing_pipeline: every stage must provide "
                "`void apply(const float* in, float* out, std::int32_t n, const stage_context&) "
                "const` and be copyable (see policy/stage_traits.hpp).");

 public:
  static constexpr std::size_t num_stages = sizeof...(Stages);

  smoothing_pipeline() = default;
  template <std::size_t N = sizeof...(Stages), std::enable_if_t<(N > 0), int> = 0>
  explicit smoothing_pipeline(Stages... stages) : stages_(std::move(stages)...) {}

  /// The I-th stage, to adjust its parameters.
  template <std::size_t I>
  auto& stage() {
    return std::get<I>(stages_);
  }
  template <std::size_t I>
  const auto& stage() const {
    return std::get<I>(stages_);
  }

  /// Pipeline as a stage. Needs a scratch array of n floats; uses `out` as the other one.
  void apply(const float* in, float* out, float* scratch, std::int32_t n,
             const stage_context& ctx) const {
    if constexpr (num_stages == 0) {
      for (std::int32_t j = 0; j < n; ++j) out[j] = in[j];
    } else {
      // Ping-pong so that the last stage writes `out`: with an odd count the first writes out.
      float* buffers[2] = {num_stages % 2 == 1 ? out : scratch,
                           num_stages % 2 == 1 ? scratch : out};
      apply_from<0>(in, buffers, n, ctx);
    }
  }

 private:
  template <std::size_t I>
  void apply_from(const float* in, float* const (&buffers)[2], std::int32_t n,
                  const stage_context& ctx) const {
    float* out = buffers[I % 2];
    std::get<I>(stages_).apply(in, out, n, ctx);
    if constexpr (I + 1 < num_stages) apply_from<I + 1>(out, buffers, n, ctx);
  }

  std::tuple<Stages...> stages_;
};

/// The pipeline the specification describes: median(5) -> trend -> speaker normalisation, with
/// the within-block rank for temporal continuity before the last (block 0, i.e. off, unless
/// configured).
using default_pipeline =
    smoothing_pipeline<median_stage<5>, trend_stage, local_rank_stage, speaker_norm_stage>;

}  // namespace audiokv
