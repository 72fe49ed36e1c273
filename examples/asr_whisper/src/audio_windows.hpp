// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "asr_error.hpp"
#include "wav_reader.hpp"

namespace asr {

/// @brief Long audio as consecutive windows that each fit Whisper's 30 s input, cut at pauses.
///
/// A window that would run past `window_s` ends instead at the quietest 20 ms frame (least
/// energy, the latest of equals) of its last `search_s` seconds, at that frame's middle; the
/// next window starts there. Speech rarely runs 5 s without a pause, so the cut falls between
/// words where there is one, and a window is never shorter than window_s - search_s (the last
/// one excepted). Each window is then transcribed as a clip of its own: its own cross-attention
/// cache and policy, no text carried over.
struct audio_windows {
  /// [begin, end) sample ranges of `audio`, in order, covering every sample once; one range when
  /// the audio fits one window. Throws asr_error naming the argument when window_s <= search_s
  /// or search_s <= 0.02 (the frame).
  static std::vector<std::pair<size_t, size_t>> split(const pcm_audio& audio,
                                                      double window_s = 30.0,
                                                      double search_s = 5.0) {
    if (!(search_s > frame_s) || !(window_s > search_s)) {
      throw asr_error("audio_windows: window_s (" + std::to_string(window_s) +
                      ") must exceed search_s (" + std::to_string(search_s) +
                      "), which must exceed 0.02 s");
    }
    const size_t n = audio.samples.size();
    const auto samples = [&](double s) {
      return static_cast<size_t>(std::floor(s * static_cast<double>(audio.sample_rate)));
    };
    const size_t window = samples(window_s), search = samples(search_s);
    const size_t frame = std::max<size_t>(1, samples(frame_s));
    std::vector<std::pair<size_t, size_t>> out;
    size_t begin = 0;
    while (n - begin > window) {
      const size_t cut =
          quietest_frame(audio.samples, begin + window - search, begin + window, frame) + frame / 2;
      out.emplace_back(begin, cut);
      begin = cut;
    }
    out.emplace_back(begin, n);
    return out;
  }

  /// The samples [range.first, range.second) of `audio`, at its rate.
  static pcm_audio slice(const pcm_audio& audio, std::pair<size_t, size_t> range) {
    pcm_audio out;
    out.sample_rate = audio.sample_rate;
    out.samples.assign(audio.samples.begin() + static_cast<std::ptrdiff_t>(range.first),
                       audio.samples.begin() + static_cast<std::ptrdiff_t>(range.second));
    return out;
  }

 private:
  static constexpr double frame_s = 0.02;

  /// Start of the frame of `frame` samples in [lo, hi) with the least energy (the latest of
  /// equals).
  static size_t quietest_frame(const std::vector<float>& x, size_t lo, size_t hi, size_t frame) {
    size_t best = lo;
    double best_energy = -1.0;
    for (size_t b = lo; b + frame <= hi; b += frame) {
      double e = 0.0;
      for (size_t i = b; i < b + frame; ++i) e += static_cast<double>(x[i]) * x[i];
      if (best_energy < 0.0 || e <= best_energy) {
        best = b;
        best_energy = e;
      }
    }
    return best;
  }
};

}  // namespace asr
