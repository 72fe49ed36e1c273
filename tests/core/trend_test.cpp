// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include <audiokv/core/trend.hpp>

namespace {

using audiokv::core::trend_start;
using audiokv::core::trend_step;

TEST(Trend, HandComputedHoltSteps) {
  // m = 1, 2, 3 with w = 0.6, g = 0.3:
  // s1 = 0.6*2 + 0.4*(1 + 0) = 1.6, d1 = 0.3*(0.6) = 0.18
  // s2 = 0.6*3 + 0.4*(1.6 + 0.18) = 2.512, d2 = 0.3*(0.912) + 0.7*0.18 = 0.3996
  auto s = trend_start(1.0f);
  s = trend_step(s, 2.0f, 0.6f, 0.3f);
  EXPECT_NEAR(s.level, 1.6f, 1e-6f);
  EXPECT_NEAR(s.slope, 0.18f, 1e-6f);
  s = trend_step(s, 3.0f, 0.6f, 0.3f);
  EXPECT_NEAR(s.level, 2.512f, 1e-6f);
  EXPECT_NEAR(s.slope, 0.3996f, 1e-6f);
}

TEST(Trend, ConstantInputIsAFixedPoint) {
  auto s = trend_start(0.5f);
  for (int i = 0; i < 50; ++i) s = trend_step(s, 0.5f, 0.6f, 0.3f);
  EXPECT_FLOAT_EQ(s.level, 0.5f);
  EXPECT_FLOAT_EQ(s.slope, 0.0f);
}

TEST(Trend, SustainedRiseScoresAboveALoneSpikeOfTheSameHeight) {
  // Sustained importance ends higher relative to its last input than a one-cell spike does.
  auto rising = trend_start(0.0f);
  for (float m : {0.25f, 0.5f, 0.75f, 1.0f}) rising = trend_step(rising, m, 0.6f, 0.3f);
  auto spike = trend_start(0.0f);
  for (float m : {0.0f, 0.0f, 0.0f, 1.0f}) spike = trend_step(spike, m, 0.6f, 0.3f);
  EXPECT_GT(rising.level, spike.level);
}

TEST(Trend, RowClampsAFallingExtrapolationAtZeroAndMayRunInPlace) {
  // m = 1, 0, 0, 0 with w = 0.6, g = 0.3:
  // s1 = 0.4*(1 + 0) = 0.4,          d1 = 0.3*(0.4 - 1) = -0.18
  // s2 = 0.4*(0.4 - 0.18) = 0.088,   d2 = 0.3*(0.088 - 0.4) + 0.7*(-0.18) = -0.2196
  // s3 = 0.4*(0.088 - 0.2196) = -0.05264, clamped to 0
  const std::array<float, 4> m{1.0f, 0.0f, 0.0f, 0.0f};
  std::array<float, 4> out{-1.0f, -1.0f, -1.0f, -1.0f};
  audiokv::core::trend_row(m.data(), out.data(), 4, 0.6f, 0.3f);
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_NEAR(out[1], 0.4f, 1e-6f);
  EXPECT_NEAR(out[2], 0.088f, 1e-6f);
  EXPECT_EQ(out[3], 0.0f);
  std::array<float, 4> in_place = m;
  audiokv::core::trend_row(in_place.data(), in_place.data(), 4, 0.6f, 0.3f);
  EXPECT_EQ(in_place, out);
  audiokv::core::trend_row(m.data(), out.data(), 0, 0.6f, 0.3f);  // empty row: untouched
  EXPECT_FLOAT_EQ(out[0], 1.0f);
}

}  // namespace

namespace {

// The recurrence written from the formula in core/trend.hpp, in its operation order:
// s = w m + (1 - w)(s + d); d = g (s_new - s) + (1 - g) d; out = max(s, 0).
std::vector<float> holt_reference(const std::vector<float>& m, float w, float g) {
  std::vector<float> out(m.size());
  if (m.empty()) return out;
  float s = m[0], d = 0.0f;
  out[0] = s > 0.0f ? s : 0.0f;
  for (std::size_t j = 1; j < m.size(); ++j) {
    const float level = w * m[j] + (1.0f - w) * (s + d);
    d = g * (level - s) + (1.0f - g) * d;
    s = level;
    out[j] = s > 0.0f ? s : 0.0f;
  }
  return out;
}

TEST(Trend, RowsSideBySideMatchTheRecurrenceBitForBitWhateverTheirLengths) {
  // Up to 19 rows (groups of 8, 4, 2 and a single row), lengths differing within a group
  // (the common prefix runs side by side, each tail alone), including empty and one-cell rows.
  std::uint32_t seed = 7;
  const auto next = [&] {
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    return static_cast<float>(seed >> 8) * (1.0f / 16777216.0f) - 0.3f;  // some negative
  };
  for (std::int32_t rows = 1; rows <= 19; ++rows) {
    std::vector<std::vector<float>> in(rows), out(rows);
    std::vector<const float*> in_ptr(rows);
    std::vector<float*> out_ptr(rows);
    std::vector<std::int32_t> n(rows);
    for (std::int32_t r = 0; r < rows; ++r) {
      n[r] = (r * 37 + rows * 11) % 97;
      if (rows == 5 && r == 2) n[r] = 0;
      if (rows == 9 && r == 8) n[r] = 1;
      in[r].resize(n[r]);
      for (float& v : in[r]) v = next();
      out[r].assign(n[r] + 1, -7.0f);  // one sentinel past the row
      in_ptr[r] = in[r].data();
      out_ptr[r] = out[r].data();
    }
    audiokv::core::trend_rows(in_ptr.data(), out_ptr.data(), n.data(), rows, 0.6f, 0.3f);
    for (std::int32_t r = 0; r < rows; ++r) {
      const auto expected = holt_reference(in[r], 0.6f, 0.3f);
      ASSERT_TRUE(expected.empty() ||
                  std::memcmp(out[r].data(), expected.data(), expected.size() * sizeof(float)) == 0)
          << rows << " rows, row " << r << " of " << n[r] << " cells";
      EXPECT_EQ(out[r][n[r]], -7.0f) << "wrote past row " << r;
    }
  }
}

}  // namespace
