// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: bytes -> asr::wav_reader::parse (examples/asr_whisper). Any input either
// parses into plausible audio or raises asr_error naming the file; nothing else may happen
// (no crash, no out-of-bounds read, no other exception, no leak).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "wav_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::uint8_t> bytes(data, data + size);
  const std::string name = "fuzz.wav";
  try {
    const asr::pcm_audio a = asr::wav_reader::parse(bytes, name);
    // Accepted: 16-bit PCM at a supported rate, at least one sample, every sample a mean of
    // values in [-1, 1).
    if (a.sample_rate < 1000 || a.sample_rate > 384000 || a.samples.empty()) std::abort();
    for (const float s : a.samples) {
      if (!std::isfinite(s) || s < -1.0f || s >= 1.0f) std::abort();
    }
  } catch (const asr::asr_error& e) {
    if (std::string(e.what()).find(name) == std::string::npos) {
      std::fprintf(stderr, "asr_error does not name the file: %s\n", e.what());
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}
