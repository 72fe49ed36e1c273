// SPDX-License-Identifier: Apache-2.0
// The row copy of core/row_copy.hpp on the host: the width rule against hand-computed values and
// the definition (the widest of 16, 8, 4, 1 dividing length and addresses), every width path
// byte for byte with one lane (memmove) and with several lanes (the device's strided loop, every
// lane called in turn), guard bytes untouched, and the kernels' thread-to-row assignment.
#include <gtest/gtest.h>

#include <audiokv/core/compaction.hpp>
#include <audiokv/core/row_copy.hpp>
#include <cstdint>
#include <vector>

namespace {

using audiokv::core::copy_row;
using audiokv::core::row_copy_width;

/// Widest w of {16, 8, 4, 1} with bytes, dst and src all multiples of w (the definition).
int widest_dividing(std::int64_t bytes, std::uintptr_t dst, std::uintptr_t src) {
  for (int w : {16, 8, 4}) {
    if (bytes % w == 0 && dst % w == 0 && src % w == 0) return w;
  }
  return 1;
}

/// A 64-byte aligned byte buffer with `guard` bytes before `offset`.
struct buffer {
  std::vector<unsigned char> storage;
  unsigned char* base;
  explicit buffer(std::size_t bytes) : storage(bytes + 128) {
    const auto p = reinterpret_cast<std::uintptr_t>(storage.data());
    base = storage.data() + ((64 - p % 64) % 64);
  }
};

TEST(RowCopy, WidthIsTheWidestDividingLengthAddressesAndStrides) {
  alignas(64) static unsigned char mem[256];
  unsigned char* a = mem;  // 64-aligned
  EXPECT_EQ(row_copy_width(256, a, a + 64), 16);
  EXPECT_EQ(row_copy_width(24, a, a + 64), 8);  // 24 = 8 * 3
  EXPECT_EQ(row_copy_width(12, a, a + 64), 4);  // 12 = 4 * 3
  EXPECT_EQ(row_copy_width(2, a, a + 64), 1);   // no 2-byte path
  EXPECT_EQ(row_copy_width(3, a, a + 64), 1);
  EXPECT_EQ(row_copy_width(256, a + 8, a), 8);  // dst 8-aligned only
  EXPECT_EQ(row_copy_width(256, a, a + 4), 4);  // src 4-aligned only
  EXPECT_EQ(row_copy_width(256, a + 1, a), 1);  // misaligned dst
  EXPECT_EQ(row_copy_width(256, a, a, 24), 8);  // rows 24 bytes apart
  EXPECT_EQ(row_copy_width(256, a, a, 16 | 4100), 4);
  EXPECT_EQ(row_copy_width(256, nullptr, a), 16);  // a null buffer aligns to everything
  EXPECT_EQ(audiokv::core::row_copy_width_of(0), 16);
  EXPECT_EQ(audiokv::core::row_copy_width_of(6), 1);
}

TEST(RowCopy, LanesPerRowAreTheWordsUpToAWarp) {
  EXPECT_EQ(audiokv::core::row_copy_lanes(0), 1);
  EXPECT_EQ(audiokv::core::row_copy_lanes(1), 1);
  EXPECT_EQ(audiokv::core::row_copy_lanes(3), 3);
  EXPECT_EQ(audiokv::core::row_copy_lanes(16), 16);  // a 256-byte row of 16-byte words
  EXPECT_EQ(audiokv::core::row_copy_lanes(32), 32);
  EXPECT_EQ(audiokv::core::row_copy_lanes(1536), 32);  // a 24 KiB row
}

// Every width path: rows of 1..24 bytes and 1..24 KiB, source and destination offsets from a
// 64-byte boundary chosen so that each width is the widest; one lane, and several lanes called
// in reverse order (any order must give the same bytes).
TEST(RowCopy, CopiesEveryWidthPathByteForByteWithAnyLaneCount) {
  const std::int64_t sizes[] = {1,    2,    3,    4,    12,    16,    24,    1024,
                                2048, 3072, 4096, 1027, 12288, 16384, 24576, 24584};
  const std::int64_t offsets[] = {0, 1, 2, 4, 8, 12};
  const std::int64_t lane_counts[] = {1, 2, 3, 7, 32, 256};
  int seen[17] = {};
  for (const std::int64_t bytes : sizes) {
    buffer src_buf(static_cast<std::size_t>(bytes) + 64),
        dst_buf(static_cast<std::size_t>(bytes) + 64);
    for (std::size_t i = 0; i < src_buf.storage.size(); ++i)
      src_buf.storage[i] = static_cast<unsigned char>(i * 131u + 7u);
    for (const std::int64_t so : offsets) {
      for (const std::int64_t dof : offsets) {
        const unsigned char* src = src_buf.base + so;
        unsigned char* dst = dst_buf.base + 16 + dof;
        const int width = row_copy_width(bytes, dst, src);
        ASSERT_EQ(width, widest_dividing(bytes, reinterpret_cast<std::uintptr_t>(dst),
                                         reinterpret_cast<std::uintptr_t>(src)))
            << bytes << " bytes, offsets " << so << "/" << dof;
        ++seen[width];
        for (const std::int64_t lanes : lane_counts) {
          std::fill(dst_buf.storage.begin(), dst_buf.storage.end(), 0xEE);
          for (std::int64_t lane = lanes - 1; lane >= 0; --lane)
            copy_row(dst, src, bytes, width, lane, lanes);
          for (std::int64_t b = 0; b < bytes; ++b) {
            ASSERT_EQ(dst[b], src[b])
                << bytes << " bytes, width " << width << ", lanes " << lanes << ", byte " << b;
          }
          for (unsigned char* g = dst_buf.storage.data(); g < dst; ++g) ASSERT_EQ(*g, 0xEE);
          for (unsigned char* g = dst + bytes; g < dst_buf.storage.data() + dst_buf.storage.size();
               ++g)
            ASSERT_EQ(*g, 0xEE) << "written past the row";
        }
      }
    }
  }
  EXPECT_GT(seen[16], 0);
  EXPECT_GT(seen[8], 0);
  EXPECT_GT(seen[4], 0);
  EXPECT_GT(seen[1], 0);
}

// Lane l of `lanes` copies exactly the words l, l + lanes, ...: leaving one lane out leaves
// exactly those words of the destination unwritten.
TEST(RowCopy, EachLaneCopiesItsStridedWordsOnly) {
  constexpr std::int64_t bytes = 3 * 1024;  // 192 words of 16 bytes
  buffer src_buf(bytes), dst_buf(bytes);
  for (std::int64_t b = 0; b < bytes; ++b) src_buf.base[b] = static_cast<unsigned char>(b % 251);
  for (const int width : {16, 8, 4, 1}) {
    const std::int64_t lanes = 5, skipped = 3;
    std::fill(dst_buf.storage.begin(), dst_buf.storage.end(), 0xEE);
    for (std::int64_t lane = 0; lane < lanes; ++lane)
      if (lane != skipped) copy_row(dst_buf.base, src_buf.base, bytes, width, lane, lanes);
    for (std::int64_t b = 0; b < bytes; ++b) {
      const bool skipped_word = (b / width) % lanes == skipped;
      ASSERT_EQ(dst_buf.base[b], skipped_word ? 0xEE : src_buf.base[b])
          << "width " << width << ", byte " << b;
    }
  }
}

// One lane (the host executors' form) is a forward copy: it may move a row down onto an
// overlapping region (dst <= src), as in-place stable compaction does.
TEST(RowCopy, OneLaneCopiesForwardOverOverlappingRows) {
  std::vector<unsigned char> mem(64);
  for (std::size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<unsigned char>(i);
  copy_row(mem.data() + 2, mem.data() + 6, 40);  // overlapping, dst < src
  for (int i = 0; i < 40; ++i) EXPECT_EQ(mem[2 + i], 6 + i);
  EXPECT_EQ(mem[0], 0);
  EXPECT_EQ(mem[1], 1);
  EXPECT_EQ(mem[42], 42);
}

TEST(RowCopy, WordTypedCopyMatchesTheWidthFront) {
  alignas(16) unsigned char src[64], dst[64];
  for (int i = 0; i < 64; ++i) src[i] = static_cast<unsigned char>(200 - i);
  std::fill(dst, dst + 64, 0);
  for (std::int64_t lane = 0; lane < 3; ++lane)
    audiokv::core::copy_row_lanes<audiokv::core::row_word16>(dst, src, 3, lane, 3);
  for (int i = 0; i < 48; ++i) EXPECT_EQ(dst[i], src[i]);
  for (int i = 48; i < 64; ++i) EXPECT_EQ(dst[i], 0);  // 3 words of 16 bytes
  static_assert(sizeof(audiokv::core::row_word16) == 16 && alignof(audiokv::core::row_word16) == 16,
                "a 16-byte word is one 128-bit access");
}

// The kernels' decomposition: `threads` threads, `lanes` per row, each taking its rows by
// assign_row_lanes; every (row, lane) pair is taken exactly once, and copying each pair's words
// reproduces every row (a gather with a hand-written move map, dropped rows untouched).
TEST(RowCopy, ThreadAssignmentCoversEveryRowAndLaneOnce) {
  for (const std::int64_t threads : {256, 1000, 37}) {  // threads >= lanes
    for (const std::int64_t lanes : {1, 3, 16, 32}) {
      for (const std::int64_t rows : {0, 1, 5, 100}) {
        std::vector<int> taken(static_cast<std::size_t>(rows * lanes), 0);
        for (std::int64_t t = 0; t < threads; ++t) {
          const auto a = audiokv::core::assign_row_lanes(t, threads, lanes);
          ASSERT_LT(a.lane, lanes);
          for (std::int64_t r = a.first; r < rows; r += a.step)
            ++taken[static_cast<std::size_t>(r * lanes + a.lane)];
        }
        for (std::size_t i = 0; i < taken.size(); ++i)
          ASSERT_EQ(taken[i], 1) << threads << " threads, " << lanes << " lanes, pair " << i;
      }
    }
  }
  // Gather of 6 rows of 48 bytes (3 words of 16: 3 lanes) by 8 threads, move_to by hand.
  const std::int32_t move_to[6] = {0, -1, 1, -1, -1, 2};
  constexpr std::int64_t row = 48;
  alignas(16) unsigned char src[6 * row], dst[6 * row];
  for (int i = 0; i < 6 * row; ++i) src[i] = static_cast<unsigned char>(i % 253);
  std::fill(dst, dst + 6 * row, 0xEE);
  const int width = row_copy_width(row, dst, src);
  const std::int64_t lanes = audiokv::core::row_copy_lanes(row / width);
  ASSERT_EQ(width, 16);
  ASSERT_EQ(lanes, 3);
  for (std::int64_t t = 0; t < 8; ++t) {
    const auto a = audiokv::core::assign_row_lanes(t, 8, lanes);
    for (std::int64_t j = a.first; j < 6; j += a.step) {
      if (move_to[j] < 0) continue;
      copy_row(dst + move_to[j] * row, src + j * row, row, width, a.lane, lanes);
    }
  }
  for (int b = 0; b < row; ++b) {
    EXPECT_EQ(dst[b], src[b]);                      // cell 0 -> 0
    EXPECT_EQ(dst[row + b], src[2 * row + b]);      // cell 2 -> 1
    EXPECT_EQ(dst[2 * row + b], src[5 * row + b]);  // cell 5 -> 2
    EXPECT_EQ(dst[3 * row + b], 0xEE);
  }
}

// move_row (the one-thread form the CPU eviction step uses) moves through the same copy.
TEST(RowCopy, MoveRowIsTheOneLaneCopyBetweenSlots) {
  std::vector<unsigned char> rows(5 * 24);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<unsigned char>(i);
  const std::vector<unsigned char> before = rows;
  audiokv::core::move_row(rows.data(), 24, 24, 4, 1);
  for (int b = 0; b < 24; ++b) EXPECT_EQ(rows[24 + b], before[4 * 24 + b]);
  for (int b = 0; b < 24; ++b) EXPECT_EQ(rows[b], before[b]);
  for (int b = 48; b < 120; ++b) EXPECT_EQ(rows[b], before[b]);
}

}  // namespace
