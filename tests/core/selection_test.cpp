// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/core/selection.hpp>

namespace {

using audiokv::core::evicts_before;
using audiokv::core::ratio_count;

TEST(Selection, LowerScoreGoesFirst) {
  EXPECT_TRUE(evicts_before(0.1f, 9, 0.2f, 1));
  EXPECT_FALSE(evicts_before(0.2f, 1, 0.1f, 9));
}

TEST(Selection, TiesEvictTheOlderCellFirst) {
  EXPECT_TRUE(evicts_before(0.5f, 3, 0.5f, 4));
  EXPECT_FALSE(evicts_before(0.5f, 4, 0.5f, 3));
  EXPECT_FALSE(evicts_before(0.5f, 4, 0.5f, 4));  // strict weak order
}

TEST(Selection, RatioCountIsCeilWithoutFloatDrift) {
  EXPECT_EQ(ratio_count(0.1f, 10), 1);  // 0.1f * 10 = 1.0000000149
  EXPECT_EQ(ratio_count(0.3f, 10), 3);
  EXPECT_EQ(ratio_count(0.25f, 10), 3);
  EXPECT_EQ(ratio_count(0.0f, 10), 0);
  EXPECT_EQ(ratio_count(1.0f, 7), 7);
  EXPECT_EQ(ratio_count(0.5f, 0), 0);
}

}  // namespace
