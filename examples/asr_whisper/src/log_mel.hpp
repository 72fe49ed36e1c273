// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "asr_error.hpp"
#include "tensor_ops.hpp"

namespace asr {

/// @brief Whisper's log-mel spectrogram for one 30 s window.
///
/// audio (16 kHz) is zero-padded or trimmed to 480000 samples; STFT with n_fft 400, hop 160,
/// periodic Hann window, centred frames (reflect padding of 200 samples at both ends), giving
/// 3001 frames of which the last is dropped (as Whisper's stft[..., :-1]); power |X|^2 of the
/// 201 bins; Slaney-style mel filterbank (librosa.filters.mel(sr=16000, n_fft=400, n_mels),
/// htk=False, norm='slaney'); log10(max(mel, 1e-10)); clamp below at (global max - 8);
/// (x + 4) / 4. Output is [n_mels, 3000] row-major.
class log_mel {
 public:
  static constexpr int sample_rate = 16000;
  static constexpr int n_fft = 400;
  static constexpr int hop = 160;
  static constexpr int n_samples = 480000;  ///< 30 s
  static constexpr int n_frames = 3000;
  static constexpr int n_bins = n_fft / 2 + 1;

  explicit log_mel(int n_mels = 80) : n_mels_(n_mels) {
    if (n_mels <= 0 || n_mels > 512) throw asr_error("log_mel: bad mel count");
    build_filters();
    // DFT basis for the 201 non-negative bins, window folded in: C(n, f) = w[n] cos(2 pi n f / N).
    constexpr double pi = 3.14159265358979323846;
    cos_.resize(n_fft, n_bins);
    sin_.resize(n_fft, n_bins);
    for (int n = 0; n < n_fft; ++n) {
      const double win = 0.5 - 0.5 * std::cos(2.0 * pi * n / n_fft);  // periodic Hann
      for (int f = 0; f < n_bins; ++f) {
        const double a = 2.0 * pi * static_cast<double>((static_cast<long>(n) * f) % n_fft) / n_fft;
        cos_(n, f) = static_cast<float>(win * std::cos(a));
        sin_(n, f) = static_cast<float>(-win * std::sin(a));
      }
    }
  }

  int n_mels() const { return n_mels_; }

  std::vector<float> compute(const std::vector<float>& audio16k) const {
    std::vector<float> x(n_samples, 0.0f);
    std::copy_n(audio16k.begin(), std::min<size_t>(audio16k.size(), n_samples), x.begin());
    const int pad = n_fft / 2;
    // Reflect padding (numpy/torch 'reflect': mirror without repeating the edge sample).
    std::vector<float> xp(static_cast<size_t>(n_samples) + 2 * pad);
    for (int i = 0; i < pad; ++i) {
      xp[static_cast<size_t>(i)] = x[static_cast<size_t>(pad - i)];
      xp[static_cast<size_t>(n_samples + pad + i)] = x[static_cast<size_t>(n_samples - 2 - i)];
    }
    std::copy(x.begin(), x.end(), xp.begin() + pad);

    mat_rm frames(n_frames, n_fft);  // frame t starts at hop * t in the padded signal
    for (int t = 0; t < n_frames; ++t) {
      std::copy_n(xp.begin() + static_cast<long>(t) * hop, n_fft, frames.row(t).data());
    }
    const mat_rm re = frames * cos_;
    const mat_rm im = frames * sin_;
    const mat_rm power = (re.array().square() + im.array().square()).matrix();
    const mat_rm mel = filters_ * power.transpose();  // [n_mels, n_frames]

    std::vector<float> out(static_cast<size_t>(n_mels_) * n_frames);
    float vmax = -1e30f;
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = std::log10(std::max(mel.data()[i], 1e-10f));
      vmax = std::max(vmax, out[i]);
    }
    for (float& v : out) v = (std::max(v, vmax - 8.0f) + 4.0f) / 4.0f;
    return out;
  }

 private:
  /// Slaney mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above
  /// (27 mels per factor 6.4), exactly as librosa.hz_to_mel(htk=False).
  static double hz_to_mel(double f) {
    const double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
    const double logstep = std::log(6.4) / 27.0;
    return f >= min_log_hz ? min_log_mel + std::log(f / min_log_hz) / logstep : f / f_sp;
  }
  static double mel_to_hz(double m) {
    const double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
    const double logstep = std::log(6.4) / 27.0;
    return m >= min_log_mel ? min_log_hz * std::exp(logstep * (m - min_log_mel)) : f_sp * m;
  }

  /// librosa.filters.mel: triangles between consecutive mel points (n_mels + 2 points evenly
  /// spaced in mel from 0 to sr/2), weights = max(0, min(lower, upper)), then Slaney area
  /// normalisation 2 / (f[i+2] - f[i]). Computed in double, stored as float32 (librosa's dtype).
  void build_filters() {
    const int n_pts = n_mels_ + 2;
    std::vector<double> mel_f(static_cast<size_t>(n_pts));
    const double mmin = hz_to_mel(0.0), mmax = hz_to_mel(sample_rate / 2.0);
    for (int i = 0; i < n_pts; ++i) {
      mel_f[static_cast<size_t>(i)] = mel_to_hz(mmin + (mmax - mmin) * i / (n_pts - 1));
    }
    filters_ = mat_rm::Zero(n_mels_, n_bins);
    for (int m = 0; m < n_mels_; ++m) {
      const double f0 = mel_f[m], f1 = mel_f[m + 1], f2 = mel_f[m + 2];
      const double enorm = 2.0 / (f2 - f0);
      for (int b = 0; b < n_bins; ++b) {
        const double fb = static_cast<double>(sample_rate) / 2.0 * b / (n_bins - 1);
        const double lower = (fb - f0) / (f1 - f0);
        const double upper = (f2 - fb) / (f2 - f1);
        filters_(m, b) = static_cast<float>(std::max(0.0, std::min(lower, upper)) * enorm);
      }
    }
  }

  int n_mels_;
  mat_rm filters_;  ///< [n_mels, 201]
  mat_rm cos_, sin_;
};

}  // namespace asr
