// SPDX-License-Identifier: Apache-2.0
/// @file
/// Frame metadata shared by the caches of one sequence: the (layer, KV head) caches of a
/// sequence see the same frames, so their speaker, voice, flags and prior are held once per
/// frame position here, and each cache keeps per cell only what is its own (position,
/// importance, tier).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "frame.hpp"
#include "frame_rows.hpp"

namespace audiokv::types {

/// @brief Reference-counted frame metadata indexed by absolute frame position.
///
/// A cache attached to a table acquire()s the position of each appended cell and release()s it
/// when the cell is evicted, the cache is reset or destroyed; a position is live while some
/// cache holds it. Every cache of a sequence appends the same frames, so a position has one
/// metadata: acquiring a live position with other metadata is refused (agrees() is false).
///
/// Layout: a ring of `window` rows (a power of two) holds the positions [lo, lo + window),
/// found by position mod window; when a newer position arrives, lo advances and the live rows
/// it passes move, in position order, to a sorted area of older rows (the cells a policy keeps
/// for long: sinks, segment starts, strong cells), found by binary search. Readers of a cell's
/// metadata therefore cost one indexed load for recent cells and O(log old_rows()) for older
/// ones.
///
/// Memory: 21 bytes per ring row and per older row (position, speaker, voice, flags, prior,
/// count). Allocates only when the older rows outgrow their reserve (reserve_old()); the ring
/// never grows.
///
/// Threads: acquire() and release() write the table, so the caches attached to one table must
/// not run mutating calls concurrently, nor a mutating call concurrently with any call of
/// another of them; reads may run concurrently with each other.
class frame_table {
 public:
  /// A table whose ring holds `window` positions (rounded up to a power of two, at least 1),
  /// with room reserved for `old_rows` live rows older than the ring.
  explicit frame_table(std::int32_t window = 8192, std::int32_t old_rows = 0) {
    std::uint32_t size = 1;
    while (size < static_cast<std::uint32_t>(window > 1 ? window : 1)) size <<= 1;
    mask_ = size - 1;
    ring_.assign(size);
    reserve_old(old_rows);
  }

  /// An independent table with the same rows and reference counts (no cache releases into it).
  frame_table(const frame_table&) = default;
  /// Copy assignment: see the copy constructor.
  frame_table& operator=(const frame_table&) = default;
  /// Takes every row. `other` is left an empty table without a ring (window() 0): every
  /// position it is given later goes to the sorted rows below the ring, which grow as needed
  /// (acquire() allocates), so it stays valid for every call. Caches attached to a table hold
  /// it through a std::shared_ptr and their positions in it: move a table only while none is
  /// attached.
  frame_table(frame_table&& other) noexcept
      : ring_(std::move(other.ring_)),
        old_(std::move(other.old_)),
        mask_(other.mask_),
        lo_(other.lo_),
        started_(other.started_),
        live_(other.live_),
        old_live_(other.old_live_),
        dead_(other.dead_),
        peak_(other.peak_) {
    other.become_ringless();
  }
  /// Move assignment, with the moved-from state of the move constructor.
  frame_table& operator=(frame_table&& other) noexcept {
    if (this != &other) {
      ring_ = std::move(other.ring_);
      old_ = std::move(other.old_);
      mask_ = other.mask_;
      lo_ = other.lo_;
      started_ = other.started_;
      live_ = other.live_;
      old_live_ = other.old_live_;
      dead_ = other.dead_;
      peak_ = other.peak_;
      other.become_ringless();
    }
    return *this;
  }
  ~frame_table() = default;

  /// Positions the ring holds (a power of two; 0 once moved from).
  std::int32_t window() const noexcept { return static_cast<std::int32_t>(ring_.pos.size()); }
  /// Live positions (held by at least one cache).
  std::int32_t live_rows() const noexcept { return live_; }
  /// Most positions live at once since construction.
  std::int32_t peak_rows() const noexcept { return peak_; }
  /// Rows below the ring, live or waiting to be compacted.
  std::int32_t old_rows() const noexcept { return static_cast<std::int32_t>(old_.pos.size()); }
  /// Bytes per row: position, speaker, voice, flags, prior, reference count.
  static constexpr std::size_t bytes_per_row = 4 + 4 + 4 + 1 + 4 + 4;
  /// Bytes of the table's arrays at their current capacity.
  std::size_t bytes() const noexcept {
    return (ring_.pos.size() + old_.pos.capacity()) * bytes_per_row;
  }

  /// Reserves room for `rows` rows below the ring; never shrinks. Allocates.
  void reserve_old(std::int32_t rows) {
    if (rows <= static_cast<std::int32_t>(old_.pos.capacity())) return;
    old_.reserve(static_cast<std::size_t>(rows));
  }

  /// Caches holding position `pos` (0: not live).
  std::uint32_t references(std::int32_t pos) const noexcept {
    if (in_ring(pos)) {
      const std::uint32_t r = slot(pos);
      return ring_.pos[r] == pos ? ring_.refs[r] : 0;
    }
    const std::size_t i = old_index(pos);
    return i < old_.pos.size() && old_.pos[i] == pos ? old_.refs[i] : 0;
  }

  /// False when position f.pos is live with other metadata (floats compared by their bits).
  bool agrees(const frame_meta& f) const noexcept {
    if (in_ring(f.pos)) {
      const std::uint32_t r = slot(f.pos);
      return ring_.pos[r] != f.pos || ring_.refs[r] == 0 || ring_.same(r, f);
    }
    const std::size_t i = old_index(f.pos);
    return i == old_.pos.size() || old_.pos[i] != f.pos || old_.refs[i] == 0 || old_.same(i, f);
  }

  /// Makes sure that acquiring `frames[0, count)` (ascending positions, in that order) cannot
  /// throw: reserves the rows below the ring they would need (compacting released ones first).
  /// Allocates only when that reserve is too small.
  void prepare(const frame_meta* frames, std::int32_t count) {
    prepare_each(count, [frames](std::int32_t i) { return frames[i].pos; });
  }

  /// prepare() for the positions position_at(0), ..., position_at(count - 1) (ascending).
  template <class PositionAt>
  void prepare_each(std::int32_t count, PositionAt position_at) {
    std::int64_t lo = lo_, extra = 0;
    bool started = started_;
    if (count > 0 &&
        static_cast<std::int64_t>(position_at(count - 1)) - position_at(0) >= window()) {
      extra += count;  // frames of this call may pass below the ring too
    }
    for (std::int32_t i = 0; i < count; ++i) {
      const std::int64_t p = position_at(i);
      if (!started) {
        lo = p;
        started = true;
      }
      if (p >= lo + window()) {
        const std::int64_t next = p - window() + 1;
        for (std::int64_t q = lo; q < std::min(next, lo + window()); ++q) {
          const std::uint32_t r = slot(static_cast<std::int32_t>(q));
          extra += ring_.pos[r] == q && ring_.refs[r] > 0 ? 1 : 0;
        }
        lo = next;
      } else if (p < lo) {
        extra += 1;
      }
    }
    ensure_old_room(extra);
  }

  /// Makes room for `extra` more rows below the ring (compacting released ones first).
  void ensure_old_room(std::int64_t extra) {
    const auto need = static_cast<std::int64_t>(old_.pos.size()) + extra;
    if (need <= static_cast<std::int64_t>(old_.pos.capacity())) return;
    compact_old();
    const auto still = static_cast<std::int64_t>(old_.pos.size()) + extra;
    if (still <= static_cast<std::int64_t>(old_.pos.capacity())) return;
    const auto doubled = 2 * static_cast<std::int64_t>(old_.pos.capacity());
    reserve_old(static_cast<std::int32_t>(std::max<std::int64_t>({still, doubled, 64})));
  }

  /// Live rows of the ring (an upper bound of the rows a restore may move below it).
  std::int32_t ring_live_rows() const noexcept { return live_ - old_live_; }

  /// One more reference to position f.pos, written with f's metadata when it was not live.
  /// Preconditions: agrees(f), and room prepared (prepare()) when it must not allocate.
  void acquire(const frame_meta& f) {
    if (!started_) {
      lo_ = f.pos;
      started_ = true;
    }
    if (static_cast<std::int64_t>(f.pos) >= lo_ + window()) advance(f.pos);
    if (in_ring(f.pos)) {
      const std::uint32_t r = slot(f.pos);
      if (ring_.pos[r] == f.pos && ring_.refs[r] > 0) {
        ++ring_.refs[r];
        return;
      }
      ring_.set(r, f, 1);
      became_live();
      return;
    }
    ensure_old_room(1);  // before locating the row: it may compact the rows below the ring
    const std::size_t i = old_index(f.pos);
    if (i < old_.pos.size() && old_.pos[i] == f.pos) {
      if (old_.refs[i]++ == 0) {  // a released row taken again
        old_.set_metadata(i, f);
        --dead_;
        ++old_live_;
        became_live();
      }
      return;
    }
    old_.insert(i, f, 1u);
    ++old_live_;
    became_live();
  }

  /// One more reference to a live position (a copy of a cache holds its cells twice).
  void retain(std::int32_t pos) noexcept {
    if (in_ring(pos)) {
      ++ring_.refs[slot(pos)];
    } else {
      ++old_.refs[old_index(pos)];
    }
  }

  /// One reference less to a live position; it is released at 0.
  void release(std::int32_t pos) noexcept {
    if (in_ring(pos)) {
      if (--ring_.refs[slot(pos)] == 0) --live_;
      return;
    }
    if (--old_.refs[old_index(pos)] == 0) {
      --live_;
      --old_live_;
      ++dead_;
      // Released rows below the ring are dropped once they are most of it (in place).
      if (dead_ > 64 && 2 * dead_ > static_cast<std::int32_t>(old_.pos.size())) compact_old();
    }
  }

  /// The metadata of a live position.
  frame_meta frame(std::int32_t pos) const noexcept {
    if (in_ring(pos)) {
      const std::uint32_t r = slot(pos);
      return frame_meta{pos, ring_.speaker[r], ring_.voice[r], ring_.flags[r], ring_.prior[r]};
    }
    const std::size_t i = old_index(pos);
    return frame_meta{pos, old_.speaker[i], old_.voice[i], old_.flags[i], old_.prior[i]};
  }
  /// Speaker of a live position.
  std::int32_t speaker(std::int32_t pos) const noexcept {
    return in_ring(pos) ? ring_.speaker[slot(pos)] : old_.speaker[old_index(pos)];
  }
  /// Voice activity of a live position.
  float voice(std::int32_t pos) const noexcept {
    return in_ring(pos) ? ring_.voice[slot(pos)] : old_.voice[old_index(pos)];
  }
  /// Flags of a live position.
  std::uint8_t flags(std::int32_t pos) const noexcept {
    return in_ring(pos) ? ring_.flags[slot(pos)] : old_.flags[old_index(pos)];
  }
  /// Prior of a live position.
  float prior(std::int32_t pos) const noexcept {
    return in_ring(pos) ? ring_.prior[slot(pos)] : old_.prior[old_index(pos)];
  }
  /// Speakers of the live positions pos[0, n) (ascending) into out[0, n): the older ones by
  /// one merge pass over the rows below the ring.
  void gather_speakers(const std::int32_t* pos, std::int32_t n, std::int32_t* out) const noexcept {
    std::int32_t k = 0;
    auto from = old_.pos.begin();
    for (; k < n && !in_ring(pos[k]); ++k) {
      from = std::lower_bound(from, old_.pos.end(), pos[k]);
      out[k] = old_.speaker[static_cast<std::size_t>(from - old_.pos.begin())];
    }
    for (; k < n; ++k) out[k] = ring_.speaker[slot(pos[k])];
  }

 private:
  bool in_ring(std::int32_t pos) const noexcept { return static_cast<std::int64_t>(pos) >= lo_; }
  std::uint32_t slot(std::int32_t pos) const noexcept {
    return static_cast<std::uint32_t>(pos) & mask_;
  }
  std::size_t old_index(std::int32_t pos) const noexcept {
    return static_cast<std::size_t>(std::lower_bound(old_.pos.begin(), old_.pos.end(), pos) -
                                    old_.pos.begin());
  }
  /// The state a move leaves behind: no ring and no rows. The ring starts above every int32
  /// position, so no position is ever in it and each one goes to the rows below it.
  void become_ringless() noexcept {
    ring_.clear();
    old_.clear();
    mask_ = 0;
    lo_ = std::int64_t{1} << 40;
    started_ = true;
    live_ = 0;
    old_live_ = 0;
    dead_ = 0;
    peak_ = 0;
  }

  void became_live() noexcept {
    ++live_;
    if (live_ > peak_) peak_ = live_;
  }

  /// Moves the ring's start so that `pos` fits: the live rows it passes go below the ring, in
  /// position order (room prepared by prepare()).
  void advance(std::int32_t pos) {
    const std::int64_t next = static_cast<std::int64_t>(pos) - window() + 1;
    const std::int64_t end = std::min<std::int64_t>(next, lo_ + window());
    for (std::int64_t q = lo_; q < end; ++q) {
      const std::uint32_t r = slot(static_cast<std::int32_t>(q));
      if (ring_.pos[r] != q || ring_.refs[r] == 0) continue;
      ensure_old_room(1);
      old_.push_back(ring_, r);
      ++old_live_;
      ring_.refs[r] = 0;
    }
    lo_ = next;
  }

  /// Drops released rows below the ring, keeping the order (in place, no allocation).
  void compact_old() noexcept {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < old_.pos.size(); ++i) {
      if (old_.refs[i] == 0) continue;
      old_.move_row(kept, i);
      ++kept;
    }
    old_.resize(kept);
    dead_ = 0;
  }

  // The ring: positions [lo_, lo_ + window()) at pos mod window(); refs counts the caches
  // holding the slot's position.
  frame_rows ring_;
  // Rows below the ring, ascending positions; released ones (count 0) until compacted.
  frame_rows old_;
  std::uint32_t mask_ = 0;
  std::int64_t lo_ = 0;   // the ring's first position, once started_
  bool started_ = false;  // a position was acquired (lo_ is set by the first one)
  std::int32_t live_ = 0;
  std::int32_t old_live_ = 0;
  std::int32_t dead_ = 0;
  std::int32_t peak_ = 0;
};

}  // namespace audiokv::types

namespace audiokv {
using types::frame_table;
}  // namespace audiokv
