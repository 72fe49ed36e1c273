// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/core/selection.hpp>
#include <audiokv/core/selection_key.hpp>
#include <cstdint>
#include <limits>
#include <vector>

namespace {

using namespace audiokv::core;

std::vector<float> awkward_scores() {
  const float inf = std::numeric_limits<float>::infinity();
  const float den = std::numeric_limits<float>::denorm_min();
  return {-inf, -1e30f, -1.0f, -den, -0.0f, 0.0f, den, 1e-38f, 0.25f, 0.3f, 1.0f, 3e38f, inf};
}

TEST(SelectionKey, OrderEqualsEvictsBeforeForEveryPair) {
  const auto s = awkward_scores();
  const std::int32_t slot_bits = bits_for(8);
  int pairs = 0;
  for (float a : s)
    for (float b : s)
      for (std::int32_t pa = 0; pa < 8; ++pa)
        for (std::int32_t pb = 0; pb < 8; ++pb) {
          const auto ka = selection_key(3, ordered_score_bits(a), pa, slot_bits);
          const auto kb = selection_key(3, ordered_score_bits(b), pb, slot_bits);
          ASSERT_EQ(ka < kb, evicts_before(a, pa, b, pb))
              << a << "@" << pa << " vs " << b << "@" << pb;
          ++pairs;
        }
  EXPECT_EQ(pairs, 13 * 13 * 64);
}

TEST(SelectionKey, SegmentDominatesAndFieldsRoundTrip) {
  const std::int32_t bits = bits_for(131072);
  EXPECT_EQ(bits, 17);
  const auto lo = selection_key(0, excluded_score_bits, 131071, bits);
  const auto hi = selection_key(1, ordered_score_bits(-1e30f), 0, bits);
  EXPECT_LT(lo, hi);
  EXPECT_EQ(key_slot(lo, bits), 131071);
  EXPECT_EQ(key_score_bits(hi, bits), ordered_score_bits(-1e30f));
  EXPECT_GT(excluded_score_bits, ordered_score_bits(std::numeric_limits<float>::infinity()));
  EXPECT_TRUE(selection_key_fits(8, 131072));
  EXPECT_FALSE(selection_key_fits(1u << 20, 1u << 20));
  EXPECT_EQ(bits_for(0), 0);
  EXPECT_EQ(bits_for(1), 0);
  EXPECT_EQ(bits_for(2), 1);
  EXPECT_EQ(bits_for(5), 3);
}

}  // namespace
