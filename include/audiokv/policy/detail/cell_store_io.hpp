// SPDX-License-Identifier: Apache-2.0
/// @file
/// The snapshot form of a cell_store: its positions, frame metadata and tiers written and read
/// back with every value checked (the cells part of a tiered_cache snapshot).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "../../types/frame.hpp"
#include "../../types/frame_table.hpp"
#include "../../types/pool_split.hpp"
#include "cell_store.hpp"
#include "snapshot_io.hpp"

namespace audiokv::policy::detail {

/// @brief Writes a cell_store into a snapshot and reads it back (a friend of cell_store).
struct cell_store_io {
  /// Bytes save() writes for `n` cells.
  static constexpr std::size_t snapshot_bytes(std::int32_t n) noexcept {
    return 4 + 1 + 8 + static_cast<std::size_t>(n) * (4 + 4 + 4 + 1 + 4 + 1);
  }

  /// Writes the store's newest_pos, has_frames, generation and each cell's pos, speaker, voice,
  /// flags, prior and tier (snapshot_bytes(size()) bytes). The identity is not written.
  static void save(const cell_store& store, snapshot_writer& w) noexcept {
    w.i32(store.newest_pos_);
    w.u8(store.has_frames_ ? 1 : 0);
    w.u64(store.generation_);
    for (std::int32_t j = 0; j < store.size_; ++j) w.i32(store.cells_.pos_[j]);
    for (std::int32_t j = 0; j < store.size_; ++j) w.i32(store.speaker_of(j));
    for (std::int32_t j = 0; j < store.size_; ++j) w.f32(store.voice_of(j));
    for (std::int32_t j = 0; j < store.size_; ++j) w.u8(store.flags_of(j));
    for (std::int32_t j = 0; j < store.size_; ++j) w.f32(store.prior_of(j));
    for (std::int32_t j = 0; j < store.size_; ++j) w.u8(static_cast<std::uint8_t>(store.tier_[j]));
  }

  /// Highest generation + 1 a snapshot may carry: 2^63. The restored generation,
  /// max(generation(), saved) + 1, then stays more than 2^63 counts away from wrapping.
  static constexpr std::uint64_t max_snapshot_generation = std::uint64_t{1} << 63;

  /// Reads what save() wrote for `n` <= capacity() cells, checking every value as append()
  /// would (generation below max_snapshot_generation, positions strictly ascending and at
  /// most newest_pos, speakers in [0,
  /// num_speakers), voice in [0, 1], finite priors, tiers valid, at most `max_sinks` sinks);
  /// throws through `r` on the first bad one. Writes the store only when `commit` (a second
  /// pass over input the first pass accepted); the generation then becomes
  /// max(generation(), saved) + 1, so every plan made before is stale. Allocates nothing.
  static void load(cell_store& store, snapshot_reader& r, std::int32_t n, std::int32_t max_sinks,
                   bool commit) {
    const std::int32_t newest = r.i32();
    const bool has_frames = r.flag("has_frames");
    const std::uint64_t generation = r.u64();
    r.check(generation < max_snapshot_generation, generation, "generation",
            "must be below 2^63: a cache counts one generation per append, apply, reset and "
            "restore and never gets there, and from a higher one the counter could wrap and "
            "make a plan stale since then current again");
    r.check(n == 0 || has_frames, n, "num_cells", "must be 0 when no frame was appended");
    const std::byte* arrays = r.here();  // pos, speaker, voice, flags, prior: n values each
    // Cell j's value in the array that starts at n * offset bytes and holds `width` bytes each.
    const auto value = [&](std::size_t offset, std::size_t width, std::int32_t j) {
      return snapshot_reader(r.where(), arrays + static_cast<std::size_t>(n) * offset +
                                            static_cast<std::size_t>(j) * width);
    };
    const bool per_cell = commit && !store.cells_.table_;
    if (commit && store.cells_.table_) {
      // Room first (a std::bad_alloc here changes nothing), then the cells' old positions are
      // released before the snapshot's overwrite them.
      store.cells_.table_->prepare_each(n, [&](std::int32_t j) { return value(0, 4, j).i32(); });
      store.cells_.release_all();
    }
    std::int64_t previous = INT64_MIN;
    for (std::int32_t j = 0; j < n; ++j) {
      const std::int32_t p = r.i32();
      r.check(p > previous && p <= newest, p, "pos", j,
              "must exceed the previous cell's position and not exceed newest_pos");
      previous = p;
      if (commit) store.cells_.pos_[j] = p;
    }
    for (std::int32_t j = 0; j < n; ++j) {
      const std::int32_t s = r.i32();
      r.check(s >= 0 && s < store.num_speakers_, s, "speaker", j, "must be in [0, num_speakers)");
      if (per_cell) store.speaker_[j] = s;
    }
    for (std::int32_t j = 0; j < n; ++j) {
      const float v = r.f32();
      r.check(std::isfinite(v) && v >= 0.0f && v <= 1.0f, v, "voice", j, "must be in [0, 1]");
      if (per_cell) store.voice_[j] = v;
    }
    std::int32_t sinks = 0;
    for (std::int32_t j = 0; j < n; ++j) {
      const std::uint8_t f = r.u8();
      sinks += (f & frame_flag_sink) != 0;
      r.check(sinks <= max_sinks, static_cast<int>(f), "flags", j,
              "is one sink too many for the emergency pool");
      if (per_cell) store.flags_[j] = f;
    }
    for (std::int32_t j = 0; j < n; ++j) {
      const float v = r.f32();
      r.check(std::isfinite(v), v, "prior", j, "must be finite");
      if (per_cell) store.prior_[j] = v;
    }
    for (std::int32_t j = 0; j < n; ++j) {
      const std::uint8_t t = r.u8();
      r.check(t <= static_cast<std::uint8_t>(pool_tier::emergency), static_cast<int>(t), "tier", j,
              "must be 0 (buffer), 1 (base) or 2 (emergency)");
      if (commit) store.tier_[j] = static_cast<pool_tier>(t);
    }
    if (store.cells_.table_) {
      // The checked metadata again, one frame per cell: it must agree with what the table
      // holds for the sequence's other caches (positions only this cache holds are replaced).
      frame_table& table = *store.cells_.table_;
      const std::int32_t* own = store.cells_.pos_.data();
      for (std::int32_t j = 0; j < n; ++j) {
        const frame_meta f{value(0, 4, j).i32(), value(4, 4, j).i32(), value(8, 4, j).f32(),
                           value(12, 1, j).u8(), value(13, 4, j).f32()};
        if (commit) {
          table.acquire(f);  // room prepared above: cannot throw
          continue;
        }
        const bool only_mine =
            table.references(f.pos) == 1 && std::binary_search(own, own + store.size_, f.pos);
        r.check(only_mine || table.agrees(f), f.pos, "pos", j,
                "is a frame the sequence's shared frame table holds with other metadata");
      }
      if (commit) store.cells_.held_ = n;
    }
    if (commit) {
      store.size_ = n;
      store.newest_pos_ = newest;
      store.has_frames_ = has_frames;
      store.generation_ = (generation > store.generation_ ? generation : store.generation_) + 1;
    }
  }
};

}  // namespace audiokv::policy::detail
