// SPDX-License-Identifier: Apache-2.0
/// @file
/// Checks of the frames a cache appends (count, room, ascending positions, metadata in range,
/// agreement with a shared frame_table), naming the first bad field, and the message for a
/// frame that a frame_table holds with other metadata.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "../../detail/describe.hpp"
#include "../../error.hpp"
#include "../../types/frame.hpp"
#include "../../types/frame_table.hpp"

namespace audiokv::policy::detail {

/// "the frame at position p (speaker s, voice v, flags f, prior q) differs from (speaker ...)":
/// `given` against `held`, the metadata a frame_table holds at the same position.
inline std::string frame_mismatch(const frame_meta& given, const frame_meta& held) {
  const auto fields = [](const frame_meta& f) {
    return ::audiokv::detail::describe("(speaker ", f.speaker, ", voice ", f.voice, ", flags ",
                                       static_cast<int>(f.flags), ", prior ", f.prior, ")");
  };
  return ::audiokv::detail::describe("the frame at position ", given.pos, " ", fields(given),
                                     " differs from ", fields(held));
}

/// Checks `count` frames (`frames`) a cache of `size` cells in `capacity` slots would append:
/// count >= 0, the pointer, room, then each frame: position above `previous` (the newest
/// appended position, or INT64_MIN before the first) and its predecessor's, speaker in [0,
/// num_speakers), voice in [0, 1], finite prior, and, with a shared `table` (else null), the
/// metadata the table holds at that position. Throws from `where` naming frames[i].field.
inline void check_frames(const char* where, const frame_meta* frames, std::int32_t count,
                         std::int32_t size, std::int32_t capacity, std::int64_t previous,
                         std::int32_t num_speakers, const frame_table* table) {
  AUDIOKV_REQUIRE(count >= 0, where, "count", count, "must be >= 0");
  AUDIOKV_REQUIRE(count == 0 || frames != nullptr, where, "frames", "nullptr",
                  "must point to count frames");
  AUDIOKV_REQUIRE(
      static_cast<std::int64_t>(size) + count <= capacity, where, "count", count,
      capacity == 0
          ? "exceeds the capacity 0 of this cache (a moved-from cache holds no slots: "
            "reserve() them or assign a cache to it)"
          : ::audiokv::detail::describe("exceeds the free capacity: ", capacity - size, " of ",
                                        capacity, " slots free (plan and apply an eviction first)")
                .c_str());
  for (std::int32_t i = 0; i < count; ++i) {
    const frame_meta& f = frames[i];
    AUDIOKV_REQUIRE(f.pos > previous, where, ::audiokv::detail::indexed("frames", i) + ".pos",
                    f.pos,
                    "must be greater than the previous frame's position (frames out of order)");
    AUDIOKV_REQUIRE(f.speaker >= 0 && f.speaker < num_speakers, where,
                    ::audiokv::detail::indexed("frames", i) + ".speaker", f.speaker,
                    "unknown speaker id (must be in [0, num_speakers))");
    AUDIOKV_REQUIRE(std::isfinite(f.voice) && f.voice >= 0.0f && f.voice <= 1.0f, where,
                    ::audiokv::detail::indexed("frames", i) + ".voice", f.voice,
                    "must be in [0, 1]");
    AUDIOKV_REQUIRE(std::isfinite(f.prior), where,
                    ::audiokv::detail::indexed("frames", i) + ".prior", f.prior, "must be finite");
    if (table && !table->agrees(f)) {
      ::audiokv::detail::throw_invalid_part(
          where, ::audiokv::detail::indexed("frames", i),
          frame_mismatch(f, table->frame(f.pos)) +
              ": every cache of a sequence appends the same frames");
    }
    previous = f.pos;
  }
}

}  // namespace audiokv::policy::detail
