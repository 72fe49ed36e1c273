// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "whisper_encoder.hpp"

namespace asr {

/// @brief Optional on-disk cache of the encoder's cross-attention K/V, keyed by the model
/// directory and the log-mel bytes (FNV-1a 64), so that sweeps which run the same clips in many
/// processes encode each clip once. The decoder reads the same floats either way: results are
/// bit-identical with and without the cache. Off unless a directory is given
/// ($AUDIOKV_ENCODER_CACHE in asr_whisper).
class encoder_cache {
 public:
  explicit encoder_cache(std::string dir) : dir_(std::move(dir)) {}

  bool enabled() const { return !dir_.empty(); }

  /// The cache file of (model_dir, mel).
  std::string path(const std::string& model_dir, const std::vector<float>& mel) const {
    std::uint64_t h = 1469598103934665603ULL;
    auto add = [&h](const unsigned char* p, size_t n) {
      for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
    };
    add(reinterpret_cast<const unsigned char*>(model_dir.data()), model_dir.size());
    add(reinterpret_cast<const unsigned char*>(mel.data()), mel.size() * sizeof(float));
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.enc", static_cast<unsigned long long>(h));
    return dir_ + "/" + name;
  }

  /// Reads `out.cross_k/cross_v` ([layers] of [rows, cols]); false when absent or mismatched.
  static bool load(const std::string& file, int layers, int rows, int cols, audio_encoding& out) {
    std::ifstream f(file, std::ios::binary);
    if (!f) return false;
    std::int32_t shape[3] = {};
    f.read(reinterpret_cast<char*>(shape), sizeof shape);
    if (!f || shape[0] != layers || shape[1] != rows || shape[2] != cols) return false;
    out.cross_k.assign(static_cast<size_t>(layers), mat_rm(rows, cols));
    out.cross_v.assign(static_cast<size_t>(layers), mat_rm(rows, cols));
    const auto bytes = static_cast<std::streamsize>(sizeof(float)) * rows * cols;
    for (int l = 0; l < layers; ++l) {
      f.read(reinterpret_cast<char*>(out.cross_k[static_cast<size_t>(l)].data()), bytes);
      f.read(reinterpret_cast<char*>(out.cross_v[static_cast<size_t>(l)].data()), bytes);
    }
    return static_cast<bool>(f);
  }

  /// Writes the cross K/V through a temporary file renamed into place (concurrent writers of
  /// one clip leave one complete file).
  static void store(const std::string& file, const audio_encoding& enc) {
    const std::string tmp = file + ".tmp" + std::to_string(reinterpret_cast<std::uintptr_t>(&enc));
    {
      std::ofstream f(tmp, std::ios::binary);
      const std::int32_t shape[3] = {static_cast<std::int32_t>(enc.cross_k.size()),
                                     static_cast<std::int32_t>(enc.cross_k[0].rows()),
                                     static_cast<std::int32_t>(enc.cross_k[0].cols())};
      f.write(reinterpret_cast<const char*>(shape), sizeof shape);
      for (size_t l = 0; l < enc.cross_k.size(); ++l) {
        const auto bytes = static_cast<std::streamsize>(sizeof(float) * enc.cross_k[l].size());
        f.write(reinterpret_cast<const char*>(enc.cross_k[l].data()), bytes);
        f.write(reinterpret_cast<const char*>(enc.cross_v[l].data()), bytes);
      }
      if (!f) {
        std::remove(tmp.c_str());
        return;  // a cache that cannot be written is only slower
      }
    }
    std::rename(tmp.c_str(), file.c_str());
  }

 private:
  std::string dir_;
};

}  // namespace asr
