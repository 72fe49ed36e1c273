// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace asr {

/// @brief Energy voice-activity detector on Whisper's 20 ms encoder frames.
///
/// Frame n covers 16 kHz samples [320 n, 320 n + 320) (one encoder position). Its level is
/// e_n = 10 log10(mean(x^2) + 1e-10) dBFS. With the clip's 10th percentile `floor` and 90th
/// percentile `peak` over the N_a real frames, threshold = floor + max(6, 0.3 (peak - floor))
/// dB, and never below -60 dBFS; a frame is voice if e_n > threshold. Voice is then dilated by
/// `hangover` frames on each side (soft onsets and releases). If peak - floor < 6 dB the clip
/// has no usable contrast and every frame above -60 dBFS counts as voice.
class energy_vad {
 public:
  static constexpr int frame_samples = 320;  ///< 20 ms at 16 kHz
  static constexpr int frames_per_second = 50;

  /// N_a = ceil(50 * duration), clamped to the window: frames past the real audio are padding.
  static int speech_frames(size_t n_samples_16k, int n_audio_ctx) {
    const long n = static_cast<long>((n_samples_16k + frame_samples - 1) / frame_samples);
    return static_cast<int>(std::clamp<long>(n, 1, n_audio_ctx));
  }

  static std::vector<uint8_t> detect(const std::vector<float>& audio16k, int n_frames,
                                     int hangover = 4) {
    std::vector<float> level(static_cast<size_t>(n_frames));
    for (int n = 0; n < n_frames; ++n) {
      const size_t b = static_cast<size_t>(n) * frame_samples;
      const size_t e = std::min(audio16k.size(), b + frame_samples);
      double s = 0.0;
      for (size_t i = b; i < e; ++i) s += static_cast<double>(audio16k[i]) * audio16k[i];
      const double mean = (e > b) ? s / frame_samples : 0.0;
      level[static_cast<size_t>(n)] = static_cast<float>(10.0 * std::log10(mean + 1e-10));
    }
    std::vector<float> sorted = level;
    std::sort(sorted.begin(), sorted.end());
    const auto pct = [&](double p) {
      return sorted[static_cast<size_t>(std::lround(p * static_cast<double>(sorted.size() - 1)))];
    };
    const float floor_db = pct(0.10), peak_db = pct(0.90);
    const float abs_min = -60.0f;
    float thr = abs_min;
    if (peak_db - floor_db >= 6.0f) {
      thr = std::max(abs_min, floor_db + std::max(6.0f, 0.3f * (peak_db - floor_db)));
    }
    std::vector<uint8_t> raw(static_cast<size_t>(n_frames), 0), out(raw.size(), 0);
    for (int n = 0; n < n_frames; ++n)
      raw[static_cast<size_t>(n)] = level[static_cast<size_t>(n)] > thr;
    for (int n = 0; n < n_frames; ++n) {
      if (!raw[static_cast<size_t>(n)]) continue;
      const int lo = std::max(0, n - hangover), hi = std::min(n_frames - 1, n + hangover);
      for (int j = lo; j <= hi; ++j) out[static_cast<size_t>(j)] = 1;
    }
    return out;
  }
};

}  // namespace asr
