// SPDX-License-Identifier: Apache-2.0
// The kept-set criteria of the kvpress fixture reader (baselines/kvpress_fixture.hpp) on
// hand-worked cases: ties resolved differently by several swaps are accepted, any set that no
// order of equal scores produces is rejected, and AdaKV ties may move cells between heads.
#include <gtest/gtest.h>

#include <vector>

#include "baselines/kvpress_fixture.hpp"

namespace {

using audiokv::test::adakv_valid;
using audiokv::test::classify_kept;
using audiokv::test::set_match;
using audiokv::test::topk_valid;

TEST(FixtureCompare, TopkTiesMayDifferBySeveralSwaps) {
  // k = 4: cell 0 (9) is above the 4th score 3; cells 1..5 tie at 3 and 3 of them are kept.
  const std::vector<float> ref = {9, 3, 3, 3, 3, 3, 1};
  EXPECT_TRUE(topk_valid({0, 1, 2, 3}, ref, 4, 0.0));
  EXPECT_TRUE(topk_valid({0, 3, 4, 5}, ref, 4, 0.0));   // two swaps against {0, 1, 2, 3}
  EXPECT_FALSE(topk_valid({1, 2, 3, 4}, ref, 4, 0.0));  // drops 9 for a tied 3
  EXPECT_FALSE(topk_valid({0, 1, 2, 6}, ref, 4, 0.0));  // keeps 1 over a tied 3
  EXPECT_FALSE(topk_valid({0, 1, 2}, ref, 4, 0.0));     // too few
  EXPECT_FALSE(topk_valid({0, 1, 2, 2}, ref, 4, 0.0));  // a duplicate is not a set of 4
  EXPECT_FALSE(topk_valid({0, 1, 2, 7}, ref, 4, 0.0));  // out of range
}

TEST(FixtureCompare, ToleranceCoversScoresThatRoundApart) {
  // 0.5f + 2^-24 rounds apart from 0.5f by one ulp: within 1e-6, not an exact tie.
  const std::vector<float> ref = {0.50000006f, 0.5f, 0.1f};
  EXPECT_FALSE(topk_valid({1}, ref, 1, 0.0));
  EXPECT_TRUE(topk_valid({1}, ref, 1, 1e-6));
  EXPECT_FALSE(topk_valid({2}, ref, 1, 1e-6));
  auto valid = [&](const std::vector<int>& s) {
    return [&ref, s](double eps) { return topk_valid(s, ref, 1, eps); };
  };
  EXPECT_EQ(classify_kept(true, valid({0}), 1e-6), set_match::exact);
  EXPECT_EQ(classify_kept(false, valid({1}), 1e-6), set_match::near_tie);
  EXPECT_EQ(classify_kept(false, valid({2}), 1e-6), set_match::mismatch);
  const std::vector<float> tied = {0.5f, 0.5f, 0.1f};
  EXPECT_EQ(classify_kept(
                false, [&](double eps) { return topk_valid({1}, tied, 1, eps); }, 1e-6),
            set_match::tie);
}

TEST(FixtureCompare, AdakvTieMovesACellBetweenHeads) {
  // alpha = 0 (n_safe 0), n_kept = 2 per head, 4 kept of the flattened {5, 1, 1 | 5, 1, 0}:
  // both 5s and two of the three tied 1s, so head 0 may keep 3 cells and head 1 only 1.
  const std::vector<std::vector<float>> ref = {{5, 1, 1}, {5, 1, 0}};
  EXPECT_TRUE(adakv_valid({{0, 1}, {0, 1}}, ref, 2, 0, 0.0));
  EXPECT_TRUE(adakv_valid({{0, 1, 2}, {0}}, ref, 2, 0, 0.0));
  EXPECT_TRUE(adakv_valid({{0, 2}, {0, 1}}, ref, 2, 0, 0.0));
  EXPECT_FALSE(adakv_valid({{0, 1}, {0, 2}}, ref, 2, 0, 0.0));     // 0 over a tied 1
  EXPECT_FALSE(adakv_valid({{0, 1, 2}, {1}}, ref, 2, 0, 0.0));     // drops a 5
  EXPECT_FALSE(adakv_valid({{0, 1, 2}, {0, 1}}, ref, 2, 0, 0.0));  // 5 kept, 4 allowed
}

TEST(FixtureCompare, AdakvSafeguardTiesAndTheFloor) {
  // n_kept = 1 per head (2 in all), n_safe = 1: each head keeps its top cell whatever the other
  // head scores; head 0's top is a tie between cells 0 and 1.
  const std::vector<std::vector<float>> ref = {{2, 2, 0}, {9, 8, 7}};
  EXPECT_TRUE(adakv_valid({{0}, {0}}, ref, 1, 1, 0.0));
  EXPECT_TRUE(adakv_valid({{1}, {0}}, ref, 1, 1, 0.0));
  EXPECT_FALSE(adakv_valid({{}, {0, 1}}, ref, 1, 1, 0.0));  // the plain global top 2
  EXPECT_TRUE(adakv_valid({{}, {0, 1}}, ref, 1, 0, 0.0));   // which alpha = 0 allows
  EXPECT_FALSE(adakv_valid({{2}, {0}}, ref, 1, 1, 0.0));
  // alpha = 1 (n_safe = n_kept = 2 of 3): each head keeps exactly its own top 2.
  EXPECT_TRUE(adakv_valid({{0, 1}, {0, 1}}, ref, 2, 2, 0.0));
  EXPECT_FALSE(adakv_valid({{0, 1, 2}, {0}}, ref, 2, 2, 0.0));
}

}  // namespace
