// SPDX-License-Identifier: Apache-2.0
/// @file
/// A sequence stage for temporal continuity: the time-ordered cells are cut into blocks of
/// `block` cells and each score is replaced by its rank inside its block, (rank + 1) / block.
/// Selection of the lowest scores then takes the weakest cell of every block before the second
/// weakest of any, so evictions spread evenly in time and no stretch of speech is emptied — the
/// "sequence break" that fixed-ratio eviction causes. Where scores carry little information
/// (audio the decoder has not reached yet) this degrades to an even stride, not to a clustered
/// cut; where they do, each block keeps its best cells.
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "../../core/selection.hpp"
#include "cell_stage.hpp"
#include "stage_context.hpp"

namespace audiokv::policy::stages {

/// @brief out[j] = (1 + #{i in block(j) : (in[i], i) before (in[j], j)}) / block; block = 0 is
/// the identity. Ties rank by position (older lower), as selection does.
struct local_rank_stage {
  std::int32_t block = 0;  ///< cells per block; 0 disables the stage

  /// A cell stage: the rank of cell j inside its block [j - j % block, + block) clipped to n.
  AUDIOKV_HOST_DEVICE float operator()(const cell_neighbourhood& cell, const stage_context&) const {
    if (block <= 0) return cell.centre();
    const float scale = 1.0f / static_cast<float>(block);
    const std::int32_t first = cell.j - cell.j % block;
    const std::int32_t last = first + block < cell.n ? first + block : cell.n;
    std::int32_t below = 0;
    for (std::int32_t i = first; i < last; ++i) {
      below += core::evicts_before(cell.in[i], i, cell.in[cell.j], cell.j) ? 1 : 0;
    }
    return static_cast<float>(below + 1) * scale;
  }

  /// The row form of operator(), out[j] for every cell j < n (in != out).
  void apply(const float* in, float* out, std::int32_t n, const stage_context&) const {
    if (block <= 0) {
      for (std::int32_t j = 0; j < n; ++j) out[j] = in[j];
      return;
    }
    const float scale = 1.0f / static_cast<float>(block);
    for (std::int32_t first = 0; first < n; first += block) {
      const std::int32_t last = first + block < n ? first + block : n;
      for (std::int32_t j = first; j < last; ++j) {
        std::int32_t below = 0;
        for (std::int32_t i = first; i < last; ++i) {
          below += core::evicts_before(in[i], i, in[j], j) ? 1 : 0;
        }
        out[j] = static_cast<float>(below + 1) * scale;
      }
    }
  }
};

}  // namespace audiokv::policy::stages

namespace audiokv {
using policy::stages::local_rank_stage;
}  // namespace audiokv
