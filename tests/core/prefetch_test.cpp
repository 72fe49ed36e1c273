// SPDX-License-Identifier: Apache-2.0
// The prefetch formulas of core/prefetch.hpp on hand-computed values, their monotonicity and their
// int32 bounds.
#include <gtest/gtest.h>

#include <audiokv/core/prefetch.hpp>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

namespace {

using namespace audiokv::core;

constexpr std::int32_t kMax = std::numeric_limits<std::int32_t>::max();

TEST(PrefetchFormula, RateIsAnEmaOfFramesPerStep) {
  // rate' = (1 - beta) rate + beta x.
  EXPECT_FLOAT_EQ(frame_rate_update(0.0f, 10, 0.1f), 1.0f);
  EXPECT_FLOAT_EQ(frame_rate_update(1.0f, 20, 0.1f), 2.9f);  // 0.9 * 1 + 0.1 * 20
  EXPECT_FLOAT_EQ(frame_rate_update(2.9f, 0, 0.1f), 2.61f);
  EXPECT_FLOAT_EQ(frame_rate_update(7.0f, 3, 1.0f), 3.0f);  // beta 1: the last step only
  // A constant input x is a fixed point, and the EMA approaches it geometrically.
  float rate = 0.0f;
  for (int i = 0; i < 200; ++i) rate = frame_rate_update(rate, 15, 0.1f);
  EXPECT_NEAR(rate, 15.0f, 15.0f * std::pow(0.9f, 200.0f) + 1e-4f);
}

TEST(PrefetchFormula, PeakIsADecayingMaximum) {
  // peak' = max(x, decay peak).
  EXPECT_FLOAT_EQ(burst_peak_update(0.0f, 10, 0.5f), 10.0f);
  EXPECT_FLOAT_EQ(burst_peak_update(10.0f, 0, 0.5f), 5.0f);
  EXPECT_FLOAT_EQ(burst_peak_update(5.0f, 3, 0.5f), 3.0f);  // max(3, 2.5)
  EXPECT_FLOAT_EQ(burst_peak_update(3.0f, 4, 0.5f), 4.0f);
  EXPECT_FLOAT_EQ(burst_peak_update(40.0f, 0, 1.0f), 40.0f);  // decay 1: the maximum so far
  EXPECT_FLOAT_EQ(burst_peak_update(40.0f, 7, 0.0f), 7.0f);   // decay 0: the last step only
  // After k empty steps the peak is decay^k times the burst.
  float peak = burst_peak_update(0.0f, 40, 0.95f);
  for (int k = 0; k < 10; ++k) peak = burst_peak_update(peak, 0, 0.95f);
  EXPECT_NEAR(peak, 40.0f * std::pow(0.95f, 10.0f), 1e-4f);
}

TEST(PrefetchFormula, RateIsTheFloorOnceThePeakHasDecayed) {
  // One burst of 100, then silence; with decay 0.5 < 1 - beta = 0.9 the peak falls below the
  // EMA after 4 steps: peak 100 * 0.5^4 = 6.25, rate 10 * 0.9^4 = 6.561.
  float rate = frame_rate_update(0.0f, 100, 0.1f), peak = burst_peak_update(0.0f, 100, 0.5f);
  for (int k = 0; k < 4; ++k) {
    rate = frame_rate_update(rate, 0, 0.1f);
    peak = burst_peak_update(peak, 0, 0.5f);
  }
  EXPECT_FLOAT_EQ(peak, 6.25f);
  EXPECT_NEAR(rate, 6.561f, 1e-5f);
  EXPECT_DOUBLE_EQ(step_allowance(rate, peak, 0.0f, 0.0f), static_cast<double>(rate));
}

TEST(PrefetchFormula, AllowanceAddsTheMargin) {
  EXPECT_DOUBLE_EQ(step_allowance(2.0f, 4.0f, 0.0f, 0.25f), 5.0);  // max(2, 4) * 1.25
  EXPECT_DOUBLE_EQ(step_allowance(8.0f, 4.0f, 0.0f, 0.5f), 12.0);
  EXPECT_DOUBLE_EQ(step_allowance(0.0f, 0.0f, 0.0f, 3.0f), 0.0);
  // The floor: max(rate, peak, floor).
  EXPECT_DOUBLE_EQ(step_allowance(2.0f, 4.0f, 40.0f, 0.25f), 50.0);
  EXPECT_DOUBLE_EQ(step_allowance(2.0f, 44.0f, 40.0f, 0.25f), 55.0);
  EXPECT_DOUBLE_EQ(step_allowance(48.0f, 44.0f, 40.0f, 0.0f), 48.0);
}

TEST(PrefetchFormula, ForecastOnHandValues) {
  // No ceiling: need = n + ceil(H e).
  EXPECT_EQ(forecast_cells(100, 5.0, 1, kMax), 105);
  EXPECT_EQ(forecast_cells(100, 5.0, 3, kMax), 115);
  EXPECT_EQ(forecast_cells(100, 5.2, 2, kMax), 111);  // ceil(110.4)
  EXPECT_EQ(forecast_cells(0, 0.0, 4, kMax), 0);
  EXPECT_EQ(forecast_cells(7, 0.0, 4, kMax), 7);
  // Ceiling c: need = min(n + (H - 1) e, max(n, c)) + e.
  EXPECT_EQ(forecast_cells(220, 10.0, 3, 224), 234);  // min(240, 224) + 10
  EXPECT_EQ(forecast_cells(100, 10.0, 3, 224), 130);  // min(120, 224) + 10
  EXPECT_EQ(forecast_cells(300, 10.0, 3, 224), 310);  // above the ceiling: min(320, 300) + 10
  EXPECT_EQ(forecast_cells(220, 10.0, 1, 0), 230);    // H = 1: the next append only
  EXPECT_EQ(forecast_cells(220, 2.5, 2, 221), 224);   // ceil(min(222.5, 221) + 2.5)
}

TEST(PrefetchFormula, CeilToCells) {
  EXPECT_EQ(ceil_to_cells(0.0), 0);
  EXPECT_EQ(ceil_to_cells(0.5), 1);
  EXPECT_EQ(ceil_to_cells(1.0), 1);
  EXPECT_EQ(ceil_to_cells(1.000001), 2);
  EXPECT_EQ(ceil_to_cells(-3.0), 0);
  EXPECT_EQ(ceil_to_cells(std::nan("")), 0);
  EXPECT_EQ(ceil_to_cells(2147483646.5), kMax);
  EXPECT_EQ(ceil_to_cells(2147483647.0), kMax);
  EXPECT_EQ(ceil_to_cells(1e300), kMax);
  EXPECT_EQ(ceil_to_cells(std::numeric_limits<double>::infinity()), kMax);
}

TEST(PrefetchFormula, RoundUpToGranularity) {
  EXPECT_EQ(round_up_cells(0, 64), 0);
  EXPECT_EQ(round_up_cells(1, 64), 64);
  EXPECT_EQ(round_up_cells(64, 64), 64);
  EXPECT_EQ(round_up_cells(65, 64), 128);
  EXPECT_EQ(round_up_cells(65, 1), 65);
  EXPECT_EQ(round_up_cells(65, 0), 65);                  // granularity < 1 counts as 1
  EXPECT_EQ(round_up_cells(-5, 64), 0);                  // negative counts as 0
  EXPECT_EQ(round_up_cells(kMax, 64), kMax);             // 2^31 would not fit: clamped
  EXPECT_EQ(round_up_cells(kMax - 100, 64), kMax - 63);  // 33554431 * 64 still fits
  EXPECT_EQ(round_up_cells(kMax - 30, 64), kMax);        // 2^31 would not
  EXPECT_EQ(round_up_cells(kMax - 100, 1 << 30), kMax);
  EXPECT_EQ(round_up_cells(1 << 30, 1 << 30), 1 << 30);
}

TEST(PrefetchFormula, ForecastIsBoundedToInt32) {
  EXPECT_EQ(forecast_cells(kMax, 1e9, 1000, kMax), kMax);
  EXPECT_EQ(forecast_cells(kMax - 5, 3.0, 1, kMax), kMax - 2);
  EXPECT_EQ(forecast_cells(kMax - 5, 3.0, 2, kMax), kMax);
  EXPECT_EQ(forecast_cells(0, 1e300, kMax, kMax), kMax);
  EXPECT_EQ(forecast_cells(5, step_allowance(FLT_MAX, FLT_MAX, 0.0f, FLT_MAX), kMax, kMax), kMax);
  EXPECT_EQ(forecast_cells(5, std::numeric_limits<double>::infinity(), 1, kMax), kMax);
  // A corrupt (NaN or negative) allowance asks for nothing beyond the cells held.
  EXPECT_EQ(forecast_cells(5, std::nan(""), 3, kMax), 5);
  EXPECT_EQ(forecast_cells(5, -7.0, 3, kMax), 5);
  // Out-of-range counts are clamped, never wrapped.
  EXPECT_EQ(forecast_cells(-9, 2.0, 1, kMax), 2);
  EXPECT_EQ(forecast_cells(10, 2.0, 0, kMax), 12);  // H < 1 counts as 1
  EXPECT_EQ(forecast_cells(10, 2.0, 3, -50), 12);   // a ceiling below n: max(n, c) = n
}

TEST(PrefetchFormula, ForecastIsMonotonic) {
  // Non-decreasing in the cells held, the allowance, the horizon and the ceiling; never below
  // the cells held.
  const std::int32_t cells[] = {0, 1, 63, 200, 224, 225, 1000, kMax - 1000, kMax};
  const double allowances[] = {0.0, 0.4, 1.0, 12.5, 40.0, 1e6, 3e9};
  const std::int32_t horizons[] = {1, 2, 3, 8, 1000, kMax};
  const std::int32_t ceilings[] = {0, 100, 224, 5000, kMax};
  for (const std::int32_t c : ceilings) {
    for (const std::int32_t h : horizons) {
      for (const double e : allowances) {
        std::int32_t previous = 0;
        for (const std::int32_t n : cells) {
          const std::int32_t f = forecast_cells(n, e, h, c);
          EXPECT_GE(f, n);
          EXPECT_GE(f, previous) << "n " << n << " e " << e << " H " << h << " c " << c;
          previous = f;
          if (h < kMax) {
            EXPECT_GE(forecast_cells(n, e, h + 1, c), f);
          }
          if (c < kMax) {
            EXPECT_GE(forecast_cells(n, e, h, c + 1), f);
          }
          EXPECT_GE(forecast_cells(n, e + 0.5, h, c), f);
        }
      }
    }
  }
  // The allowance grows with rate, peak and margin.
  EXPECT_LE(step_allowance(3.0f, 4.0f, 0.0f, 0.1f), step_allowance(5.0f, 4.0f, 0.0f, 0.1f));
  EXPECT_LE(step_allowance(3.0f, 4.0f, 0.0f, 0.1f), step_allowance(3.0f, 6.0f, 0.0f, 0.1f));
  EXPECT_LE(step_allowance(3.0f, 4.0f, 0.0f, 0.1f), step_allowance(3.0f, 4.0f, 0.0f, 0.2f));
  EXPECT_LE(step_allowance(3.0f, 4.0f, 0.0f, 0.1f), step_allowance(3.0f, 4.0f, 5.0f, 0.1f));
  for (std::int32_t x = 0; x < 300; x += 7) {
    EXPECT_LE(round_up_cells(x, 16), round_up_cells(x + 1, 16));
    EXPECT_GE(round_up_cells(x, 16), x);
    EXPECT_EQ(round_up_cells(x, 16) % 16, 0);
  }
}

}  // namespace
