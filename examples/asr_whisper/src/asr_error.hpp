// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <stdexcept>
#include <string>

namespace asr {

/// @brief Error raised for any unusable input: model files, WAV files, manifests, arguments.
/// The message always names the offending file and, where it applies, the byte offset or
/// variable, so a user can tell a missing file from a truncated or corrupt one.
class asr_error : public std::runtime_error {
 public:
  explicit asr_error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace asr
