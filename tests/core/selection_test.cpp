// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/core/selection.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using audiokv::core::evicts_before;
using audiokv::core::evicts_before_by;
using audiokv::core::ratio_count;

/// A float with the given IEEE-754 bits.
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// Every class of float a score can be: NaNs of both signs and payloads, infinities, the
/// extremes, subnormals and both zeros.
std::vector<float> every_kind_of_float() {
  const float inf = std::numeric_limits<float>::infinity();
  const float den = std::numeric_limits<float>::denorm_min();
  const float max = std::numeric_limits<float>::max();
  return {std::numeric_limits<float>::quiet_NaN(),
          -std::numeric_limits<float>::quiet_NaN(),
          std::numeric_limits<float>::signaling_NaN(),
          from_bits(0x7FFFFFFFu),  // the NaN whose ordered bits used to be the "excluded" key
          from_bits(0xFFC00001u),
          -inf,
          -max,
          -1.0f,
          -den,
          -0.0f,
          0.0f,
          den,
          0.00158f,
          0.00198f,
          1.0f,
          max,
          inf};
}

TEST(Selection, LowerScoreGoesFirst) {
  EXPECT_TRUE(evicts_before(0.1f, 9, 0.2f, 1));
  EXPECT_FALSE(evicts_before(0.2f, 1, 0.1f, 9));
}

TEST(Selection, TiesEvictTheOlderCellFirst) {
  EXPECT_TRUE(evicts_before(0.5f, 3, 0.5f, 4));
  EXPECT_FALSE(evicts_before(0.5f, 4, 0.5f, 3));
  EXPECT_FALSE(evicts_before(0.5f, 4, 0.5f, 4));  // strict weak order
}

// std::nth_element and std::sort need a strict weak order: irreflexive, asymmetric, transitive,
// and "neither before the other" transitive too. NaN broke the last one (NaN ~ 1 and NaN ~ 2,
// but 1 before 2), which is undefined behaviour in the selection of every backend.
TEST(Selection, IsAStrictWeakOrderOnEveryFloatIncludingNaN) {
  const auto v = every_kind_of_float();
  const auto n = static_cast<std::int32_t>(v.size());
  const auto before = [&](std::int32_t a, std::int32_t pa, std::int32_t b, std::int32_t pb) {
    return evicts_before(v[a], pa, v[b], pb);
  };
  for (std::int32_t a = 0; a < n; ++a) {
    for (std::int32_t pa = 0; pa < 2; ++pa) {
      ASSERT_FALSE(before(a, pa, a, pa)) << v[a];
      for (std::int32_t b = 0; b < n; ++b) {
        for (std::int32_t pb = 0; pb < 2; ++pb) {
          const bool ab = before(a, pa, b, pb), ba = before(b, pb, a, pa);
          ASSERT_FALSE(ab && ba) << v[a] << "@" << pa << " " << v[b] << "@" << pb;
          // A total order on (score class, position): distinct pairs always compare.
          const bool same = (v[a] == v[b] || (std::isnan(v[a]) && std::isnan(v[b]))) && pa == pb;
          ASSERT_EQ(ab || ba, !same) << v[a] << "@" << pa << " " << v[b] << "@" << pb;
          for (std::int32_t c = 0; c < n; ++c) {
            for (std::int32_t pc = 0; pc < 2; ++pc) {
              if (ab && before(b, pb, c, pc)) {
                ASSERT_TRUE(before(a, pa, c, pc));
              }
              const bool ab_tie = !ab && !ba;
              const bool bc_tie = !before(b, pb, c, pc) && !before(c, pc, b, pb);
              if (ab_tie && bc_tie) {
                ASSERT_FALSE(before(a, pa, c, pc) || before(c, pc, a, pa));
              }
            }
          }
        }
      }
    }
  }
}

TEST(Selection, NanIsLowestAndZerosAreEqual) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(evicts_before(nan, 9, -inf, 0));  // NaN before any number, position aside
  EXPECT_FALSE(evicts_before(-inf, 0, nan, 9));
  EXPECT_TRUE(evicts_before(-nan, 1, nan, 2));  // every NaN equal: by position
  EXPECT_FALSE(evicts_before(nan, 2, -nan, 1));
  EXPECT_TRUE(evicts_before(0.0f, 1, -0.0f, 2));  // -0 == +0: by position
  EXPECT_TRUE(evicts_before(-0.0f, 1, 0.0f, 2));
  EXPECT_FALSE(evicts_before(-0.0f, 2, 0.0f, 1));
  EXPECT_TRUE(evicts_before(-inf, 5, -std::numeric_limits<float>::max(), 0));
  EXPECT_TRUE(evicts_before(std::numeric_limits<float>::max(), 5, inf, 0));
  // The same order on doubles (the baselines' accumulated attention).
  EXPECT_TRUE(evicts_before_by(std::nan(""), 7, 0.0, 0));
  EXPECT_FALSE(evicts_before_by(0.0, 0, std::nan(""), 7));
  EXPECT_TRUE(evicts_before_by(-0.0, 1, 0.0, 2));
}

// The cells a partition picks with NaN in every third cell: the NaN cells go first (oldest
// first among them), then the lowest numbers; no number kept is below a number evicted.
TEST(Selection, NthElementWithNanCellsPicksNanThenTheLowestNumbers) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.0f, 0.004f);
  const std::int32_t n = 300;
  std::vector<float> score(n);
  for (std::int32_t i = 0; i < n; ++i) {
    score[i] = i % 3 == 0 ? std::numeric_limits<float>::quiet_NaN() : u(rng);
  }
  for (const std::int32_t k : {50, 100, 150, 299}) {
    std::vector<std::int32_t> order(n);
    for (std::int32_t i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::nth_element(
        order.begin(), order.begin() + (k - 1), order.end(),
        [&](std::int32_t a, std::int32_t b) { return evicts_before(score[a], a, score[b], b); });
    std::vector<std::uint8_t> evicted(n, 0);
    for (std::int32_t i = 0; i < k; ++i) evicted[order[i]] = 1;
    const std::int32_t nans = (n + 2) / 3;
    for (std::int32_t i = 0; i < n; ++i) {
      if (std::isnan(score[i])) {
        // The first min(k, nans) NaN cells by position.
        ASSERT_EQ(evicted[i] != 0, i / 3 < std::min(k, nans)) << "k " << k << " NaN cell " << i;
        continue;
      }
      for (std::int32_t j = 0; j < n; ++j) {
        if (std::isnan(score[j]) || evicted[i] == 0 || evicted[j] != 0) continue;
        ASSERT_TRUE(score[i] < score[j] || (score[i] == score[j] && i < j))
            << "evicted " << score[i] << "@" << i << ", kept " << score[j] << "@" << j;
      }
    }
  }
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
