// SPDX-License-Identifier: Apache-2.0
/// @file
/// Error-message text with numbers in it, for the expectations of AUDIOKV_REQUIRE.
#pragma once

#include <sstream>
#include <string>

namespace audiokv::detail {

/// Concatenates its arguments as `operator<<` prints them, e.g. describe("must equal ", 50)
/// == "must equal 50". Called inside AUDIOKV_REQUIRE's expectation it runs only when the check
/// fails, so the hot path never formats (pass .c_str(): the temporary outlives the throw).
template <class... Parts>
std::string describe(const Parts&... parts) {
  std::ostringstream text;
  (text << ... << parts);
  return text.str();
}

}  // namespace audiokv::detail
