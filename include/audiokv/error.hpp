// SPDX-License-Identifier: Apache-2.0
/// @file
/// The one exception type of the host API. Every public entry point validates its arguments
/// before it changes any state, so a thrown error always leaves the object as it was.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace audiokv {

/// @brief Invalid argument to a public entry point. `argument()` names the offending parameter
/// (e.g. "attention[17]" or "config.trigger"); `what()` adds the value and the expectation.
class error : public std::invalid_argument {
 public:
  /// @brief An error about `argument` with the full `message` (what()). Allocates the strings.
  error(std::string argument, const std::string& message)
      : std::invalid_argument(message), argument_(std::move(argument)) {}

  /// @brief The parameter (with index where useful) that failed validation.
  const std::string& argument() const noexcept { return argument_; }

 private:
  std::string argument_;
};

// audiokv::detail holds the helpers shared by every layer. Each folder's namespace has its own
// detail (audiokv::policy::detail, audiokv::cpu::detail, ...), which hides this one from
// unqualified lookup inside it: code in a folder names these helpers as ::audiokv::detail::.
namespace detail {

/// Builds "<where>: <argument> = <value>: <expectation>" and throws audiokv::error.
template <class Value>
[[noreturn]] void throw_invalid(const char* where, const std::string& argument, const Value& value,
                                const char* expectation) {
  std::ostringstream message;
  message << "audiokv::" << where << ": " << argument << " = " << value << ": " << expectation;
  throw error(argument, message.str());
}

/// Builds "<where>: <argument>: <detail>" and throws audiokv::error naming `argument`: for an
/// argument whose value has no short printed form (a byte buffer, a table), `detail` names the
/// part that is wrong, what it holds and what it must be.
[[noreturn]] inline void throw_invalid_part(const char* where, const std::string& argument,
                                            const std::string& detail) {
  throw error(argument, "audiokv::" + std::string(where) + ": " + argument + ": " + detail);
}

/// Argument name with an index, e.g. indexed("attention", 17) == "attention[17]".
inline std::string indexed(const char* name, long long index) {
  return std::string(name) + "[" + std::to_string(index) + "]";
}

}  // namespace detail

/// Validates `cond`; otherwise throws audiokv::error naming `argument` and `value`.
#define AUDIOKV_REQUIRE(cond, where, argument, value, expectation)                      \
  do {                                                                                  \
    if (!(cond)) ::audiokv::detail::throw_invalid(where, argument, value, expectation); \
  } while (0)

}  // namespace audiokv
