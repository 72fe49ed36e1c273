// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/core/selection.hpp>
#include <audiokv/core/selection_key.hpp>
#include <audiokv/cpu/reference.hpp>
#include <audiokv/policy/detail/radix_select.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using namespace audiokv::core;

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::vector<float> awkward_scores() {
  const float inf = std::numeric_limits<float>::infinity();
  const float den = std::numeric_limits<float>::denorm_min();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return {-inf,
          -1e30f,
          -1.0f,
          -den,
          -0.0f,
          0.0f,
          den,
          1e-38f,
          0.25f,
          0.3f,
          1.0f,
          3e38f,
          inf,
          nan,
          -nan,
          from_bits(0x7FFFFFFFu),
          from_bits(0x7F800001u),
          from_bits(0xFFFFFFFFu)};
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
  EXPECT_EQ(pairs, static_cast<int>(s.size() * s.size() * 64));
}

TEST(SelectionKey, EveryNanMapsBelowEveryNumberAndNoKeyIsExcluded) {
  for (const float x : awkward_scores()) {
    const std::uint32_t key = ordered_score_bits(x);
    EXPECT_LT(key, excluded_score_bits) << x;  // a NaN candidate is never taken as excluded
    if (std::isnan(x)) {
      EXPECT_EQ(key, 0u);
    } else {
      EXPECT_GT(key, ordered_score_bits(std::numeric_limits<float>::quiet_NaN())) << x;
    }
  }
  EXPECT_EQ(ordered_score_bits(-0.0f), ordered_score_bits(0.0f));
  EXPECT_EQ(ordered_key_of_bits(0x80000000u), ordered_score_bits(0.0f));
}

/// The k lowest of the candidates by the device's rule: sort the 64-bit keys of
/// core/selection_key.hpp (what cuda::select_lowest does with CUB's radix sort) and take k.
std::vector<std::uint8_t> by_sorted_keys(const std::vector<float>& scores, std::int32_t k) {
  const auto n = static_cast<std::int32_t>(scores.size());
  const std::int32_t bits = bits_for(static_cast<std::uint32_t>(n));
  std::vector<std::uint64_t> keys(n);
  for (std::int32_t j = 0; j < n; ++j) {
    keys[j] = selection_key(0, ordered_score_bits(scores[j]), static_cast<std::uint32_t>(j), bits);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<std::uint8_t> evict(n, 0);
  for (std::int32_t r = 0; r < k; ++r) evict[key_slot(keys[r], bits)] = 1;
  return evict;
}

// NaN in every third cell: the CPU reference (a partition by evicts_before), the host radix
// select of the AudioKV planner and the device's key sort pick the same cells.
TEST(SelectionKey, CpuReferenceRadixSelectAndKeySortAgreeWithNanScores) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 0.004f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int trial = 0; trial < 40; ++trial) {
    const std::int32_t n = 30 + trial * 17;
    std::vector<float> scores(n);
    for (std::int32_t j = 0; j < n; ++j) {
      scores[j] = j % 3 == trial % 3 ? (j % 2 == 0 ? nan : -nan) : u(rng);
      if (trial % 5 == 0 && j % 7 == 0) scores[j] = j % 2 == 0 ? -0.0f : 0.0f;
    }
    const std::int32_t k = 1 + (trial * 13) % n;
    std::vector<std::uint8_t> reference(n, 0);
    audiokv::cpu::reference::select_lowest(scores.data(), nullptr, 1, n, n, &k, reference.data());
    ASSERT_EQ(reference, by_sorted_keys(scores, k)) << "trial " << trial;
    std::vector<std::int32_t> slots(n);
    for (std::int32_t j = 0; j < n; ++j) slots[j] = j;
    std::vector<std::uint32_t> bits(n);
    std::vector<std::uint8_t> radix(n, 0);
    audiokv::policy::detail::radix_select_lowest(scores.data(), slots.data(), n, k, bits.data(),
                                                 radix.data());
    ASSERT_EQ(reference, radix) << "trial " << trial;
  }
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
