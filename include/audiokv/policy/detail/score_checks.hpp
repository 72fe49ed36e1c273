// SPDX-License-Identifier: Apache-2.0
/// @file
/// Checks of one step's attention scores against the cached cells (count, pointer, each value
/// finite and >= 0), naming the first bad argument, and the view an unchecked-length
/// observe_group() reads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../core/importance.hpp"
#include "../../detail/describe.hpp"
#include "../../error.hpp"
#include "../../span.hpp"

namespace audiokv::policy::detail {

/// The view an unchecked-length observe_group(pointer, group_size, num_cells) reads: exactly
/// group_size * num_cells floats, or none when either count is invalid (the span form then
/// reports the bad count by name before reading anything).
inline span<const float> group_rows(const float* attention, std::int32_t group_size,
                                    std::int32_t num_cells) noexcept {
  const std::int64_t length =
      group_size >= 1 && num_cells >= 0 ? static_cast<std::int64_t>(group_size) * num_cells : 0;
  return span<const float>(attention, static_cast<std::size_t>(length));
}

/// Checks num_cells == `cells` (the cached count); throws naming "num_cells" with it.
inline void check_num_cells(const char* where, std::int32_t num_cells, std::int32_t cells) {
  AUDIOKV_REQUIRE(
      num_cells == cells, where, "num_cells", num_cells,
      ::audiokv::detail::describe("must equal the number of cached cells (", cells, ")").c_str());
}

/// Checks one step's scores over the `cells` cached cells, [num_cells] with num_cells ==
/// cells, each finite and >= 0; throws naming attention[j].
inline void check_scores(const char* where, const float* attention, std::int32_t num_cells,
                         std::int32_t cells) {
  check_num_cells(where, num_cells, cells);
  AUDIOKV_REQUIRE(num_cells == 0 || attention != nullptr, where, "attention", "nullptr",
                  "must point to the scores");
  for (std::int32_t j = 0; j < num_cells; ++j) {
    AUDIOKV_REQUIRE(core::is_valid_attention(attention[j]), where,
                    ::audiokv::detail::indexed("attention", j), attention[j],
                    "must be finite and >= 0");
  }
}

/// Checks one step's GQA scores [group_size, num_cells] row-major: group_size >= 1,
/// num_cells == `cells`, then the length attention.size() == group_size * num_cells before
/// any element is read, then each value (finite, >= 0; throws naming attention[row][cell]).
inline void check_group(const char* where, span<const float> attention, std::int32_t group_size,
                        std::int32_t num_cells, std::int32_t cells) {
  AUDIOKV_REQUIRE(group_size >= 1, where, "group_size", group_size, "must be >= 1");
  check_num_cells(where, num_cells, cells);
  const std::int64_t total = static_cast<std::int64_t>(group_size) * num_cells;
  AUDIOKV_REQUIRE(attention.size() == static_cast<std::size_t>(total), where, "attention.size()",
                  attention.size(),
                  ::audiokv::detail::describe("must equal group_size x num_cells = ", group_size,
                                              " x ", num_cells, " = ", total)
                      .c_str());
  AUDIOKV_REQUIRE(total == 0 || attention.data() != nullptr, where, "attention", "nullptr",
                  "must point to the scores");
  const float* values = attention.data();
  for (std::int64_t i = 0; i < total; ++i) {
    AUDIOKV_REQUIRE(
        core::is_valid_attention(values[i]), where,
        ::audiokv::detail::indexed(::audiokv::detail::indexed("attention", i / num_cells).c_str(),
                                   i % num_cells),
        values[i], "must be finite and >= 0");
  }
}

/// True when every value of [values, values + n) is finite and >= 0 (-0 included). Branch-free
/// so the compiler vectorises it; the caller locates the first bad value only when it is false.
inline bool all_finite_non_negative(const float* values, std::int64_t n) noexcept {
  int ok = 1;
  for (std::int64_t i = 0; i < n; ++i) {
    ok &= static_cast<int>(core::is_valid_attention(values[i]));
  }
  return ok != 0;
}

}  // namespace audiokv::policy::detail
