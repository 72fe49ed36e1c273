// SPDX-License-Identifier: Apache-2.0
/// @file
/// Spectral score smoothing (the published AudioKV's SSS idea) as a smoothing stage: an
/// FFT low-pass of the time-ordered score sequence. Plugs into smoothing_pipeline and
/// tiered_cache like median_stage.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "stage_context.hpp"

namespace audiokv::policy::stages {

namespace detail {

/// In-place iterative radix-2 FFT (Cooley-Tukey, bit-reversal first). `inverse` uses e^{+i}
/// and scales by 1/n. @pre n is a power of two.
inline void fft_radix2(std::complex<double>* x, std::int64_t n, bool inverse) {
  for (std::int64_t i = 1, j = 0; i < n; ++i) {
    std::int64_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(x[i], x[j]);
  }
  const double pi = 3.14159265358979323846;
  for (std::int64_t len = 2; len <= n; len <<= 1) {
    const double angle = 2.0 * pi / static_cast<double>(len) * (inverse ? 1.0 : -1.0);
    const std::complex<double> step(std::cos(angle), std::sin(angle));
    for (std::int64_t i = 0; i < n; i += len) {
      std::complex<double> w(1.0, 0.0);
      for (std::int64_t k = 0; k < len / 2; ++k) {
        const std::complex<double> u = x[i + k];
        const std::complex<double> v = x[i + k + len / 2] * w;
        x[i + k] = u + v;
        x[i + k + len / 2] = u - v;
        w *= step;
      }
    }
  }
  if (inverse) {
    for (std::int64_t i = 0; i < n; ++i) x[i] /= static_cast<double>(n);
  }
}

/// Smallest power of two >= n (n >= 1).
inline std::int64_t next_pow2(std::int64_t n) {
  std::int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace detail

/// How spectral_lowpass_stage extends the sequence to a power of two.
enum class spectral_padding : std::uint8_t {
  /// Even (half-sample) reflection, default: length M = next_pow2(2n); the gap [n, M) is filled
  /// by mirroring the end (x[n-1], x[n-2], ...) and, through the periodic wrap, the start
  /// (..., x[1], x[0] | x[0]), the two mirrors meeting in the middle of the gap (indices
  /// clamped to [0, n)). The periodic signal then has no jump at either end of the data, so
  /// the low-pass does not smear the first and last cells toward each other (no Gibbs ringing
  /// at the edges); any residual jump sits >= n/2 cells away from the data.
  reflect = 0,
  /// Zeros: length M = next_pow2(n), x then zeros. Cheaper, but the ends sag toward 0.
  zero = 1
};

/// @brief out = IFFT(lowpass(FFT(pad(in))))[0, n): keeps the lowest `cutoff` fraction of the
/// frequencies. With M the padded length, bins k with min(k, M - k) <= floor(cutoff * M / 2)
/// survive (DC always does), so cutoff = 1 is the identity and a constant stays constant.
///
/// A row stage, host only (policy/stages/stage_traits.hpp): every output cell depends on the whole
/// row through the FFT, so there is no per-cell form; on a device it would be a batched cuFFT pass
/// between two kernels, not a stage inside one. apply() is const and uses
/// a mutable buffer that grows to the largest M seen, so it allocates only while it grows and
/// one object must not be used from two threads at once (copies are independent).
struct spectral_lowpass_stage {
  /// Fraction of the frequency band kept, in (0, 1].
  float cutoff = 0.25f;
  spectral_padding padding = spectral_padding::reflect;  ///< how the row is extended

  spectral_lowpass_stage() = default;
  /// @throws audiokv::error naming "cutoff" unless 0 < cutoff_fraction <= 1.
  explicit spectral_lowpass_stage(float cutoff_fraction,
                                  spectral_padding pad = spectral_padding::reflect)
      : cutoff(cutoff_fraction), padding(pad) {
    validate();
  }
  /// Copies the parameters, not the FFT buffer (a copy is independent).
  spectral_lowpass_stage(const spectral_lowpass_stage& other)
      : cutoff(other.cutoff), padding(other.padding) {}
  /// Copies the parameters, not the FFT buffer.
  spectral_lowpass_stage& operator=(const spectral_lowpass_stage& other) {
    cutoff = other.cutoff;
    padding = other.padding;
    return *this;
  }

  /// @throws audiokv::error naming "cutoff" unless it is finite and in (0, 1].
  void validate() const {
    AUDIOKV_REQUIRE(std::isfinite(cutoff) && cutoff > 0.0f && cutoff <= 1.0f,
                    "spectral_lowpass_stage", "cutoff", cutoff, "must be in (0, 1]");
  }

  /// out[0, n) = the low-passed row (in != out). Allocates only while its buffer grows.
  /// @throws audiokv::error naming "cutoff" when it was set out of range.
  void apply(const float* in, float* out, std::int32_t n, const stage_context&) const {
    validate();
    if (n <= 0) return;
    const std::int64_t m =
        detail::next_pow2(padding == spectral_padding::reflect ? 2 * static_cast<std::int64_t>(n)
                                                               : static_cast<std::int64_t>(n));
    if (static_cast<std::int64_t>(buffer_.size()) < m) buffer_.resize(m);
    std::complex<double>* x = buffer_.data();
    for (std::int64_t t = 0; t < m; ++t) x[t] = sample(in, n, m, t);
    detail::fft_radix2(x, m, false);
    const auto keep = static_cast<std::int64_t>(std::floor(static_cast<double>(cutoff) * m / 2.0));
    for (std::int64_t k = 0; k < m; ++k) {
      const std::int64_t freq = k < m - k ? k : m - k;
      if (freq > keep) x[k] = 0.0;
    }
    detail::fft_radix2(x, m, true);
    for (std::int32_t j = 0; j < n; ++j) out[j] = static_cast<float>(x[j].real());
  }

 private:
  /// The padded sequence at index t in [0, m).
  double sample(const float* in, std::int64_t n, std::int64_t m, std::int64_t t) const {
    if (t < n) return in[t];
    if (padding == spectral_padding::zero) return 0.0;
    const std::int64_t past_end = t - n;          // 0 at the first gap cell
    const std::int64_t before_start = m - 1 - t;  // 0 at the last gap cell (wraps to x[0])
    std::int64_t idx = past_end <= before_start ? n - 1 - past_end : before_start;
    idx = idx < 0 ? 0 : (idx >= n ? n - 1 : idx);
    return in[idx];
  }

  mutable std::vector<std::complex<double>> buffer_;  // [M] FFT workspace
};

}  // namespace audiokv::policy::stages

namespace audiokv {
using policy::stages::spectral_lowpass_stage;
using policy::stages::spectral_padding;
}  // namespace audiokv
