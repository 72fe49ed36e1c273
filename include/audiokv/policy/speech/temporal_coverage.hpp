// SPDX-License-Identifier: Apache-2.0
/// @file
/// Temporal coverage: no stretch of time empties. Neighbouring speech frames are redundant (50
/// or 100 per second), so which frame of a neighbourhood survives matters less than that every
/// neighbourhood keeps some; a score-only top-k instead empties whole stretches the decoder has
/// not attended yet. As in Segmentwise Top-K (arXiv 2511.14293), time is cut into segments of
/// segment_ms and each segment keeps a floor of cells in proportion to its (weighted) time,
/// chosen by score inside the segment; the rest of the budget goes to the scores globally.
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>

#include "../../core/segment_floor.hpp"
#include "../../error.hpp"

namespace audiokv::policy::speech {

/// @brief Switches and parameters of the temporal-coverage rule.
struct temporal_coverage_config {
  /// Off: no floor; only the scores (and the other rules) decide.
  bool enabled = true;
  /// Segment length S; segments are aligned on absolute positions, pos / ceil(S / frame_ms).
  float segment_ms = 1000.0f;
  /// Fraction of the kept cells (after the sinks) placed as per-segment floors.
  float share = 1.0f;
  /// Time weight of an unvoiced stretch relative to a voiced one: a segment counts its frames
  /// times silence_weight + (1 - silence_weight) * (mean voice of its cells).
  float silence_weight = 0.25f;
  /// Width of the band around a sub-span's centre, as a fraction of the sub-span, inside which
  /// the score chooses the floor cell (1: the whole sub-span). A cell outside the band is chosen
  /// only when the band holds none (then the cell nearest the centre), so two neighbouring
  /// floor cells lie at most (1 + centre_band) sub-spans apart: at a small budget a sub-span is
  /// several frames wide and a gap of two of them can drop a whole syllable.
  float centre_band = 1.0f;
  /// Segment floor (0: off, the segment_ms segments above): the floor's cells are placed by
  /// core::mark_segment_floor instead, in segments sized by the budget, each of
  /// segment_cells cells' worth of weighted time, keeping the segment_cells cells of highest
  /// score inside it (segment_ms, centre_band and the frontier-first floor are then unused;
  /// the frontier's weights, past density and decay, still shape time). At 1 this is a stride
  /// whose representative is the most important frame of its window. In [0,
  /// core::max_segment_cells]. 1 was chosen on the wide dev splits
  /// (benchmarks/results/quality_dev_wide_round3.md) against the segment_ms floor.
  std::int32_t segment_cells = 1;
  /// Segment floor: where in its segment a segment's ties go (core::segment_floor_params::
  /// phase), in [0, 1]; 0.5 is the centre. An engine may give the heads of a layer the phases
  /// (h + 0.5) / H so that together they keep more distinct frames; measured on fresh dev clips
  /// and not made a default (benchmarks/results/quality_dev_round5.md: better at streaming 10%
  /// on Asterisk, worse at streaming 10% on voices).
  float phase = 0.5f;

  /// Throws audiokv::error naming the first invalid field.
  void validate(const char* where) const {
    AUDIOKV_REQUIRE(std::isfinite(segment_ms) && segment_ms > 0.0f && segment_ms <= 1e9f, where,
                    "config.speech.coverage.segment_ms", segment_ms, "must be in (0, 1e9]");
    AUDIOKV_REQUIRE(std::isfinite(share) && share >= 0.0f && share <= 1.0f, where,
                    "config.speech.coverage.share", share, "must be in [0, 1]");
    AUDIOKV_REQUIRE(
        std::isfinite(silence_weight) && silence_weight >= 0.0f && silence_weight <= 1.0f, where,
        "config.speech.coverage.silence_weight", silence_weight, "must be in [0, 1]");
    AUDIOKV_REQUIRE(std::isfinite(centre_band) && centre_band > 0.0f && centre_band <= 1.0f, where,
                    "config.speech.coverage.centre_band", centre_band, "must be in (0, 1]");
    AUDIOKV_REQUIRE(segment_cells >= 0 && segment_cells <= core::max_segment_cells, where,
                    "config.speech.coverage.segment_cells", segment_cells, "must be in [0, 8]");
    AUDIOKV_REQUIRE(std::isfinite(phase) && phase >= 0.0f && phase <= 1.0f, where,
                    "config.speech.coverage.phase", phase, "must be in [0, 1]");
  }
};

namespace detail {

/// The coverage floor's time weight (core::coverage_time_weight, the one definition).
using core::coverage_time_weight;

}  // namespace detail

/// @brief Marks the coverage floor: tier[j] = floor_tier for the chosen cells.
///
/// The time span [pos[0], pos[n-1] + 1) is cut into segments [k S, (k + 1) S) (S =
/// segment_frames). Segment k has weight w_k = (its frames in the span, those before
/// `dense_from` counted at `past_density`, or at the decayed density of
/// detail::coverage_time_weight when past_decay_frames > 0) * (silence_weight + (1 -
/// silence_weight) * mean voice of its cells). With W = sum of w_k and cumulative weights C_k,
/// segment k gets
///   q_k = round(F C_k / W) - round(F C_{k-1} / W)
/// cells, so the quotas add up to F and no stretch longer than about W / F weighted frames is
/// left without a floor cell. Inside a segment the span is cut into q_k equal sub-spans and each
/// keeps its highest-scoring unmarked cell (ties: the one nearest the sub-span's centre, then
/// the older), so evenly spread cells stand in where the scores carry no information. A sub-span
/// that already holds a kept cell (tier != 0: a sink or a protected cell) needs no other, and
/// one without cells keeps nothing; either way its cell returns to the global ranking.
///
/// @param pos [n] ascending positions; @param voice [n] in [0, 1]; @param score [n];
/// @param tier [n] cells with tier != 0 are already kept; they are not chosen again and they
///        satisfy the sub-span they lie in.
/// @param scored_until cells at later positions count as score 0 inside their sub-span (audio
///        the decoder has not reached: its attention so far carries no information about it),
///        so the centre decides there.
/// @param past_decay_frames T of the age decay behind `dense_from` (0: constant past_density).
/// @param exponential_decay the decay's profile: exp(-a / T) rather than 1 / (1 + a / T).
/// @param centre_band the score chooses only among cells within centre_band * width / 2 of the
///        sub-span's centre; the others count as scoring below every cell of the band.
/// @return the number of cells marked.
inline std::int32_t mark_coverage_floor(const std::int32_t* pos, const float* voice,
                                        const float* score, std::int32_t n, std::int32_t floor,
                                        std::int32_t segment_frames, std::int64_t dense_from,
                                        double past_density, double silence_weight,
                                        std::uint8_t* tier, std::uint8_t floor_tier,
                                        std::int64_t scored_until = INT64_MAX,
                                        double past_decay_frames = 0.0,
                                        bool exponential_decay = false, double centre_band = 1.0) {
  if (n <= 0 || floor <= 0 || segment_frames <= 0) return 0;
  const std::int64_t seg = segment_frames;
  const std::int64_t first = pos[0], end = static_cast<std::int64_t>(pos[n - 1]) + 1;
  // The segment whose first cell is a: its cells [a, b), its span [lo, hi) and its weight w_k.
  struct segment {
    std::int32_t b;
    std::int64_t lo, hi;
    double weight;
  };
  // The segment k = floor(pos[a] / S) of cell a and its end b: positions ascend, so its cells
  // are those before (k + 1) S.
  auto segment_end = [&](std::int32_t a, std::int64_t& k) {
    const std::int64_t p = pos[a];
    k = p >= 0 ? p / seg : -((-p + seg - 1) / seg);
    const std::int64_t next = (k + 1) * seg;
    std::int32_t b = a;
    while (b < n && pos[b] < next) ++b;
    return b;
  };
  // voiced: the sum of voice[a..b) in index order.
  auto segment_of = [&](std::int32_t a, std::int32_t b, std::int64_t k, double voiced) {
    const std::int64_t lo = k * seg < first ? first : k * seg;
    const std::int64_t hi = (k + 1) * seg > end ? end : (k + 1) * seg;
    const double factor = silence_weight + (1.0 - silence_weight) * voiced / (b - a);
    return segment{b, lo, hi,
                   factor * detail::coverage_time_weight(lo, hi, dense_from, past_density,
                                                         past_decay_frames, exponential_decay)};
  };
  auto segment_at = [&](std::int32_t a) {
    std::int64_t k = 0;
    const std::int32_t b = segment_end(a, k);
    double voiced = 0.0;
    for (std::int32_t j = a; j < b; ++j) voiced += voice[j];
    return segment_of(a, b, k, voiced);
  };
  // Pass 1: the total weight W. Two segments' voice sums run side by side (each in its own
  // index order, so with its own rounding); the first kept_segments segments (16 KiB of stack)
  // are kept for pass 2, which recomputes the later ones identically.
  constexpr std::int32_t kept_segments = 512;
  segment kept[kept_segments];
  std::int32_t segments = 0;
  auto keep_segment = [&](const segment& sg) {
    if (segments < kept_segments) kept[segments] = sg;
    ++segments;
  };
  double total = 0.0;
  for (std::int32_t a = 0; a < n;) {
    std::int64_t k1 = 0, k2 = 0;
    const std::int32_t b1 = segment_end(a, k1);
    if (b1 == n) {
      const segment sg = segment_at(a);
      keep_segment(sg);
      total += sg.weight;
      break;
    }
    const std::int32_t b2 = segment_end(b1, k2);
    const std::int32_t l1 = b1 - a, l2 = b2 - b1, both = l1 < l2 ? l1 : l2;
    double v1 = 0.0, v2 = 0.0;
    for (std::int32_t i = 0; i < both; ++i) {
      v1 += voice[a + i];
      v2 += voice[b1 + i];
    }
    for (std::int32_t i = both; i < l1; ++i) v1 += voice[a + i];
    for (std::int32_t i = both; i < l2; ++i) v2 += voice[b1 + i];
    const segment s1 = segment_of(a, b1, k1, v1), s2 = segment_of(b1, b2, k2, v2);
    keep_segment(s1);
    keep_segment(s2);
    total += s1.weight;
    total += s2.weight;
    a = b2;
  }
  if (!(total > 0.0)) return 0;
  // Pass 2: quotas from cumulative weights; the best cell of each sub-span.
  std::int32_t marked = 0;
  double cumulative = 0.0;
  std::int64_t given = 0;
  std::int32_t index = 0;
  for (std::int32_t a = 0; a < n; ++index) {
    const segment sg = index < kept_segments ? kept[index] : segment_at(a);
    const std::int32_t b = sg.b;
    const std::int64_t lo = sg.lo, hi = sg.hi;
    cumulative += sg.weight;
    const std::int64_t upto = std::llround(static_cast<double>(floor) * cumulative / total);
    const std::int64_t quota = upto - given;
    given = upto;
    const double width = static_cast<double>(hi - lo) / static_cast<double>(quota > 0 ? quota : 1);
    // Every cell of a sub-span lies within width / 2 of its centre: a band of 1 excludes none.
    const double band = centre_band < 1.0 ? 0.5 * centre_band * width : HUGE_VAL;
    std::int32_t c = a;
    for (std::int64_t s = 0; s < quota; ++s) {
      const double from = static_cast<double>(lo) + width * static_cast<double>(s);
      const double to = from + width;
      const double centre = from + 0.5 * width;
      while (c < b && static_cast<double>(pos[c]) < from) ++c;
      // The best cell so far, its score (0 when not scored) and |pos[best] - centre|; a cell
      // replaces it on a higher score, or on an equal one nearer the centre. Selected without
      // branches: the scores within a sub-span are in no predictable order.
      std::int32_t best = -1;
      float best_score = 0.0f;
      double best_offset = 0.0;
      bool covered = false;  // a cell kept already (sink, protected) stands for the sub-span
      for (std::int32_t j = c; j < b; ++j) {
        const double at = static_cast<double>(pos[j]);
        if (!(at < to)) break;
        if (tier[j] != 0) {
          covered = true;
          break;
        }
        const double offset = std::fabs(at - centre);
        const float sj = offset > band ? -HUGE_VALF : pos[j] <= scored_until ? score[j] : 0.0f;
        const bool better =
            (best < 0) | (sj > best_score) | ((sj == best_score) & (offset < best_offset));
        best = better ? j : best;
        best_score = better ? sj : best_score;
        best_offset = better ? offset : best_offset;
      }
      if (best >= 0 && !covered) {
        tier[best] = floor_tier;
        ++marked;
      }
    }
    a = b;
  }
  return marked;
}

}  // namespace audiokv::policy::speech

namespace audiokv {
using policy::speech::mark_coverage_floor;
using policy::speech::temporal_coverage_config;
}  // namespace audiokv
