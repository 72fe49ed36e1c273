// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "asr_error.hpp"
#include "byte_reader.hpp"

namespace asr {

/// @brief Mono float audio in [-1, 1) at a given sample rate.
struct pcm_audio {
  int sample_rate = 0;
  std::vector<float> samples;
  double duration_s() const {
    return sample_rate > 0 ? static_cast<double>(samples.size()) / sample_rate : 0.0;
  }
};

/// @brief RIFF/WAVE reader for 16-bit PCM (format 1, or WAVE_FORMAT_EXTENSIBLE with the PCM
/// sub-format), 1 or 2 channels, any rate in [1000, 384000] Hz. Stereo is averaged to mono;
/// samples are scaled by 1/32768. Every chunk length is bounds-checked; unsupported encodings
/// and truncated or corrupt files raise asr_error naming the file and byte offset.
class wav_reader {
 public:
  static pcm_audio read(const std::string& path) {
    const std::vector<uint8_t> bytes = read_file_bytes(path);
    return parse(bytes, path);
  }

  static pcm_audio parse(const std::vector<uint8_t>& bytes, const std::string& path) {
    byte_reader r(bytes.data(), bytes.size(), path);
    char tag[4];
    read_tag(r, tag, "RIFF tag");
    if (std::memcmp(tag, "RIFF", 4) != 0) r.fail("not a RIFF/WAVE file (no 'RIFF' tag)");
    r.read<uint32_t>("RIFF size");
    read_tag(r, tag, "WAVE tag");
    if (std::memcmp(tag, "WAVE", 4) != 0) r.fail("RIFF file is not WAVE");

    bool have_fmt = false;
    uint16_t channels = 0, bits = 0;
    uint32_t rate = 0;
    while (r.remaining() >= 8) {
      read_tag(r, tag, "chunk id");
      const uint32_t size = r.read<uint32_t>("chunk size");
      const size_t body = r.pos();
      if (std::memcmp(tag, "fmt ", 4) == 0) {
        if (size < 16) r.fail("fmt chunk of " + std::to_string(size) + " bytes is too short");
        r.require(size, "fmt chunk");
        uint16_t format = r.read<uint16_t>("format tag");
        channels = r.read<uint16_t>("channel count");
        rate = r.read<uint32_t>("sample rate");
        r.read<uint32_t>("byte rate");
        r.read<uint16_t>("block align");
        bits = r.read<uint16_t>("bits per sample");
        if (format == 0xFFFE) {  // WAVE_FORMAT_EXTENSIBLE: sub-format GUID starts with the tag
          if (size < 40) r.fail("WAVE_FORMAT_EXTENSIBLE fmt chunk too short");
          r.skip(8, "extensible header");
          format = r.read<uint16_t>("extensible sub-format");
        }
        if (format != 1) {
          r.fail("unsupported WAV encoding (format tag " + std::to_string(format) +
                 "); only 16-bit PCM is supported");
        }
        if (bits != 16) {
          r.fail("unsupported sample width " + std::to_string(bits) +
                 " bits; only 16-bit PCM is supported");
        }
        if (channels != 1 && channels != 2) {
          r.fail("unsupported channel count " + std::to_string(channels) + " (1 or 2 supported)");
        }
        if (rate < 1000 || rate > 384000) {
          r.fail("unsupported sample rate " + std::to_string(rate) + " Hz");
        }
        have_fmt = true;
      } else if (std::memcmp(tag, "data", 4) == 0) {
        if (!have_fmt) r.fail("data chunk before fmt chunk");
        r.require(size, "PCM data (declared data chunk size exceeds the file)");
        const size_t frame_bytes = 2u * channels;
        const size_t n = size / frame_bytes;
        pcm_audio a;
        a.sample_rate = static_cast<int>(rate);
        a.samples.resize(n);
        const uint8_t* p = bytes.data() + r.pos();
        for (size_t i = 0; i < n; ++i) {
          float acc = 0.0f;
          for (uint16_t c = 0; c < channels; ++c) {
            int16_t s;
            std::memcpy(&s, p + i * frame_bytes + 2u * c, 2);
            acc += static_cast<float>(s) / 32768.0f;
          }
          a.samples[i] = acc / channels;
        }
        if (n == 0) r.fail("data chunk holds no samples");
        return a;
      }
      r.seek(body);
      r.skip(static_cast<size_t>(size) + (size & 1u), "chunk body");  // RIFF pads odd chunks
    }
    r.fail(have_fmt ? "no data chunk" : "no fmt chunk");
  }

 private:
  static void read_tag(byte_reader& r, char* tag, const char* what) {
    r.require(4, what);
    std::memcpy(tag, r.data() + r.pos(), 4);
    r.skip(4, what);
  }
};

}  // namespace asr
