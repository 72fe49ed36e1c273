// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace asr {

/// @brief Writes spelled cardinal numbers as digits in a normalised word sequence, so that
/// "press one" and "press 1", "twenty five" and "25" count as the same words (Whisper writes
/// either form of the same speech, depending on the context it has decoded).
///
/// A run of number words is read as cardinals: units (zero ... nine), teens (ten ... nineteen)
/// and tens (twenty ... ninety) add up inside a group, "hundred" multiplies the group, and
/// "thousand" / "million" close the group into the total at that scale; "and" joins only between
/// "hundred" (or a scale) and a following smaller number word. A number word that cannot
/// continue the current number starts a new one: "one two three" -> "1 2 3" (keys read one by
/// one stay separate words, as references write them), "twenty five" -> "25", "nineteen ninety"
/// -> "19 90", "two hundred and five" -> "205", "three thousand four hundred" -> "3400". Every
/// other word passes unchanged. Input words are lowercase (word_error_rate::normalize).
struct spoken_numbers {
  static std::vector<std::string> to_digits(const std::vector<std::string>& words) {
    std::vector<std::string> out;
    out.reserve(words.size());
    reader r;
    for (std::size_t i = 0; i < words.size(); ++i) {
      const std::string& w = words[i];
      const std::int64_t v = value_of(w);
      if (v >= 0) {
        if (r.add(v)) continue;
        r.flush(out);
        if (r.add(v)) continue;
      }
      if (w == "and" && r.after_scale && i + 1 < words.size()) {
        const std::int64_t next = value_of(words[i + 1]);
        if (next >= 0 && next < 100) continue;
      }
      r.flush(out);
      out.push_back(w);
    }
    r.flush(out);
    return out;
  }

  /// 0-90 for a unit, teen or ten; 100, 1000, 1000000 for a scale; -1 otherwise.
  static std::int64_t value_of(const std::string& w) {
    static const char* const small[] = {"zero",    "one",     "two",       "three",    "four",
                                        "five",    "six",     "seven",     "eight",    "nine",
                                        "ten",     "eleven",  "twelve",    "thirteen", "fourteen",
                                        "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
    static const char* const tens[] = {"twenty", "thirty",  "forty",  "fifty",
                                       "sixty",  "seventy", "eighty", "ninety"};
    for (std::int64_t k = 0; k < 20; ++k)
      if (w == small[k]) return k;
    for (std::int64_t k = 0; k < 8; ++k)
      if (w == tens[k]) return 20 + 10 * k;
    if (w == "hundred") return 100;
    if (w == "thousand") return 1000;
    if (w == "million") return 1000000;
    return -1;
  }

 private:
  /// One cardinal being read: total (closed scales) + group (below the next scale).
  struct reader {
    std::int64_t total = 0, group = 0;
    bool open = false, after_scale = false;

    /// Continues the number with v; false (and unchanged) when v must start a new one.
    bool add(std::int64_t v) {
      if (!open) {
        if (v >= 100) return false;  // a scale with no number before it stays a word
        group = v;
        open = true;
        after_scale = false;
        return true;
      }
      const std::int64_t below = group % 100;
      if (v < 10) {
        // A unit follows a bare ten ("twenty five") or a hundred / scale with nothing after it.
        const bool fits = (below >= 20 && below % 10 == 0) || (below == 0 && after_scale);
        if (!fits) return false;
        group += v;
      } else if (v < 100) {
        if (!(below == 0 && after_scale)) return false;
        group += v;
      } else if (v == 100) {
        if (group == 0 || group >= 100) return false;
        group *= 100;
      } else {
        if (group == 0 || (total != 0 && total < v)) return false;
        total += group * v;
        group = 0;
      }
      after_scale = v >= 100;
      return true;
    }

    void flush(std::vector<std::string>& out) {
      if (open) out.push_back(std::to_string(total + group));
      total = group = 0;
      open = after_scale = false;
    }
  };
};

}  // namespace asr
