// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace asr::utf8 {

/// The replacement character, U+FFFD.
inline constexpr uint32_t replacement = 0xFFFD;

/// Decodes the code point at s[i] into `cp` and returns its length (1 to 4). A byte that does
/// not start a well-formed sequence (a stray continuation byte, a sequence cut short) has length
/// 1 and decodes to U+FFFD.
inline size_t next(const std::string& s, size_t i, uint32_t& cp) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = byte(i);
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  const size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  cp = replacement;
  if (n == 0 || i + n > s.size()) return 1;
  uint32_t v = c & (0x7Fu >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 1;
    v = (v << 6) | (byte(i + k) & 0x3Fu);
  }
  cp = v;
  return n;
}

/// Appends the UTF-8 encoding of `cp` (< 0x110000) to `out`.
inline void append(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// `s` with every byte that does not start a well-formed sequence replaced by U+FFFD: valid
/// UTF-8, as Whisper's tokenizer decodes (errors="replace"). A token boundary can split a
/// character, so the text of an output cut at any token (the token limit, a rollback) may end
/// in half of one.
inline std::string repaired(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = next(s, i, cp);
    if (cp == replacement && n == 1) {
      append(replacement, out);
    } else {
      out.append(s, i, n);
    }
    i += n;
  }
  return out;
}

}  // namespace asr::utf8
