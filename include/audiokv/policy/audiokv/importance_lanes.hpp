// SPDX-License-Identifier: Apache-2.0
/// @file
/// observe() of several importance trackers at once (the KV heads of one layer): the
/// single-speaker trackers' speaker sums advance side by side, bit-identical per tracker.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../core/gqa.hpp"
#include "../../core/trend.hpp"
#include "../detail/cell_store.hpp"
#include "importance_tracker.hpp"

namespace audiokv::policy::detail {

/// @brief Runs importance_tracker::observe() of up to core::trend_lanes trackers in one pass
/// over their cells (a friend of importance_tracker).
struct importance_lanes {
  /// @brief importance_tracker::observe() of `count` <= core::trend_lanes distinct trackers at
  /// once: tracker i observes its validated row attention[i] of n[i] cells of stores[i], and
  /// resets[i] is what its observe() returns. Bit-identical per tracker: the same float operations
  /// per cell, the same double additions per speaker in cell order. The single-speaker trackers'
  /// sums, one dependent chain of additions each, advance side by side in one loop per block.
  static void observe(importance_tracker* const* trackers, const float* const* attention,
                      const std::int32_t* n, const cell_store* const* stores, std::int32_t count,
                      bool* resets) {
    constexpr std::int32_t lanes = core::trend_lanes;
    constexpr std::int32_t block = importance_tracker::block;
    static constexpr float zeros[block] = {};  // the rows of unused lanes
    std::int32_t max_n = 0;
    for (std::int32_t i = 0; i < count; ++i) {
      trackers[i]->begin_step();
      max_n = std::max(max_n, n[i]);
    }
    for (std::int32_t first = 0; first < max_n; first += block) {
      const float* row[lanes];
      double sum[lanes];
      std::int32_t len_of[lanes];
      importance_tracker* owner[lanes];
      std::int32_t used = 0, common = block;
      for (std::int32_t i = 0; i < count; ++i) {
        if (first >= n[i]) continue;
        importance_tracker& t = *trackers[i];
        const std::int32_t len = std::min(block, n[i] - first);
        t.update_block(attention[i] + first, first, len, n[i]);
        if (t.num_speakers_ != 1) {
          t.accumulate_block(first, len, *stores[i]);
          continue;
        }
        row[used] = t.importance_.data() + first;
        sum[used] = t.speaker_sum_[0];
        len_of[used] = len;
        owner[used] = &t;
        common = std::min(common, len);
        ++used;
      }
      if (used == 0) continue;
      for (std::int32_t a = used; a < lanes; ++a) {
        row[a] = zeros;
        sum[a] = 0.0;
      }
      // Lane a's additions are its tracker's sum += imp[k] for k in order, as in observe().
      for (std::int32_t k = 0; k < common; ++k) {
        for (std::int32_t a = 0; a < lanes; ++a) sum[a] += row[a][k];
      }
      for (std::int32_t a = 0; a < used; ++a) {
        for (std::int32_t k = common; k < len_of[a]; ++k) sum[a] += row[a][k];
        owner[a]->speaker_sum_[0] = sum[a];
        owner[a]->speaker_count_[0] += len_of[a];
      }
    }
    for (std::int32_t i = 0; i < count; ++i) {
      resets[i] = trackers[i]->end_step(attention[i], 1, n[i], gqa_reduce::mean);
    }
  }
};

}  // namespace audiokv::policy::detail
