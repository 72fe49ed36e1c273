// SPDX-License-Identifier: Apache-2.0
/// @file
/// Speaker normalisation as a stage: each score is divided by its own speaker's running baseline
/// (mean importance), so a speaker who draws more attention overall cannot crowd out a quieter one.
/// A scale normalisation (not a z-score) keeps scores non-negative for the VAD weight and
/// the entropy.
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "../../core/math.hpp"
#include "cell_stage.hpp"
#include "stage_context.hpp"

namespace audiokv::policy::stages {

/// @brief out[j] = in[j] / max(baseline[speaker[j]], floor).
struct speaker_norm_stage {
  float floor = 1e-9f;  ///< a silent speaker's baseline; avoids division by zero

  /// A cell stage: the cell's score over its speaker's baseline (identity without baselines).
  AUDIOKV_HOST_DEVICE float operator()(const cell_neighbourhood& cell,
                                       const stage_context& ctx) const {
    return normalise(cell.centre(), cell.j, ctx);
  }

  /// `score` of cell j over its speaker's baseline (unchanged without baselines).
  AUDIOKV_HOST_DEVICE float normalise(float score, std::int32_t j, const stage_context& ctx) const {
    if (ctx.speaker == nullptr || ctx.speaker_baseline == nullptr) return score;
    return score / core::max_of(ctx.speaker_baseline[ctx.speaker[j]], floor);
  }

  /// The row form of operator(), out[j] for every cell j < n (in != out).
  void apply(const float* in, float* out, std::int32_t n, const stage_context& ctx) const {
    if (ctx.speaker == nullptr || ctx.speaker_baseline == nullptr) {
      for (std::int32_t j = 0; j < n; ++j) out[j] = in[j];
      return;
    }
    if (ctx.num_speakers == 1) {
      // Every id is 0 (ids lie in [0, num_speakers)): one divisor, and the same division per
      // cell, which vectorises.
      const float divisor = core::max_of(ctx.speaker_baseline[0], floor);
      for (std::int32_t j = 0; j < n; ++j) out[j] = in[j] / divisor;
      return;
    }
    for (std::int32_t j = 0; j < n; ++j) {
      out[j] = in[j] / core::max_of(ctx.speaker_baseline[ctx.speaker[j]], floor);
    }
  }
};

}  // namespace audiokv::policy::stages

namespace audiokv {
using policy::stages::speaker_norm_stage;
}  // namespace audiokv
