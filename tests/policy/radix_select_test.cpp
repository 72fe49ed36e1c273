// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/core/selection.hpp>
#include <audiokv/policy/detail/radix_select.hpp>
#include <cmath>
#include <random>
#include <vector>

namespace {

// Reference: sort by evicts_before and take the first k.
std::vector<std::uint8_t> reference(const std::vector<float>& score,
                                    const std::vector<std::int32_t>& slots, std::int32_t k) {
  auto order = slots;
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return audiokv::core::evicts_before(score[a], a, score[b], b);
  });
  std::vector<std::uint8_t> mask(score.size(), 0);
  for (std::int32_t i = 0; i < k; ++i) mask[order[i]] = 1;
  return mask;
}

TEST(RadixSelect, EqualsSortedSelectionWithTiesAndNegatives) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const std::int32_t n = 1 + static_cast<std::int32_t>(rng() % 400);
    std::vector<float> score(n);
    const int kind = trial % 3;
    for (auto& s : score) {
      if (kind == 0) s = static_cast<float>(rng() % 5) * 0.5f - 1.0f;  // heavy ties, negatives
      if (kind == 1) s = std::uniform_real_distribution<float>(-1e-30f, 1e-30f)(rng);
      if (kind == 2) s = std::uniform_real_distribution<float>(0.0f, 1e6f)(rng);
    }
    std::vector<std::int32_t> slots;
    for (std::int32_t j = 0; j < n; ++j) {
      if (rng() % 4 != 0) slots.push_back(j);  // a candidate subset, ascending
    }
    const auto m = static_cast<std::int32_t>(slots.size());
    const std::int32_t k = m == 0 ? 0 : static_cast<std::int32_t>(rng() % (m + 1));
    std::vector<std::uint8_t> mask(n, 0);
    std::vector<std::uint32_t> bits(n);
    audiokv::policy::detail::radix_select_lowest(score.data(), slots.data(), m, k, bits.data(),
                                                 mask.data());
    ASSERT_EQ(mask, reference(score, slots, k)) << "trial " << trial << " n " << n << " k " << k;
  }
}

// Long inputs (the partial histograms), scores crowded into one first-digit bucket (every key
// shares the prefix) or spread (few do), and k on both sides of n / 4 (both marking passes).
TEST(RadixSelect, EqualsSortedSelectionOnLongCrowdedInputs) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 24; ++trial) {
    const std::int32_t n = 4096 + static_cast<std::int32_t>(rng() % 12000);
    std::vector<float> score(n);
    const int kind = trial % 3;
    for (auto& s : score) {
      if (kind == 0) s = 2.0f + std::uniform_real_distribution<float>(0.0f, 0.4f)(rng);
      if (kind == 1) s = 2.0f + static_cast<float>(rng() % 7) * 0.0625f;  // crowded ties
      if (kind == 2) s = std::uniform_real_distribution<float>(-1e6f, 1e6f)(rng);
    }
    std::vector<std::int32_t> slots;
    for (std::int32_t j = 0; j < n; ++j) {
      if (rng() % 8 != 0) slots.push_back(j);
    }
    const auto m = static_cast<std::int32_t>(slots.size());
    const std::int32_t k = trial % 2 == 0 ? static_cast<std::int32_t>(rng() % (m / 4))
                                          : m / 4 + static_cast<std::int32_t>(rng() % (m - m / 4));
    std::vector<std::uint8_t> mask(n, 0);
    std::vector<std::uint32_t> bits(n);
    audiokv::policy::detail::radix_select_lowest(score.data(), slots.data(), m, k, bits.data(),
                                                 mask.data());
    ASSERT_EQ(mask, reference(score, slots, k)) << "trial " << trial << " n " << n << " k " << k;
  }
}

// Half the keys within a few units in the last place of one value, the rest spread, and k
// inside the crowd: more keys share the first digits than the select's stack buffer holds, so
// the later digits count every key until the crowd is narrowed down.
TEST(RadixSelect, EqualsSortedSelectionWhenACrowdOutgrowsTheBuffer) {
  std::mt19937 rng(31);
  for (int trial = 0; trial < 12; ++trial) {
    const std::int32_t n = 20000 + static_cast<std::int32_t>(rng() % 5000);
    std::vector<float> score(n);
    for (auto& s : score) {
      if (rng() % 2 == 0) {
        s = std::nextafter(3.0f, 4.0f);
        for (std::uint32_t step = rng() % 40; step > 0; --step) s = std::nextafter(s, 4.0f);
      } else {
        s = std::uniform_real_distribution<float>(0.0f, 100.0f)(rng);
      }
    }
    std::vector<std::int32_t> slots;
    for (std::int32_t j = 0; j < n; ++j) {
      if (rng() % 8 != 0) slots.push_back(j);
    }
    const auto m = static_cast<std::int32_t>(slots.size());
    std::int32_t below = 0;  // candidates below the crowd
    for (const std::int32_t j : slots) below += score[j] < 3.0f;
    const std::int32_t k = below + 1 + static_cast<std::int32_t>(rng() % (m / 3));
    std::vector<std::uint8_t> mask(n, 0);
    std::vector<std::uint32_t> bits(n);
    audiokv::policy::detail::radix_select_lowest(score.data(), slots.data(), m, k, bits.data(),
                                                 mask.data());
    ASSERT_EQ(mask, reference(score, slots, k)) << "trial " << trial << " n " << n << " k " << k;
  }
}

}  // namespace
