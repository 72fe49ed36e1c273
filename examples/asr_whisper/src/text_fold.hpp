// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cctype>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "utf8.hpp"

namespace asr {

/// @brief The character rule of the word normalisation (word_error_rate) and of the repeat
/// stop's word keys (whisper_model::word_key), written once; benchmarks/quality/run_quality.py
/// holds the same rule for the sweeps (tests/asr/spoken_numbers_cases.tsv checks both).
///
/// UTF-8 in, UTF-8 out: ASCII letters and digits in lower case; Latin letters with diacritics
/// folded to their base letters ("Opción" -> "opcion", "Straße" -> "strasse", reference texts
/// often leave accents out); Cyrillic and Greek capitals in lower case and "ё" read as "е";
/// apostrophes (' and U+2019) dropped ("party's" -> "partys"); every other ASCII character,
/// Latin-1 punctuation or symbol ("«", "®") and character of the punctuation, symbol and CJK
/// punctuation blocks (U+2000-U+2BFF, U+3000-U+303F) becomes a space, as does a byte that is
/// not UTF-8 (read as U+FFFD). Characters of other scripts are kept as they are.
struct text_fold {
  /// Folds of U+00C0..U+017F in code point order, space separated; "_" is a sign, not a letter
  /// (U+00D7, U+00F7). Generated from Unicode's decompositions (the base letter, in lower case)
  /// with the letters that have none spelled out (Æ ae, Ð d, Þ th, ß ss, Ø o, Ł l, Œ oe, ...).
  static constexpr const char* latin_folds =
      "a a a a a a ae c e e e e i i i i d n o o o o o _ o u u u u y th ss "
      "a a a a a a ae c e e e e i i i i d n o o o o o _ o u u u u y th y "
      "a a a a a a c c c c c c c c d d d d e e e e e e e e e e g g g g "
      "g g g g h h h h i i i i i i i i i i ij ij j j k k k l l l l l l l "
      "l l l n n n n n n n n n o o o o o o oe oe r r r r r r s s s s s s "
      "s s t t t t t t u u u u u u u u u u u u w w y y y z z z z z z s";

  /// `s` folded by the rule above.
  static std::string apply(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x80) {
        if (std::isalnum(c)) {
          out += static_cast<char>(std::tolower(c));
        } else if (c != '\'') {
          out += ' ';
        }
        ++i;
        continue;
      }
      uint32_t cp = 0;
      const size_t len = utf8::next(s, i, cp);
      if (!fold(cp, out)) out.append(s, i, len);
      i += len;
    }
    return out;
  }

 private:
  static const std::vector<std::string>& latin_table() {
    static const std::vector<std::string> table = [] {
      std::vector<std::string> t;
      std::istringstream in(latin_folds);
      for (std::string f; in >> f;) t.push_back(f == "_" ? " " : f);
      return t;
    }();
    return table;
  }

  static bool is_separator(uint32_t cp) {
    return cp < 0xC0 || cp == 0xFFFD || (cp >= 0x2000 && cp < 0x2C00) ||
           (cp >= 0x3000 && cp < 0x3040);
  }

  /// Appends the fold of the non-ASCII code point `cp`; false when it is kept as it is.
  static bool fold(uint32_t cp, std::string& out) {
    if (cp == 0x2019) return true;  // right single quotation mark, an apostrophe
    if (is_separator(cp)) {
      out += ' ';
    } else if (cp < 0x180) {
      out += latin_table()[cp - 0xC0];
    } else if (cp == 0x401 || cp == 0x451) {
      utf8::append(0x435, out);  // ё, Ё -> е
    } else if (cp >= 0x400 && cp < 0x410) {
      utf8::append(cp + 0x50, out);
    } else if (cp >= 0x410 && cp < 0x430) {
      utf8::append(cp + 0x20, out);
    } else if (cp >= 0x391 && cp < 0x3AA && cp != 0x3A2) {
      utf8::append(cp + 0x20, out);
    } else {
      return false;
    }
    return true;
  }
};

}  // namespace asr
