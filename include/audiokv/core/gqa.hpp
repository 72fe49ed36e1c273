// SPDX-License-Identifier: Apache-2.0
/// @file
/// GQA: reduce the attention of the G query heads of one GQA group to one score per cell, so
/// K/V are never repeated per query head.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "math.hpp"

namespace audiokv::core {

/// How a GQA group's query heads combine into one KV-head score.
enum class gqa_reduce : std::uint8_t { mean = 0, max = 1 };

/// Running group reduction: folds query head g's value `a` into `acc` (g == 0 starts the fold,
/// so no identity element is needed): mean -> sum, max -> max. Applied for g = 0 .. G-1 in order,
/// then group_finish, it equals reduce_group bit for bit.
AUDIOKV_HOST_DEVICE float group_fold(float acc, float a, std::int32_t g, gqa_reduce mode) {
  if (g == 0) return a;
  return mode == gqa_reduce::max ? max_of(acc, a) : acc + a;
}

/// The group score from a fold over all group_size query heads: mean divides the sum by G.
AUDIOKV_HOST_DEVICE float group_finish(float acc, std::int32_t group_size, gqa_reduce mode) {
  return mode == gqa_reduce::max ? acc : acc / static_cast<float>(group_size);
}

/// Score of cell j from attention [group_size, num_cells] (row-major).
AUDIOKV_HOST_DEVICE float reduce_group(const float* attention, std::int32_t group_size,
                                       std::int64_t num_cells, std::int64_t j, gqa_reduce mode) {
  float acc = 0.0f;
  for (std::int32_t g = 0; g < group_size; ++g)
    acc = group_fold(acc, attention[g * num_cells + j], g, mode);
  return group_finish(acc, group_size, mode);
}

}  // namespace audiokv::core

namespace audiokv {
using core::gqa_reduce;
}  // namespace audiokv
