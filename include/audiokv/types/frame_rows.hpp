// SPDX-License-Identifier: Apache-2.0
/// @file
/// Rows of frame metadata with a reference count, held as parallel arrays: the storage of a
/// frame_table's ring and of its rows below the ring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "frame.hpp"

namespace audiokv::types {

/// @brief Frame metadata rows (position, speaker, voice, flags, prior) and the number of caches
/// holding each, one array per field (structure of arrays). Row i is the i-th entry of every
/// array; the arrays always have one length.
struct frame_rows {
  std::vector<std::int32_t> pos;      ///< position of each row
  std::vector<std::int32_t> speaker;  ///< speaker id
  std::vector<float> voice;           ///< voice activity
  std::vector<std::uint8_t> flags;    ///< frame_flag bits
  std::vector<float> prior;           ///< prior importance
  std::vector<std::uint32_t> refs;    ///< caches holding the row's position (0: released)

  /// Rows in use.
  std::size_t size() const noexcept { return pos.size(); }
  /// `n` rows, every field 0.
  void assign(std::size_t n) {
    pos.assign(n, 0);
    speaker.assign(n, 0);
    voice.assign(n, 0.0f);
    flags.assign(n, 0);
    prior.assign(n, 0.0f);
    refs.assign(n, 0);
  }
  /// Room for `n` rows in every array. pos (whose capacity reports the room) grows last: a
  /// std::bad_alloc part-way leaves every reserve at least as large as before.
  void reserve(std::size_t n) {
    speaker.reserve(n);
    voice.reserve(n);
    flags.reserve(n);
    prior.reserve(n);
    refs.reserve(n);
    pos.reserve(n);
  }
  /// The first `n` rows (n <= size(); no allocation).
  void resize(std::size_t n) {
    pos.resize(n);
    speaker.resize(n);
    voice.resize(n);
    flags.resize(n);
    prior.resize(n);
    refs.resize(n);
  }
  /// No rows (the capacity is kept).
  void clear() noexcept {
    pos.clear();
    speaker.clear();
    voice.clear();
    flags.clear();
    prior.clear();
    refs.clear();
  }

  /// Row i becomes frame f held `count` times.
  void set(std::size_t i, const frame_meta& f, std::uint32_t count) noexcept {
    pos[i] = f.pos;
    set_metadata(i, f);
    refs[i] = count;
  }
  /// Row i takes f's speaker, voice, flags and prior (its position and count stay).
  void set_metadata(std::size_t i, const frame_meta& f) noexcept {
    speaker[i] = f.speaker;
    voice[i] = f.voice;
    flags[i] = f.flags;
    prior[i] = f.prior;
  }
  /// A row of frame f held `count` times, inserted before row i (allocates past the reserve).
  void insert(std::size_t i, const frame_meta& f, std::uint32_t count) {
    const auto at = static_cast<std::ptrdiff_t>(i);
    pos.insert(pos.begin() + at, f.pos);
    speaker.insert(speaker.begin() + at, f.speaker);
    voice.insert(voice.begin() + at, f.voice);
    flags.insert(flags.begin() + at, f.flags);
    prior.insert(prior.begin() + at, f.prior);
    refs.insert(refs.begin() + at, count);
  }
  /// Appends row i of `from` (allocates past the reserve).
  void push_back(const frame_rows& from, std::size_t i) {
    pos.push_back(from.pos[i]);
    speaker.push_back(from.speaker[i]);
    voice.push_back(from.voice[i]);
    flags.push_back(from.flags[i]);
    prior.push_back(from.prior[i]);
    refs.push_back(from.refs[i]);
  }
  /// Row `to` becomes a copy of row `from`.
  void move_row(std::size_t to, std::size_t from) noexcept {
    pos[to] = pos[from];
    speaker[to] = speaker[from];
    voice[to] = voice[from];
    flags[to] = flags[from];
    prior[to] = prior[from];
    refs[to] = refs[from];
  }
  /// True when row i holds f's speaker, voice, flags and prior (floats compared by their bits).
  bool same(std::size_t i, const frame_meta& f) const noexcept {
    return speaker[i] == f.speaker && flags[i] == f.flags && bits(voice[i]) == bits(f.voice) &&
           bits(prior[i]) == bits(f.prior);
  }

 private:
  static std::uint32_t bits(float v) noexcept {
    std::uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  }
};

}  // namespace audiokv::types
