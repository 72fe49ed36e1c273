// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/core/segment_floor.hpp>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using audiokv::core::mark_segment_floor;
using audiokv::core::segment_floor_params;

struct cells {
  std::vector<std::int32_t> pos;
  std::vector<float> voice, score;
  std::vector<std::uint8_t> tier;
  explicit cells(std::int32_t n, std::int32_t step = 1)
      : voice(static_cast<size_t>(n), 1.0f),
        score(static_cast<size_t>(n), 0.0f),
        tier(static_cast<size_t>(n), 0) {
    for (std::int32_t j = 0; j < n; ++j) pos.push_back(j * step);
  }
  std::int32_t mark(const segment_floor_params& p) {
    return mark_segment_floor(pos.data(), voice.data(), score.data(),
                              static_cast<std::int32_t>(pos.size()), p, tier.data(), 2);
  }
  std::vector<std::int32_t> kept() const {
    std::vector<std::int32_t> out;
    for (size_t j = 0; j < pos.size(); ++j)
      if (tier[j] == 2) out.push_back(pos[j]);
    return out;
  }
};

// Equal scores: the cell nearest each segment's centre, i.e. a stride of the segment width.
TEST(SegmentFloor, EqualScoresGiveTheStridePositions) {
  cells c(100);
  segment_floor_params p;
  p.floor = 10;
  EXPECT_EQ(c.mark(p), 10);
  EXPECT_EQ(c.kept(), (std::vector<std::int32_t>{4, 14, 24, 34, 44, 54, 64, 74, 84, 94}));
}

// Ties go to the cell nearest the anchor (g + phase) S: heads given the phases (h + 0.5) / 4
// keep the same stride at four offsets, 40 distinct frames where one phase keeps 10; a score
// still wins over the anchor.
TEST(SegmentFloor, PhasesMoveTheTiesAcrossTheSegment) {
  const std::vector<std::int32_t> first = {1, 3, 6, 8};  // anchors 1.25, 3.75, 6.25, 8.75
  for (int h = 0; h < 4; ++h) {
    cells c(100);
    c.score[55] = 1.0f;
    segment_floor_params p;
    p.floor = 10;
    p.phase = (h + 0.5) / 4.0;
    EXPECT_EQ(c.mark(p), 10);
    const std::vector<std::int32_t> k = c.kept();
    ASSERT_EQ(k.size(), 10u);
    for (std::int32_t g = 0; g < 10; ++g)
      EXPECT_EQ(k[static_cast<size_t>(g)], g == 5 ? 55 : 10 * g + first[static_cast<size_t>(h)])
          << "head " << h << ", segment " << g;
  }
  cells ends(100);
  segment_floor_params p;
  p.floor = 10;
  p.phase = 0.0;
  ends.mark(p);
  EXPECT_EQ(ends.kept().front(), 0);
  cells last(100);
  p.phase = 1.0;
  last.mark(p);
  EXPECT_EQ(last.kept().front(), 9);
}

// One cell per segment: the representative is the segment's most important frame.
TEST(SegmentFloor, TheBestCellOfEachSegmentIsKept) {
  cells c(100);
  c.score[17] = 5.0f;  // segment 1 ([10, 20))
  c.score[12] = 4.0f;
  c.score[91] = 1.0f;  // segment 9
  segment_floor_params p;
  p.floor = 10;
  c.mark(p);
  const std::vector<std::int32_t> k = c.kept();
  ASSERT_EQ(k.size(), 10u);
  EXPECT_EQ(k[1], 17);
  EXPECT_EQ(k[9], 91);
  EXPECT_EQ(k[0], 4);
}

// Whatever the scores, no window of two segment widths is left without a cell: the stride's
// coverage without its fixed positions (random scores, 200 trials).
TEST(SegmentFloor, NoHolesWhateverTheScores) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    cells c(300 + trial);
    for (float& s : c.score) s = u(rng) * u(rng);
    segment_floor_params p;
    p.floor = 7 + trial % 40;
    p.segment_cells = 1 + trial % 3;
    const std::int32_t n = static_cast<std::int32_t>(c.pos.size());
    EXPECT_EQ(c.mark(p), p.floor);
    const std::vector<std::int32_t> k = c.kept();
    const double width = static_cast<double>(p.segment_cells) * n / p.floor;
    std::int32_t previous = -1;
    for (const std::int32_t q : k) {
      EXPECT_LT(q - previous, 2.0 * width + 1.0) << "trial " << trial;
      previous = q;
    }
    EXPECT_LT(n - 1 - previous, width + 1.0) << "trial " << trial;
  }
}

// A cell kept already (a sink or a protected cell) fills its segment's quota.
TEST(SegmentFloor, KeptCellsCountTowardTheirSegment) {
  cells c(100);
  c.tier[3] = 3;
  segment_floor_params p;
  p.floor = 10;
  EXPECT_EQ(c.mark(p), 9);
  EXPECT_EQ(c.kept().front(), 14);
}

// Past scored_until the scores carry no information: the centre decides there.
TEST(SegmentFloor, UnscoredCellsTakeTheStridePositions) {
  cells c(100);
  for (float& s : c.score) s = 0.5f;
  c.score[50] = 9.0f;
  c.score[95] = 9.0f;  // not scored yet
  segment_floor_params p;
  p.floor = 10;
  p.scored_until = 59;
  c.mark(p);
  const std::vector<std::int32_t> k = c.kept();
  EXPECT_EQ(k[5], 50);
  EXPECT_EQ(k[9], 94);
}

// Two cells per segment: the two best of each segment, five segments; equal scores keep the
// two cells nearest the centre.
TEST(SegmentFloor, SegmentCellsKeepTheirBestCells) {
  cells c(100);
  c.score[1] = 3.0f;
  c.score[7] = 2.0f;
  c.score[19] = 1.0f;
  segment_floor_params p;
  p.floor = 10;
  p.segment_cells = 2;
  EXPECT_EQ(c.mark(p), 10);
  const std::vector<std::int32_t> k = c.kept();
  EXPECT_EQ(k[0], 1);
  EXPECT_EQ(k[1], 7);
  EXPECT_EQ(k[2], 29);  // 19 is only third in segment 0; segment 1 ([20, 40)) keeps its centre
  EXPECT_EQ(k[3], 30);
}

// Behind dense_from the density decays like a stride applied at every chunk: most of the floor
// sits after dense_from, the rest thins with age.
TEST(SegmentFloor, TheDecayedPastGetsFewerCells) {
  cells c(1000);
  segment_floor_params p;
  p.floor = 100;
  p.dense_from = 900;
  p.past_density = 0.0;
  p.decay = 100.0;
  p.exponential = true;
  EXPECT_EQ(c.mark(p), 100);
  std::int32_t after = 0, old = 0;
  for (const std::int32_t q : c.kept()) {
    after += q >= 900 ? 1 : 0;
    old += q < 600 ? 1 : 0;
  }
  // Weights: 100 frames ahead, 100 (1 - e^-9) behind: about half the floor each side.
  EXPECT_NEAR(after, 50, 2);
  EXPECT_LE(old, 4);  // weight of [0, 600): 100 (e^-3 - e^-9), about 2.5 cells
}

}  // namespace
