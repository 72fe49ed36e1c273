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

/// Score of cell j from attention [group_size, num_cells] (row-major).
AUDIOKV_HOST_DEVICE float reduce_group(const float* attention, std::int32_t group_size,
                                       std::int64_t num_cells, std::int64_t j, gqa_reduce mode) {
  float acc = attention[j];
  for (std::int32_t g = 1; g < group_size; ++g) {
    const float a = attention[g * num_cells + j];
    acc = mode == gqa_reduce::max ? max_of(acc, a) : acc + a;
  }
  return mode == gqa_reduce::max ? acc : acc / static_cast<float>(group_size);
}

}  // namespace audiokv::core

namespace audiokv {
using core::gqa_reduce;
}  // namespace audiokv
