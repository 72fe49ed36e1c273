// SPDX-License-Identifier: Apache-2.0
/// @file
/// A synthetic speech-like frame stream for demos, tests and benchmarks (no audio involved).
#pragma once

#include <audiokv/types/frame.hpp>
#include <cstdint>
#include <random>
#include <vector>

namespace audiokv::synthetic {

/// @brief A long stream of speech-like frames: voiced segments separated by silence runs,
/// several speakers, occasional phoneme boundaries, segment starts and noise bursts. Attention
/// is a normalised mixture of a decaying recency term and per-frame content weights.
class speech_stream {
 public:
  explicit speech_stream(unsigned seed, std::int32_t num_speakers = 3)
      : rng_(seed), speakers_(num_speakers) {}

  frame_meta next_frame() {
    if (--segment_left_ <= 0) {
      voiced_ = !voiced_;
      segment_left_ = voiced_ ? len_voiced_(rng_) : len_silence_(rng_);
      if (voiced_) speaker_ = std::uniform_int_distribution<int>(0, speakers_ - 1)(rng_);
      pending_segment_start_ = voiced_;
    }
    frame_meta f{pos_++, speaker_, voiced_ ? 1.0f : 0.0f, 0, 0.0f};
    if (pending_segment_start_) f.flags |= frame_flag_segment_start;
    pending_segment_start_ = false;
    if (voiced_ && unit_(rng_) < 0.02) f.flags |= frame_flag_phoneme_boundary;
    weights_.push_back(voiced_ ? 0.5f + unit_(rng_) : 0.05f * unit_(rng_));
    return f;
  }

  /// Attention over the cached positions `pos[0..n)`; a burst every ~5000 steps.
  void attention(const std::int32_t* pos, std::int32_t n, std::vector<float>& out) {
    out.resize(n);
    const bool burst = unit_(rng_) < 0.0002;
    double sum = 0.0;
    for (std::int32_t j = 0; j < n; ++j) {
      const float age = static_cast<float>(pos_ - pos[j]);
      float w = weights_[pos[j]] * (0.2f + 1.0f / (1.0f + 0.01f * age)) * (0.5f + unit_(rng_));
      if (burst && j >= n - 10) w *= 50.0f;
      out[j] = w;
      sum += w;
    }
    for (auto& v : out) v = static_cast<float>(v / sum);
  }

 private:
  std::mt19937 rng_;
  std::int32_t speakers_;
  std::uniform_real_distribution<float> unit_{0.0f, 1.0f};
  std::uniform_int_distribution<int> len_voiced_{20, 300};
  std::uniform_int_distribution<int> len_silence_{5, 80};
  std::vector<float> weights_;
  std::int32_t pos_ = 0;
  std::int32_t segment_left_ = 0;
  std::int32_t speaker_ = 0;
  bool voiced_ = false;
  bool pending_segment_start_ = false;
};

}  // namespace audiokv::synthetic
