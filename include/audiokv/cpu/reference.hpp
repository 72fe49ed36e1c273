// SPDX-License-Identifier: Apache-2.0
/// @file
/// Plain-loop drivers of the core/ functions: the oracle every CUDA kernel is tested against
/// (cuda/*.cuh run the same core/ functions per thread). Float only; tests round half / bf16
/// inputs to float first. Never allocates except select_lowest's index scratch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "../core/attention.hpp"
#include "../core/compaction.hpp"
#include "../core/gqa.hpp"
#include "../core/importance.hpp"
#include "../core/median.hpp"
#include "../core/paged.hpp"
#include "../core/selection.hpp"
#include "../core/trend.hpp"

namespace audiokv::cpu::reference {

/// @brief One decode step in one pass over K/V (online softmax), GQA without repeating K/V.
/// @param q       [num_q_heads, head_dim]
/// @param k, v    K and V addressed by `addr` (element offsets, unit dim stride); v may be null
/// @param out     [num_q_heads, head_dim] or null
/// @param probs   [num_q_heads, probs_stride] probabilities of the first num_cells cells
/// @param scores  [num_kv_heads, probs_stride] group-reduced probabilities, or null
/// @param logit_bias [num_kv_heads, probs_stride] added to each cell's logit (shared rows:
///                ln m of a row standing for m cells), or null
/// @param live_cells null (every head attends num_cells cells), or live counts: KV head h
///                attends its first min(live_cells[h * live_stride], num_cells) cells (live_stride
///                0: one count for every head, 1: one per head); later cells are not written
inline void decode_attention(const float* q, const float* k, const float* v,
                             const core::kv_addressing& addr, std::int32_t num_q_heads,
                             std::int32_t num_kv_heads, std::int32_t head_dim,
                             std::int32_t num_cells, std::int32_t probs_stride, float* out,
                             float* probs, float* scores, gqa_reduce mode = gqa_reduce::mean,
                             const float* logit_bias = nullptr,
                             const std::int32_t* live_cells = nullptr,
                             std::int32_t live_stride = 0) {
  auto live_of = [&](std::int32_t kvh) {
    return live_cells == nullptr ? num_cells : std::min(live_cells[kvh * live_stride], num_cells);
  };
  const std::int32_t group = num_q_heads / num_kv_heads;
  const float scale = core::attention_scale(head_dim);
  std::vector<float> acc(head_dim);
  for (std::int32_t h = 0; h < num_q_heads; ++h) {
    const float* qh = q + static_cast<std::int64_t>(h) * head_dim;
    const std::int32_t kvh = h / group;
    const std::int32_t live = live_of(kvh);
    float* logits = probs + static_cast<std::int64_t>(h) * probs_stride;
    core::softmax_state state;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (std::int32_t j = 0; j < live; ++j) {
      const float* kr = k + addr.row_offset(j, kvh);
      float dot = 0.0f;
      for (std::int32_t d = 0; d < head_dim; ++d) dot += qh[d] * kr[d];
      const float bias = logit_bias != nullptr
                             ? logit_bias[static_cast<std::int64_t>(kvh) * probs_stride + j]
                             : 0.0f;
      logits[j] = core::cell_logit(dot, scale, bias);
      const core::online_weights w = core::online_step(state, logits[j]);
      if (v != nullptr) {
        const float* vr = v + addr.row_offset(j, kvh);
        for (std::int32_t d = 0; d < head_dim; ++d) acc[d] = acc[d] * w.rescale + w.weight * vr[d];
      }
    }
    for (std::int32_t j = 0; j < live; ++j) logits[j] = state.probability(logits[j]);
    if (out != nullptr)
      for (std::int32_t d = 0; d < head_dim; ++d)
        out[static_cast<std::int64_t>(h) * head_dim + d] = core::attention_output(acc[d], state);
  }
  if (scores == nullptr) return;
  for (std::int32_t kvh = 0; kvh < num_kv_heads; ++kvh)
    for (std::int32_t j = 0; j < live_of(kvh); ++j)
      scores[static_cast<std::int64_t>(kvh) * probs_stride + j] =
          core::reduce_group(probs + static_cast<std::int64_t>(kvh) * group * probs_stride, group,
                             probs_stride, j, mode);
}

/// @brief importance[h, j] = importance_update(importance[h, j], attention[h, j], alpha) for
/// j < num_cells. Rows are `stride` apart.
inline void importance_update(float* importance, const float* attention, std::int32_t rows,
                              std::int32_t num_cells, std::int32_t stride, float alpha) {
  for (std::int32_t h = 0; h < rows; ++h)
    for (std::int32_t j = 0; j < num_cells; ++j) {
      float& i = importance[static_cast<std::int64_t>(h) * stride + j];
      i = core::importance_update(i, attention[static_cast<std::int64_t>(h) * stride + j], alpha);
    }
}

/// @brief Entry prior: cells [first, first + count) start at importance[first - 1] (the
/// neighbour prior, tiered_cache::append) or 0.
inline void importance_enter(float* importance, std::int32_t rows, std::int32_t stride,
                             std::int32_t first, std::int32_t count, bool neighbour_prior) {
  for (std::int32_t h = 0; h < rows; ++h) {
    float* row = importance + static_cast<std::int64_t>(h) * stride;
    const float prior = neighbour_prior && first > 0 ? row[first - 1] : 0.0f;
    for (std::int32_t j = first; j < first + count; ++j) row[j] = prior;
  }
}

/// @brief out[h, j] = median_at<W>(in[h, :num_cells], j) (median_stage).
template <int W>
void median_rows(const float* in, float* out, std::int32_t rows, std::int32_t num_cells,
                 std::int32_t stride) {
  for (std::int32_t h = 0; h < rows; ++h)
    for (std::int32_t j = 0; j < num_cells; ++j)
      out[static_cast<std::int64_t>(h) * stride + j] =
          core::median_at<W>(in + static_cast<std::int64_t>(h) * stride, num_cells, j);
}

/// @brief Holt trend per row, output clamped at 0 (trend_stage::apply).
inline void trend_rows(const float* in, float* out, std::int32_t rows, std::int32_t num_cells,
                       std::int32_t stride, float level_weight, float slope_gain) {
  for (std::int32_t h = 0; h < rows; ++h) {
    const float* m = in + static_cast<std::int64_t>(h) * stride;
    float* s = out + static_cast<std::int64_t>(h) * stride;
    core::trend_row(m, s, num_cells, level_weight, slope_gain);
  }
}

/// @brief evict[h, j] = 1 for the k[h] candidates of row h that come first in the
/// core::evicts_before order (score, then slot); 0 otherwise. Non-candidates
/// (candidate[h, j] == 0; candidate may be null = all) are never evicted; when a row has fewer
/// than k[h] candidates all of them are evicted.
inline void select_lowest(const float* scores, const std::uint8_t* candidate, std::int32_t rows,
                          std::int32_t num_cells, std::int32_t stride, const std::int32_t* k,
                          std::uint8_t* evict) {
  std::vector<std::int32_t> idx;
  for (std::int32_t h = 0; h < rows; ++h) {
    const float* s = scores + static_cast<std::int64_t>(h) * stride;
    std::uint8_t* e = evict + static_cast<std::int64_t>(h) * stride;
    idx.clear();
    for (std::int32_t j = 0; j < num_cells; ++j) {
      e[j] = 0;
      if (candidate == nullptr || candidate[static_cast<std::int64_t>(h) * stride + j])
        idx.push_back(j);
    }
    const auto take = std::min<std::size_t>(idx.size(), static_cast<std::size_t>(k[h]));
    std::partial_sort(
        idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(take), idx.end(),
        [s](std::int32_t a, std::int32_t b) { return core::evicts_before(s[a], a, s[b], b); });
    for (std::size_t i = 0; i < take; ++i) e[idx[i]] = 1;
  }
}

/// @brief move_to[h, j] = compaction_target(keep[h, j], kept before j); n_kv_after[h] = kept.
inline void move_to_from_mask(const std::uint8_t* keep, std::int32_t rows, std::int32_t num_cells,
                              std::int32_t stride, std::int32_t* move_to,
                              std::int32_t* n_kv_after) {
  for (std::int32_t h = 0; h < rows; ++h) {
    std::int32_t kept = 0;
    for (std::int32_t j = 0; j < num_cells; ++j) {
      const bool kj = keep[static_cast<std::int64_t>(h) * stride + j] != 0;
      move_to[static_cast<std::int64_t>(h) * stride + j] = core::compaction_target(kj, kept);
      kept += kj ? 1 : 0;
    }
    n_kv_after[h] = kept;
  }
}

/// @brief Out-of-place gather: dst row (move_to[j], head) = src row (j, head) for kept cells,
/// byte for byte. Offsets in bytes; the plan is per cell (plan_heads == 1, shared by every
/// head) or per head (plan_heads == num_heads, row h of move_to drives head h).
inline void gather_rows(const unsigned char* src, unsigned char* dst, std::int64_t cell_stride,
                        std::int64_t head_stride, std::int64_t row_bytes, std::int32_t num_heads,
                        const std::int32_t* move_to, std::int32_t plan_heads,
                        std::int32_t num_cells, std::int32_t move_stride) {
  for (std::int32_t h = 0; h < num_heads; ++h) {
    const std::int32_t* mt =
        move_to + static_cast<std::int64_t>(plan_heads == 1 ? 0 : h) * move_stride;
    for (std::int32_t j = 0; j < num_cells; ++j) {
      if (mt[j] == core::evicted_slot) continue;
      std::memcpy(dst + mt[j] * cell_stride + h * head_stride,
                  src + j * cell_stride + h * head_stride, static_cast<std::size_t>(row_bytes));
    }
  }
}

}  // namespace audiokv::cpu::reference
