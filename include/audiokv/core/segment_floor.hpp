// SPDX-License-Identifier: Apache-2.0
/// @file
/// Coverage-guaranteed selection (the segment floor): time is cut into segments sized by the
/// budget, and every segment keeps its floor of cells, the ones of highest score inside it. At
/// one cell per segment this is a uniform stride whose representative is the most important
/// frame of its window: no stretch of (weighted) time longer than a segment is ever left
/// without a cell, which a score-only top-k cannot promise (Segmentwise Top-K, arXiv
/// 2511.14293). Time is weighted: full weight from `dense_from` (the audio at and ahead of the
/// decoder's alignment frontier) on, and behind it the density a stride leaves when it is
/// applied again at every chunk of a stream, past + (1 - past) g(age). The rule is written once
/// here and shared by every backend.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "math.hpp"

namespace audiokv::core {

/// Most cells one segment may keep (segment_floor_params::segment_cells).
inline constexpr std::int32_t max_segment_cells = 8;

/// Time weight of positions [from, to) at density 1 from `dense_from` = D on and before it at
/// density past + (1 - past) g(D - p) at position p, g(a) = 1 / (1 + a / decay) (harmonic) or
/// exp(-a / decay) (exponential) when decay > 0, g = 0 otherwise. The decayed part is the
/// integral over [from, split), split = clamp(D, from, to):
///   harmonic:    (1 - past) decay ln((decay + D - from) / (decay + D - split)),
///   exponential: (1 - past) decay (exp(-(D - split) / decay) - exp(-(D - from) / decay)).
AUDIOKV_HOST_DEVICE double coverage_time_weight(std::int64_t from, std::int64_t to,
                                                std::int64_t dense_from, double past,
                                                double decay = 0.0, bool exponential = false) {
  if (to <= from) return 0.0;
  const std::int64_t split = dense_from < from ? from : dense_from > to ? to : dense_from;
  double behind = past * static_cast<double>(split - from);
  if (decay > 0.0 && split > from) {
    const double d = static_cast<double>(dense_from);
    const double near = d - static_cast<double>(split), far = d - static_cast<double>(from);
    behind += (1.0 - past) * decay *
              (exponential ? exp_f64(-near / decay) - exp_f64(-far / decay)
                           : log_f64((decay + far) / (decay + near)));
  }
  return behind + static_cast<double>(to - split);
}

/// @brief Parameters of mark_segment_floor().
struct segment_floor_params {
  /// F: cells the floor places (segments: ceil(F / segment_cells)).
  std::int32_t floor = 0;
  /// m in [1, max_segment_cells]: cells each segment keeps (its floor); a segment spans
  /// m W / F of weighted time, W the weighted time of all cells.
  std::int32_t segment_cells = 1;
  /// D: positions from D on weigh 1 per frame (coverage_time_weight).
  std::int64_t dense_from = INT64_MIN;
  /// Density behind D (coverage_time_weight's `past`), in [0, 1].
  double past_density = 1.0;
  /// Decay length behind D in frames (0: constant past_density).
  double decay = 0.0;
  /// The decay's profile: exp(-a / decay) rather than 1 / (1 + a / decay).
  bool exponential = false;
  /// A cell's time counts times silence_weight + (1 - silence_weight) voice, in [0, 1].
  double silence_weight = 1.0;
  /// Cells at later positions count as score 0 (audio the decoder has not reached: its
  /// attention carries no information about it yet), so the segment's anchor decides there.
  std::int64_t scored_until = INT64_MAX;
  /// The anchor of segment g, where ties go: weighted time (g + phase) S, phase in [0, 1]
  /// (0.5: the segment's centre). Heads of a layer given different phases keep different frames
  /// where the scores tie, so together they see more distinct frames at the same density.
  double phase = 0.5;
};

/// Weighted time cell j stands for: the frames [pos[j-1] + 1, pos[j] + 1) since the cell
/// before it ([pos[0], pos[0] + 1) for the first), times its voice factor.
AUDIOKV_HOST_DEVICE double segment_floor_cell_weight(const std::int32_t* pos, const float* voice,
                                                     std::int32_t j,
                                                     const segment_floor_params& p) {
  const std::int64_t to = static_cast<std::int64_t>(pos[j]) + 1;
  const std::int64_t from = j > 0 ? static_cast<std::int64_t>(pos[j - 1]) + 1 : to - 1;
  const double factor = p.silence_weight + (1.0 - p.silence_weight) * static_cast<double>(voice[j]);
  return factor *
         coverage_time_weight(from, to, p.dense_from, p.past_density, p.decay, p.exponential);
}

/// @brief Marks the segment floor: tier[j] = floor_tier for the chosen cells; returns how many.
///
/// With w_j = segment_floor_cell_weight(j), C_j = w_0 + ... + w_j, W = C_{n-1}, segment width
/// S = m W / F (m = segment_cells) and G = ceil(F / m) segments, cell j lies in segment
/// min(G - 1, floor((C_j - w_j / 2) / S)) (its weighted midpoint). Segment g keeps m cells (the
/// last F - (G - 1) m), less the cells already kept in it (tier != 0: sinks, protected cells),
/// which are not chosen again: its unkept cells of highest score (score 0 past scored_until),
/// ties to the cell whose midpoint lies nearest the segment's anchor (g + phase) S, then the
/// older. A segment without cells keeps nothing; those cells return to the caller's ranking.
/// O(n m), no allocation; `pos` ascending, `voice` in [0, 1].
AUDIOKV_HOST_DEVICE std::int32_t mark_segment_floor(const std::int32_t* pos, const float* voice,
                                                    const float* score, std::int32_t n,
                                                    const segment_floor_params& p,
                                                    std::uint8_t* tier, std::uint8_t floor_tier) {
  const std::int32_t m = clamp_to<std::int32_t>(p.segment_cells, 1, max_segment_cells);
  if (n <= 0 || p.floor <= 0) return 0;
  double total = 0.0;
  for (std::int32_t j = 0; j < n; ++j) total += segment_floor_cell_weight(pos, voice, j, p);
  if (!(total > 0.0)) return 0;
  const std::int64_t segments = (static_cast<std::int64_t>(p.floor) + m - 1) / m;
  const double width = static_cast<double>(m) * total / static_cast<double>(p.floor);
  // The current segment's best unkept cells, best first: index, score, |midpoint - centre|.
  std::int32_t best[max_segment_cells] = {};
  float best_score[max_segment_cells] = {};
  double best_offset[max_segment_cells] = {};
  std::int32_t count = 0, kept = 0, marked = 0;
  std::int64_t current = -1;
  auto flush = [&]() {
    if (current < 0) return;
    const std::int32_t quota =
        current == segments - 1 ? p.floor - static_cast<std::int32_t>((segments - 1) * m) : m;
    for (std::int32_t i = 0; i < count && i < quota - kept; ++i) {
      tier[best[i]] = floor_tier;
      ++marked;
    }
  };
  double cumulative = 0.0;
  for (std::int32_t j = 0; j < n; ++j) {
    const double w = segment_floor_cell_weight(pos, voice, j, p);
    const double mid = cumulative + 0.5 * w;
    cumulative += w;
    std::int64_t g = static_cast<std::int64_t>(mid / width);
    g = g < segments - 1 ? g : segments - 1;
    if (g != current) {
      flush();
      current = g;
      count = 0;
      kept = 0;
    }
    if (tier[j] != 0) {
      ++kept;
      continue;
    }
    const double offset = mid - (static_cast<double>(g) + p.phase) * width;
    const double off = offset < 0.0 ? -offset : offset;
    const float s = static_cast<std::int64_t>(pos[j]) <= p.scored_until ? score[j] : 0.0f;
    // Insertion into the best-first list of at most m entries; an equal score nearer the
    // anchor ranks first, and on equal offsets the older (already listed) cell stays ahead.
    auto ranks_below = [&](std::int32_t i) {
      return s > best_score[i] || (s == best_score[i] && off < best_offset[i]);
    };
    if (count == m && !ranks_below(m - 1)) continue;
    std::int32_t at = count < m ? count : m - 1;  // a full list drops its last entry
    for (; at > 0 && ranks_below(at - 1); --at) {
      best[at] = best[at - 1];
      best_score[at] = best_score[at - 1];
      best_offset[at] = best_offset[at - 1];
    }
    best[at] = j;
    best_score[at] = s;
    best_offset[at] = off;
    count = count < m ? count + 1 : m;
  }
  flush();
  return marked;
}

}  // namespace audiokv::core
