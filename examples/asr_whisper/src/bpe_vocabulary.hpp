// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "asr_error.hpp"
#include "byte_reader.hpp"
#include "utf8.hpp"

namespace asr {

/// @brief Whisper's byte-level BPE vocabulary (`vocabulary.txt`: one token per line, in
/// GPT-2's printable byte alphabet) with detokenisation to UTF-8 text.
///
/// GPT-2 maps each byte b to a printable code point: b itself for '!'..'~', 0xA1..0xAC and
/// 0xAE..0xFF; every other byte, in increasing order, to 256 + k (k = 0, 1, ...).
/// Decoding inverts that map code point by code point.
class bpe_vocabulary {
 public:
  static bpe_vocabulary load(const std::string& path) {
    const std::vector<uint8_t> bytes = read_file_bytes(path);
    bpe_vocabulary v;
    v.path_ = path;
    std::string line;
    for (size_t i = 0; i <= bytes.size(); ++i) {
      if (i == bytes.size() || bytes[i] == '\n') {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (i < bytes.size() || !line.empty()) v.tokens_.push_back(line);
        line.clear();
      } else {
        line += static_cast<char>(bytes[i]);
      }
    }
    if (v.tokens_.empty()) throw asr_error(path + ": empty vocabulary");
    for (size_t i = 0; i < v.tokens_.size(); ++i) {
      v.ids_.emplace(v.tokens_[i], static_cast<int32_t>(i));
    }
    v.build_byte_map();
    return v;
  }

  size_t size() const { return tokens_.size(); }
  const std::string& path() const { return path_; }

  /// Token id of an exact token string, or -1.
  int32_t id_of(const std::string& token) const {
    auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
  }

  const std::string& token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) {
      throw asr_error(path_ + ": token id " + std::to_string(id) + " out of range");
    }
    return tokens_[static_cast<size_t>(id)];
  }

  /// Concatenates the byte-level strings of `ids` (ids >= first_special are skipped) and maps
  /// them back to raw bytes; the result is the UTF-8 text Whisper produced.
  std::string decode(const std::vector<int32_t>& ids, int32_t first_special) const {
    std::string out;
    for (int32_t id : ids) {
      if (id < 0 || id >= first_special || static_cast<size_t>(id) >= tokens_.size()) continue;
      const std::string& t = tokens_[static_cast<size_t>(id)];
      size_t i = 0;
      while (i < t.size()) {
        uint32_t cp = 0;
        const size_t n = utf8::next(t, i, cp);
        i += n;
        if (cp < cp_to_byte_.size() && cp_to_byte_[cp] >= 0) {
          out += static_cast<char>(cp_to_byte_[cp]);
        } else {
          out += '?';  // not in the byte alphabet: a corrupt vocabulary line
        }
      }
    }
    return out;
  }

 private:
  void build_byte_map() {
    cp_to_byte_.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      const int cp = printable ? b : 256 + extra++;
      cp_to_byte_[static_cast<size_t>(cp)] = b;
    }
  }

  std::string path_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  std::array<int, 512> cp_to_byte_{};
};

}  // namespace asr
