// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/core/online_softmax.hpp>
#include <cmath>
#include <vector>

namespace {

TEST(OnlineSoftmax, SplitAndMergeEqualsTwoPassSoftmax) {
  const std::vector<float> x = {0.3f, -2.0f, 5.0f, 4.5f, -0.1f, 80.0f, 79.0f};
  double m = -1e30, sum = 0.0;
  for (float v : x) m = std::fmax(m, v);
  for (float v : x) sum += std::exp(v - m);
  audiokv::core::softmax_state left, right;
  for (size_t i = 0; i < 3; ++i) left.add(x[i]);
  for (size_t i = 3; i < x.size(); ++i) right.add(x[i]);
  left.merge(right);
  for (float v : x) EXPECT_NEAR(left.probability(v), std::exp(v - m) / sum, 1e-6);
}

TEST(OnlineSoftmax, EmptyStateIsMergeIdentity) {
  audiokv::core::softmax_state a, empty;
  a.add(1.0f);
  a.add(2.0f);
  const auto before = a;
  a.merge(empty);
  EXPECT_FLOAT_EQ(a.max, before.max);
  EXPECT_FLOAT_EQ(a.sum, before.sum);
}

}  // namespace
