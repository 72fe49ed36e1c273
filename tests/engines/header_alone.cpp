// SPDX-License-Identifier: Apache-2.0
// engines/llama_cpp.hpp compiles alone, included twice (include guard), before anything else.
#include <audiokv/engines/llama_cpp.hpp>

namespace {
[[maybe_unused]] const audiokv::llama_cpp_config alone_config{};
}  // namespace
