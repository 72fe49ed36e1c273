// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/core/entropy.hpp>
#include <cmath>

namespace {

using audiokv::core::entropy_accumulator;
using audiokv::core::entropy_eviction_ratio;

TEST(Entropy, UniformScoresAreMaximal) {
  entropy_accumulator acc;
  for (int i = 0; i < 8; ++i) acc.add(0.3f);
  EXPECT_NEAR(acc.normalized_entropy(), 1.0f, 1e-6f);
  EXPECT_NEAR(entropy_eviction_ratio(acc.normalized_entropy(), 0.05f, 0.2f), 0.05f, 1e-6f);
}

TEST(Entropy, OnePeakIsMinimal) {
  entropy_accumulator acc;
  acc.add(1.0f);
  for (int i = 0; i < 7; ++i) acc.add(0.0f);
  EXPECT_NEAR(acc.normalized_entropy(), 0.0f, 1e-6f);
  EXPECT_NEAR(entropy_eviction_ratio(acc.normalized_entropy(), 0.05f, 0.2f), 0.25f, 1e-6f);
}

TEST(Entropy, MatchesShannonFormula) {
  const float s[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  entropy_accumulator acc;
  double h = 0.0;
  for (float v : s) {
    acc.add(v);
    const double p = v / 10.0;
    h -= p * std::log(p);
  }
  EXPECT_NEAR(acc.normalized_entropy(), h / std::log(4.0), 1e-5);
  EXPECT_NEAR(acc.entropy(), h, 1e-5);  // nats, the scores' scale divided out
}

TEST(Entropy, NatsOfUniformAndEmptyScores) {
  entropy_accumulator uniform;
  for (int i = 0; i < 300; ++i) uniform.add(1.0f / 300.0f);
  EXPECT_NEAR(uniform.entropy(), std::log(300.0), 1e-4);  // perplexity = the cells attended
  entropy_accumulator empty;
  empty.add(0.0f);
  EXPECT_EQ(empty.entropy(), 0.0);
  entropy_accumulator one;
  one.add(0.7f);
  EXPECT_EQ(one.entropy(), 0.0);
}

TEST(Entropy, RatioIsClamped) {
  EXPECT_EQ(entropy_eviction_ratio(0.0f, 0.95f, 0.2f), 1.0f);
  EXPECT_EQ(entropy_eviction_ratio(1.0f, 0.0f, 0.0f), 0.0f);
}

TEST(Entropy, DegenerateInputsCountAsNoInformation) {
  entropy_accumulator empty;
  EXPECT_EQ(empty.normalized_entropy(), 1.0f);
  entropy_accumulator zeros;
  zeros.add(0.0f);
  zeros.add(0.0f);
  EXPECT_EQ(zeros.normalized_entropy(), 1.0f);
}

}  // namespace
