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

/// One more query head's probability `a` folded into a group's running value `acc`:
/// max(acc, a) or acc + a. reduce_group() folds the heads in order 1, 2, ..., G - 1 into head
/// 0's value; a pass that reduces row by row folds them the same way.
AUDIOKV_HOST_DEVICE float reduce_group_fold(float acc, float a, gqa_reduce mode) {
  return mode == gqa_reduce::max ? max_of(acc, a) : acc + a;
}

/// The group's score from the value of all its heads folded: acc, or acc / group_size for the
/// mean.
AUDIOKV_HOST_DEVICE float reduce_group_finish(float acc, std::int32_t group_size, gqa_reduce mode) {
  return mode == gqa_reduce::max ? acc : acc / static_cast<float>(group_size);
}

/// Score of cell j from attention [group_size, num_cells] (row-major).
AUDIOKV_HOST_DEVICE float reduce_group(const float* attention, std::int32_t group_size,
                                       std::int64_t num_cells, std::int64_t j, gqa_reduce mode) {
  float acc = attention[j];
  for (std::int32_t g = 1; g < group_size; ++g) {
    acc = reduce_group_fold(acc, attention[g * num_cells + j], mode);
  }
  return reduce_group_finish(acc, group_size, mode);
}

}  // namespace audiokv::core

namespace audiokv {
using core::gqa_reduce;
}  // namespace audiokv
