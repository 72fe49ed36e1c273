// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/core/median.hpp>
#include <random>
#include <vector>

namespace {

// numpy.median over numpy.pad(x, W/2, mode="edge") windows: the specification's reference.
float reference_median(const std::vector<float>& x, int i, int w) {
  std::vector<float> window;
  const int n = static_cast<int>(x.size());
  for (int k = i - w / 2; k <= i + w / 2; ++k) window.push_back(x[std::clamp(k, 0, n - 1)]);
  std::sort(window.begin(), window.end());
  return window[w / 2];
}

template <int W>
void expect_matches_reference(unsigned seed, int n) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> coarse(0, 6);  // many ties
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(coarse(rng)) * 0.25f;
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(audiokv::core::median_at<W>(x.data(), n, i), reference_median(x, i, W))
        << "W=" << W << " i=" << i << " n=" << n;
  }
}

TEST(Median, FiveMatchesSortedWindowWithEdgePadding) {
  for (int n : {1, 2, 3, 4, 5, 6, 17, 100}) expect_matches_reference<5>(7u + n, n);
}

TEST(Median, OtherOddWidthsMatchReference) {
  expect_matches_reference<1>(1, 20);
  expect_matches_reference<3>(2, 20);
  expect_matches_reference<7>(3, 50);
  expect_matches_reference<9>(4, 3);
  expect_matches_reference<31>(5, 80);
}

TEST(Median, SeedExampleSuppressesAlternatingSilence) {
  // Seed figure 1: phoneme / silence alternation; the median keeps a flat level, not spikes.
  const std::vector<float> raw = {0.82f, 0.15f, 0.91f, 0.08f, 0.87f, 0.12f};
  const int n = static_cast<int>(raw.size());
  // Window of slot 1 with edge padding: {0.82, 0.82, 0.15, 0.91, 0.08} -> 0.82.
  EXPECT_FLOAT_EQ(audiokv::core::median_at<5>(raw.data(), n, 1), 0.82f);
  // Slot 3: {0.15, 0.91, 0.08, 0.87, 0.12} -> 0.15.
  EXPECT_FLOAT_EQ(audiokv::core::median_at<5>(raw.data(), n, 3), 0.15f);
}

TEST(Median, OfFiveIsOrderIndependent) {
  std::vector<float> v = {5, 1, 4, 2, 3};
  std::sort(v.begin(), v.end());
  do {
    ASSERT_EQ(audiokv::core::median_of_5(v[0], v[1], v[2], v[3], v[4]), 3.0f);
  } while (std::next_permutation(v.begin(), v.end()));
}

}  // namespace
