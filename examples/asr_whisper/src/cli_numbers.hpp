// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cmath>
#include <cstdlib>
#include <string>

#include "asr_error.hpp"

namespace asr {

/// The whole of `text` as an integer in [0, 1000000], or an asr_error that names `what` (the
/// command line's flag).
inline int parse_int(const std::string& text, const std::string& what) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 0 || v > 1000000) {
    throw asr_error("invalid value for " + what + ": '" + text + "'");
  }
  return static_cast<int>(v);
}

/// The whole of `text` as a finite number, or an asr_error that names `what`; the caller (or
/// the library) checks its range.
inline double parse_real(const std::string& text, const std::string& what) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v)) {
    throw asr_error("invalid value for " + what + ": '" + text + "' (expected a number)");
  }
  return v;
}

}  // namespace asr
