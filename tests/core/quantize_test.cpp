// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/core/quantize.hpp>
#include <cmath>
#include <random>

namespace {

using namespace audiokv::core;

TEST(Quantize, ErrorIsAtMostHalfAStep) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  float row[64], max_abs = 0.0f;
  for (float& v : row) {
    v = normal(rng);
    max_abs = std::fmax(max_abs, std::fabs(v));
  }
  const float scale = int8_scale(max_abs);
  for (float v : row) {
    const float back = dequantize_int8(quantize_int8(v, scale), scale);
    EXPECT_LE(std::fabs(back - v), 0.5f * scale * 1.0001f);
  }
}

TEST(Quantize, ExtremesMapToPlusMinus127AndZeroRowsStayZero) {
  EXPECT_EQ(quantize_int8(3.0f, int8_scale(3.0f)), 127);
  EXPECT_EQ(quantize_int8(-3.0f, int8_scale(3.0f)), -127);
  EXPECT_EQ(int8_scale(0.0f), 1.0f);
  EXPECT_EQ(quantize_int8(0.0f, int8_scale(0.0f)), 0);
}

// Found by store_fuzzer: max / 127 underflowed to 0 for a subnormal row, so every value
// dequantised to 0. Tiny rows now use scale = max and keep the half-step bound.
TEST(Quantize, TinyRowsKeepTheHalfStepBound) {
  for (const float max_abs : {1.4013e-45f, 1e-40f, 1e-38f, 1.2e-36f, 1.6e-36f}) {
    const float scale = int8_scale(max_abs);
    EXPECT_GT(scale, 0.0f) << max_abs;
    for (const float v : {max_abs, -max_abs, 0.5f * max_abs, 0.0f}) {
      const float back = dequantize_int8(quantize_int8(v, scale), scale);
      EXPECT_LE(std::fabs(back - v), 0.5f * scale * 1.0001f) << max_abs << " " << v;
    }
  }
  EXPECT_EQ(quantize_int8(std::nanf(""), 1.0f), 0);
}

}  // namespace
