// SPDX-License-Identifier: Apache-2.0
/// @file
/// The row copy: the bytes of one K or V row from src to dst, in words of the widest width
/// (16, 8, 4 or 1 bytes) that divides the row's length and both addresses. One rule for the
/// host and the device. A row is copied by `lanes` cooperating threads, lane l copying words
/// l, l + lanes, l + 2 lanes, ...; together the lanes copy every word exactly once. A host
/// thread is lane 0 of 1 and copies the whole row with std::memmove (one call, the widest copy
/// the host has); a device thread group of up to 32 lanes copies one row per step of its loop.
///
/// Precondition of every copy: src and dst do not overlap, or lanes == 1 and dst <= src (a
/// forward copy: word i is read before word i is written, and the bytes of dst word i lie in
/// src words <= i, already read). In-place stable compaction on the host moves each row to a
/// slot at or below its own, lane 0 of 1 per row, in slot order; on the device it stages a tile
/// of rows in shared memory, so every copy is between disjoint rows. Hole-filling moves disjoint
/// rows (no source is a destination), so its lanes and rows may run in any order.
#pragma once

#include <cstdint>
#include <cstring>

#include "../config.hpp"

namespace audiokv::core {

/// 16-byte word of a row copy: one 128-bit load and store on the device (alignas(16)).
struct alignas(16) row_word16 {
  std::uint32_t x;  ///< bytes 0-3
  std::uint32_t y;  ///< bytes 4-7
  std::uint32_t z;  ///< bytes 8-11
  std::uint32_t w;  ///< bytes 12-15
};

/// Widest row-copy width, 16, 8, 4 or 1 bytes, that divides `bits`: the bitwise OR of the
/// row's length, its addresses and every stride between the rows that share the width.
AUDIOKV_HOST_DEVICE constexpr int row_copy_width_of(std::uint64_t bits) {
  return bits % 16 == 0 ? 16 : (bits % 8 == 0 ? 8 : (bits % 4 == 0 ? 4 : 1));
}

/// Width (16, 8, 4 or 1) of the words that copy a row of `bytes` bytes from `src` to `dst`:
/// the widest that divides `bytes`, both addresses and `strides` (the OR of the byte strides
/// between rows copied with the same width, e.g. entry_stride | head_stride; 0 for one row).
/// A null address aligns to everything.
AUDIOKV_HOST_DEVICE int row_copy_width(std::int64_t bytes, const void* dst, const void* src,
                                       std::int64_t strides = 0) {
  return row_copy_width_of(static_cast<std::uint64_t>(bytes) |
                           static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(dst)) |
                           static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(src)) |
                           static_cast<std::uint64_t>(strides));
}

/// Lanes that copy one row of `words` words together: every word its own lane up to 32 (one
/// warp), so a short row keeps every thread busy and a long one is a warp's strided loop.
AUDIOKV_HOST_DEVICE constexpr std::int64_t row_copy_lanes(std::int64_t words) {
  return words < 1 ? 1 : (words < 32 ? words : 32);
}

/// Copies words lane, lane + lanes, ... (< words) of `sizeof(Word)` bytes from src to dst.
/// Word is row_word16, std::uint64_t, std::uint32_t or unsigned char; both addresses are
/// multiples of sizeof(Word); 0 <= lane < lanes. Precondition: the rows do not overlap, or
/// lanes == 1 and dst <= src (see the file comment). On the host lane 0 of 1 is one memmove.
template <class Word>
AUDIOKV_HOST_DEVICE void copy_row_lanes(void* dst, const void* src, std::int64_t words,
                                        std::int64_t lane, std::int64_t lanes) {
#if defined(__CUDA_ARCH__)
  auto* d = static_cast<Word*>(dst);
  const auto* s = static_cast<const Word*>(src);
  for (std::int64_t i = lane; i < words; i += lanes) d[i] = s[i];
#else
  if (lanes == 1) {
    if (words > 0) std::memmove(dst, src, static_cast<std::size_t>(words) * sizeof(Word));
    return;
  }
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (std::int64_t i = lane; i < words; i += lanes) {
    Word w;  // memcpy of one word: a single load and store, without type punning
    std::memcpy(&w, s + i * static_cast<std::int64_t>(sizeof(Word)), sizeof(Word));
    std::memcpy(d + i * static_cast<std::int64_t>(sizeof(Word)), &w, sizeof(Word));
  }
#endif
}

/// Lane `lane` of `lanes` copies its words of the `bytes`-byte row src -> dst, in words of
/// `width` bytes (row_copy_width of this row, or of every row of a launch). Same precondition
/// as copy_row_lanes. Any other width copies bytes.
AUDIOKV_HOST_DEVICE void copy_row(void* dst, const void* src, std::int64_t bytes, int width,
                                  std::int64_t lane, std::int64_t lanes) {
  switch (width) {
    case 16:
      copy_row_lanes<row_word16>(dst, src, bytes / 16, lane, lanes);
      return;
    case 8:
      copy_row_lanes<std::uint64_t>(dst, src, bytes / 8, lane, lanes);
      return;
    case 4:
      copy_row_lanes<std::uint32_t>(dst, src, bytes / 4, lane, lanes);
      return;
    default:
      copy_row_lanes<unsigned char>(dst, src, bytes, lane, lanes);
  }
}

/// One thread copies the whole `bytes`-byte row src -> dst (lane 0 of 1) in words of its
/// row_copy_width; on the host, one memmove. Rows do not overlap, or dst <= src.
AUDIOKV_HOST_DEVICE void copy_row(void* dst, const void* src, std::int64_t bytes) {
#if defined(__CUDA_ARCH__)
  copy_row(dst, src, bytes, row_copy_width(bytes, dst, src), 0, 1);
#else
  copy_row_lanes<unsigned char>(dst, src, bytes, 0, 1);  // the width does not matter to memmove
#endif
}

/// A thread's share of a copy of many rows by `threads` threads, `lanes` consecutive threads
/// per row: it is lane thread % lanes of group thread / lanes, and the threads / lanes groups
/// take the rows group, group + groups, ... A thread past the last whole group takes no row.
struct row_lane_assignment {
  std::int64_t lane = 0;   ///< the thread's lane within each of its rows
  std::int64_t first = 0;  ///< its first row (INT64_MAX when it takes none)
  std::int64_t step = 1;   ///< rows between its rows (the number of groups)
};

/// The row_lane_assignment of thread `thread` (0 <= thread < threads), 1 <= lanes <= threads.
AUDIOKV_HOST_DEVICE row_lane_assignment assign_row_lanes(std::int64_t thread, std::int64_t threads,
                                                         std::int64_t lanes) {
  const std::int64_t groups = threads / lanes;
  const std::int64_t group = thread / lanes;
  row_lane_assignment a;
  a.lane = thread % lanes;
  a.first = group < groups ? group : INT64_MAX;
  a.step = groups > 0 ? groups : 1;
  return a;
}

}  // namespace audiokv::core
