// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "asr_error.hpp"

namespace asr {

/// @brief Rational polyphase resampler with a Kaiser-windowed sinc low-pass.
///
/// With g = gcd(in, out), L = out / g, M = in / g, output sample n sits at input time
/// t = n M / L = i0 + phi / L (i0 = floor(n M / L), phi = n M mod L). Its value is
/// sum_k x[k] h(t - k) with h(u) = fc sinc(fc u) w(u / half_width), fc = rolloff * min(1, L/M)
/// (cutoff relative to the input Nyquist), half_width = zero_crossings / fc input samples,
/// w = Kaiser(beta). Each phase's taps are normalised to sum 1 (exact DC gain). Samples
/// outside the signal are zero.
class polyphase_resampler {
  static constexpr double kPi = 3.14159265358979323846;

 public:
  polyphase_resampler(int in_rate, int out_rate, int zero_crossings = 32, double rolloff = 0.945,
                      double beta = 8.6) {
    if (in_rate <= 0 || out_rate <= 0) throw asr_error("resampler: rates must be positive");
    const int g = std::gcd(in_rate, out_rate);
    L_ = out_rate / g;
    M_ = in_rate / g;
    const double fc = rolloff * std::min(1.0, static_cast<double>(L_) / M_);
    const double half_width = zero_crossings / fc;
    // Taps k = i0 - taps/2 + 1 .. i0 + taps/2 cover |t - k| < half_width for every phase.
    half_taps_ = static_cast<int>(std::ceil(half_width));
    const int taps = 2 * half_taps_;
    table_.assign(static_cast<size_t>(L_) * taps, 0.0f);
    const double i0_beta = bessel_i0(beta);
    for (int phi = 0; phi < L_; ++phi) {
      const double frac = static_cast<double>(phi) / L_;
      double sum = 0.0;
      std::vector<double> h(static_cast<size_t>(taps));
      for (int j = 0; j < taps; ++j) {
        const double u = frac + half_taps_ - 1 - j;  // t - k for k = i0 - half_taps + 1 + j
        double v = 0.0;
        if (std::fabs(u) < half_width) {
          const double x = fc * u;
          const double sinc = (x == 0.0) ? 1.0 : std::sin(kPi * x) / (kPi * x);
          const double r = u / half_width;
          v = fc * sinc * bessel_i0(beta * std::sqrt(1.0 - r * r)) / i0_beta;
        }
        h[static_cast<size_t>(j)] = v;
        sum += v;
      }
      for (int j = 0; j < taps; ++j) {
        table_[static_cast<size_t>(phi) * taps + j] = static_cast<float>(h[j] / sum);
      }
    }
  }

  std::vector<float> process(const std::vector<float>& x) const {
    if (L_ == 1 && M_ == 1) return x;
    const int64_t n_in = static_cast<int64_t>(x.size());
    const int64_t n_out = (n_in * L_ + M_ - 1) / M_;  // ceil(n_in * out / in)
    const int taps = 2 * half_taps_;
    std::vector<float> y(static_cast<size_t>(n_out));
    for (int64_t n = 0; n < n_out; ++n) {
      const int64_t num = n * M_;
      const int64_t i0 = num / L_;
      const int phi = static_cast<int>(num % L_);
      const float* h = table_.data() + static_cast<size_t>(phi) * taps;
      const int64_t k0 = i0 - half_taps_ + 1;
      double acc = 0.0;
      for (int j = 0; j < taps; ++j) {
        const int64_t k = k0 + j;
        if (k >= 0 && k < n_in) acc += static_cast<double>(h[j]) * x[static_cast<size_t>(k)];
      }
      y[static_cast<size_t>(n)] = static_cast<float>(acc);
    }
    return y;
  }

 private:
  /// Modified Bessel function I0 by its power series sum ((x/2)^k / k!)^2.
  static double bessel_i0(double x) {
    double sum = 1.0, term = 1.0;
    const double q = x * x / 4.0;
    for (int k = 1; k < 200; ++k) {
      term *= q / (static_cast<double>(k) * k);
      sum += term;
      if (term < sum * 1e-17) break;
    }
    return sum;
  }

  int L_ = 1, M_ = 1, half_taps_ = 0;
  std::vector<float> table_;  ///< [L, 2 * half_taps]
};

}  // namespace asr
