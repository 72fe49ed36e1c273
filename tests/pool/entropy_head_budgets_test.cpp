// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/error.hpp>
#include <audiokv/pool/entropy_head_budgets.hpp>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace {

using audiokv::entropy_head_budgets;
using audiokv::span;

std::vector<float> uniform(std::int32_t attended, std::int32_t cells) {
  std::vector<float> p(static_cast<std::size_t>(cells), 0.0f);
  for (std::int32_t j = 0; j < attended; ++j) p[static_cast<std::size_t>(j)] = 1.0f / attended;
  return p;
}

TEST(EntropyHeadBudgets, MeanEntropyIsTheLogOfTheCellsRead) {
  entropy_head_budgets budgets(2);
  const std::vector<float> sharp = uniform(10, 200), spread = uniform(100, 200);
  for (int step = 0; step < 3; ++step) {
    budgets.observe(0, span<const float>(sharp.data(), sharp.size()));
    budgets.observe(1, span<const float>(spread.data(), spread.size()));
  }
  EXPECT_EQ(budgets.steps(0), 3);
  const std::vector<double> h = budgets.mean_entropy();
  EXPECT_NEAR(h[0], std::log(10.0), 1e-5);
  EXPECT_NEAR(h[1], std::log(100.0), 1e-5);
}

TEST(EntropyHeadBudgets, SplitIsExactAndFollowsThePerplexity) {
  const std::vector<float> sharp = uniform(10, 200), spread = uniform(1000, 1000);
  for (const double exponent : {-1.0, -0.25, 0.0, 0.5}) {
    entropy_head_budgets budgets(3, exponent);
    budgets.observe(0, span<const float>(sharp.data(), sharp.size()));
    budgets.observe(1, span<const float>(spread.data(), spread.size()));
    budgets.observe(2, span<const float>(spread.data(), spread.size()));
    const std::vector<std::int32_t> b = budgets.split(301, 1);
    EXPECT_EQ(std::accumulate(b.begin(), b.end(), std::int64_t{0}), 301) << exponent;
    EXPECT_EQ(b[1], b[2]) << exponent;  // the same attention, the same share
    // w0 / w1 = (10 / 1000)^G on the cells above the floors.
    const double ratio = std::pow(10.0 / 1000.0, exponent);
    const double exact0 = 1.0 + 298.0 * ratio / (ratio + 2.0);
    EXPECT_LT(std::abs(b[0] - exact0), 1.0) << exponent;
  }
}

TEST(EntropyHeadBudgets, BadCallsNameTheArgumentAndChangeNothing) {
  EXPECT_THROW(entropy_head_budgets(0), audiokv::error);
  EXPECT_THROW(entropy_head_budgets(2, std::nan("")), audiokv::error);
  entropy_head_budgets budgets(2);
  const std::vector<float> p = uniform(4, 8);
  budgets.observe(0, span<const float>(p.data(), p.size()));
  try {
    budgets.observe(2, span<const float>(p.data(), p.size()));
    ADD_FAILURE() << "head 2 of 2 was accepted";
  } catch (const audiokv::error& e) {
    EXPECT_NE(std::string(e.what()).find("head"), std::string::npos) << e.what();
  }
  EXPECT_EQ(budgets.steps(0), 1);
  EXPECT_EQ(budgets.steps(1), 0);
  EXPECT_FALSE(budgets.all_observed());
  try {
    (void)budgets.split(100);  // head 1 observed nothing
    ADD_FAILURE() << "a split with an unobserved head was accepted";
  } catch (const audiokv::error& e) {
    EXPECT_NE(std::string(e.what()).find("steps"), std::string::npos) << e.what();
  }
  budgets.observe(1, span<const float>(p.data(), p.size()));
  EXPECT_TRUE(budgets.all_observed());
  EXPECT_THROW((void)budgets.split(1, 1), audiokv::error);  // below one cell per head
  budgets.reset();
  EXPECT_FALSE(budgets.all_observed());
  EXPECT_EQ(budgets.steps(0), 0);
  EXPECT_THROW((void)budgets.mean_entropy(), audiokv::error);
}

}  // namespace
