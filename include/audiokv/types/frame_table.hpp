// SPDX-License-Identifier: Apache-2.0
/// @file
/// Frame metadata shared by the caches of one sequence: the (layer, KV head) caches of a
/// sequence see the same frames, so their speaker, voice, flags and prior are held once per
/// frame here, and each cache keeps only a row index per cell beside what is its own
/// (importance, tier, position).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "frame.hpp"

namespace audiokv {

/// @brief Reference-counted rows of frame metadata, found by position.
///
/// A cache attached to a table acquire()s one row per appended cell and release()s it when the
/// cell is evicted, the cache is reset or destroyed. acquire() returns the live row of the same
/// position when its metadata is bit-identical (the common case: every cache of a sequence
/// appends the same frames), else a new row, so sharing never changes what a cache reads. A
/// row whose count drops to 0 returns to a free list for reuse.
///
/// Lookup by position is a direct-mapped index of `index_size` entries (position mod a power
/// of two): a cache appending a frame whose entry was overwritten by a frame index_size
/// positions newer gets a row of its own (correct, only less shared).
///
/// Memory: 21 bytes per row (position, speaker, voice, flags, prior, count) and 4 per index
/// entry. Rows live while any cache holds the frame, so the table holds the union of the
/// attached caches' cells. acquire() allocates only when no free row is left (reserve() ahead
/// of the union's high-water mark, e.g. between decode steps, to keep steps allocation-free).
///
/// Threads: acquire() and release() write the table, so the caches attached to one table must
/// not run mutating calls concurrently, nor a mutating call concurrently with any call of
/// another of them; reads (row accessors) may run concurrently with each other.
class frame_table {
 public:
  /// An empty table with room for `rows` rows and an index of at least `index_size` entries
  /// (rounded up to a power of two; at least 1).
  explicit frame_table(std::int32_t rows = 0, std::int32_t index_size = 4096) {
    std::uint32_t size = 1;
    while (size < static_cast<std::uint32_t>(index_size > 1 ? index_size : 1)) size <<= 1;
    index_.assign(size, no_row);
    mask_ = size - 1;
    reserve(rows);
  }

  /// Rows held (live or free).
  std::int32_t capacity() const noexcept { return static_cast<std::int32_t>(pos_.size()); }
  /// Rows some cache holds.
  std::int32_t live_rows() const noexcept {
    return capacity() - static_cast<std::int32_t>(free_.size());
  }
  /// Most rows live at once since construction.
  std::int32_t peak_rows() const noexcept { return peak_; }
  /// Bytes of the table's arrays at their current capacity.
  std::size_t bytes() const noexcept {
    return static_cast<std::size_t>(capacity()) * bytes_per_row +
           index_.size() * sizeof(std::uint32_t) + free_.capacity() * sizeof(std::uint32_t);
  }
  /// Bytes per row: position, speaker, voice, flags, prior, reference count.
  static constexpr std::size_t bytes_per_row = 4 + 4 + 4 + 1 + 4 + 4;

  /// Grows the table to `rows` rows (new rows free); never shrinks. Allocates.
  void reserve(std::int32_t rows) {
    const std::int32_t old = capacity();
    if (rows <= old) return;
    const auto n = static_cast<std::size_t>(rows);
    // capacity() is pos_.size(): it grows last, so a std::bad_alloc leaves the table as it was.
    free_.reserve(n);
    speaker_.resize(n);
    voice_.resize(n);
    flags_.resize(n);
    prior_.resize(n);
    refs_.resize(n, 0);
    pos_.resize(n);
    for (std::int32_t r = rows - 1; r >= old; --r) free_.push_back(static_cast<std::uint32_t>(r));
  }

  /// Makes sure the next `count` acquire() calls find a free row (grows by at least doubling
  /// when they would not), so they cannot throw. Allocates only then.
  void ensure_free(std::int32_t count) {
    const auto free_rows = static_cast<std::int32_t>(free_.size());
    if (count <= free_rows) return;
    const std::int32_t need = capacity() + (count - free_rows);
    reserve(need > 2 * capacity() ? need : 2 * capacity());
  }

  /// The row holding frame `f` with one more reference: the live row at f.pos when its
  /// metadata is bit-identical, else a free row (grown by doubling when none is left).
  std::uint32_t acquire(const frame_meta& f) {
    std::uint32_t& entry = index_[static_cast<std::uint32_t>(f.pos) & mask_];
    if (entry != no_row && refs_[entry] > 0 && pos_[entry] == f.pos && same(entry, f)) {
      ++refs_[entry];
      return entry;
    }
    ensure_free(1);
    const std::uint32_t row = free_.back();
    free_.pop_back();
    pos_[row] = f.pos;
    speaker_[row] = f.speaker;
    voice_[row] = f.voice;
    flags_[row] = f.flags;
    prior_[row] = f.prior;
    refs_[row] = 1;
    entry = row;
    if (live_rows() > peak_) peak_ = live_rows();
    return row;
  }

  /// One more reference to a live row (a copy of a cache holds its cells twice).
  void retain(std::uint32_t row) noexcept { ++refs_[row]; }

  /// One reference less; the row becomes free at 0.
  void release(std::uint32_t row) noexcept {
    if (--refs_[row] == 0) free_.push_back(row);  // free_ has capacity for every row
  }

  /// The frame of a live row.
  frame_meta frame(std::uint32_t row) const noexcept {
    return frame_meta{pos_[row], speaker_[row], voice_[row], flags_[row], prior_[row]};
  }
  /// Position of a row's frame.
  std::int32_t pos(std::uint32_t row) const noexcept { return pos_[row]; }
  /// Speaker of a row's frame.
  std::int32_t speaker(std::uint32_t row) const noexcept { return speaker_[row]; }
  /// Voice activity of a row's frame.
  float voice(std::uint32_t row) const noexcept { return voice_[row]; }
  /// Flags of a row's frame.
  std::uint8_t flags(std::uint32_t row) const noexcept { return flags_[row]; }
  /// Prior of a row's frame.
  float prior(std::uint32_t row) const noexcept { return prior_[row]; }
  /// References to a row (0: free).
  std::uint32_t references(std::uint32_t row) const noexcept { return refs_[row]; }

 private:
  static constexpr std::uint32_t no_row = 0xFFFFFFFFu;

  /// Bit-identical metadata (floats by their bits, so -0 and 0 stay apart).
  bool same(std::uint32_t row, const frame_meta& f) const noexcept {
    return speaker_[row] == f.speaker && flags_[row] == f.flags &&
           bits(voice_[row]) == bits(f.voice) && bits(prior_[row]) == bits(f.prior);
  }
  static std::uint32_t bits(float v) noexcept {
    std::uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  }

  std::vector<std::int32_t> pos_;      // [rows]
  std::vector<std::int32_t> speaker_;  // [rows]
  std::vector<float> voice_;           // [rows]
  std::vector<std::uint8_t> flags_;    // [rows]
  std::vector<float> prior_;           // [rows]
  std::vector<std::uint32_t> refs_;    // [rows] caches holding the row
  std::vector<std::uint32_t> free_;    // free rows (a stack), capacity = rows
  std::vector<std::uint32_t> index_;   // [2^k] row of the newest frame at pos mod 2^k
  std::uint32_t mask_ = 0;
  std::int32_t peak_ = 0;
};

}  // namespace audiokv
