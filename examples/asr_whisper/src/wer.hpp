// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "spoken_numbers.hpp"
#include "text_fold.hpp"

namespace asr {

/// @brief Word error rate by Levenshtein distance over normalised words.
/// Normalisation: text_fold (letters and digits in lower case, diacritics folded, apostrophes
/// removed, every other character a space); whitespace collapses; spelled English cardinal
/// numbers become digits (spoken_numbers: "press one" and "press 1" are the same words).
/// WER = (substitutions + deletions + insertions) / reference words.
struct word_error_rate {
  long edits = 0;
  long ref_words = 0;
  double rate() const {
    return ref_words > 0 ? static_cast<double>(edits) / static_cast<double>(ref_words) : 0.0;
  }

  static std::string normalize(const std::string& s) {
    std::string out;
    bool space = true;
    for (const char c : text_fold::apply(s)) {
      if (c != ' ') {
        out += c;
        space = false;
      } else if (!space) {
        out += ' ';
        space = true;
      }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  }

  static std::vector<std::string> words(const std::string& s) {
    std::vector<std::string> w;
    std::string cur;
    for (char c : normalize(s)) {
      if (c == ' ') {
        if (!cur.empty()) w.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) w.push_back(cur);
    return spoken_numbers::to_digits(w);
  }

  static word_error_rate compute(const std::string& ref, const std::string& hyp) {
    const std::vector<std::string> r = words(ref), h = words(hyp);
    std::vector<long> prev(h.size() + 1), cur(h.size() + 1);
    for (size_t j = 0; j <= h.size(); ++j) prev[j] = static_cast<long>(j);
    for (size_t i = 1; i <= r.size(); ++i) {
      cur[0] = static_cast<long>(i);
      for (size_t j = 1; j <= h.size(); ++j) {
        const long sub = prev[j - 1] + (r[i - 1] == h[j - 1] ? 0 : 1);
        cur[j] = std::min({sub, prev[j] + 1, cur[j - 1] + 1});
      }
      std::swap(prev, cur);
    }
    word_error_rate w;
    w.edits = prev[h.size()];
    w.ref_words = static_cast<long>(r.size());
    return w;
  }
};

}  // namespace asr
