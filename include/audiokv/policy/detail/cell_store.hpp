// SPDX-License-Identifier: Apache-2.0
/// @file
/// The cells every policy keeps (cell_store: positions, frame metadata, tiers, generation and
/// identity) and applying a plan to them. The checks it runs are in frame_checks.hpp,
/// score_checks.hpp and plan_checks.hpp, plan building and compaction in plan_compaction.hpp,
/// its snapshot form in cell_store_io.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../../core/compaction.hpp"
#include "../../detail/describe.hpp"
#include "../../error.hpp"
#include "../../span.hpp"
#include "../../types/eviction_plan.hpp"
#include "../../types/frame.hpp"
#include "../../types/frame_table.hpp"
#include "../../types/pool_split.hpp"
#include "cache_identity.hpp"
#include "cell_positions.hpp"
#include "frame_checks.hpp"
#include "plan_checks.hpp"
#include "plan_compaction.hpp"
#include "score_checks.hpp"
#include "snapshot_io.hpp"

namespace audiokv::policy::detail {

/// @brief Structure-of-arrays metadata of the cached cells, capacity reserved up front (and
/// grown only by reserve()), and the identity stamped on plans. Every const member only reads:
/// plan builders write into the plan (eviction_plan::scratch), never into the store.
///
/// Frame metadata (speaker, voice, flags, prior) is held per cell by default (17 bytes with
/// the position); after share_frames() it lives in a frame_table shared by the caches of a
/// sequence, found by position, and each cell holds only its position and tier. Readers use
/// speaker_of(j), voice_of(j), flags_of(j), prior_of(j) in either mode; the array accessors
/// speaker(), voice(), flags(), prior() exist only while the metadata is held per cell
/// (nullptr after share_frames()).
class cell_store {
 public:
  cell_store() = default;
  cell_store(std::int32_t capacity, std::int32_t num_speakers)
      : capacity_(capacity), num_speakers_(num_speakers) {
    cells_.pos_.resize(capacity);
    speaker_.resize(capacity);
    voice_.resize(capacity);
    flags_.resize(capacity);
    prior_.resize(capacity);
    tier_.resize(capacity);
  }
  cell_store(const cell_store&) = default;
  cell_store& operator=(const cell_store&) = default;
  /// Takes the cells, their arrays and the identity; `other` is left an empty store of
  /// capacity 0 (no arrays, no shared table, a new identity, its generation advanced), which
  /// reserve() makes usable again.
  cell_store(cell_store&& other) noexcept
      : speaker_(std::move(other.speaker_)),
        voice_(std::move(other.voice_)),
        flags_(std::move(other.flags_)),
        prior_(std::move(other.prior_)),
        tier_(std::move(other.tier_)),
        cells_(std::move(other.cells_)),
        capacity_(other.capacity_),
        num_speakers_(other.num_speakers_),
        size_(other.size_),
        newest_pos_(other.newest_pos_),
        has_frames_(other.has_frames_),
        generation_(other.generation_),
        identity_(std::move(other.identity_)) {
    other.become_empty();
  }
  /// Move assignment with the moved-from state of the move constructor.
  cell_store& operator=(cell_store&& other) noexcept {
    if (this != &other) {
      speaker_ = std::move(other.speaker_);
      voice_ = std::move(other.voice_);
      flags_ = std::move(other.flags_);
      prior_ = std::move(other.prior_);
      tier_ = std::move(other.tier_);
      cells_ = std::move(other.cells_);  // releases this store's references first
      capacity_ = other.capacity_;
      num_speakers_ = other.num_speakers_;
      size_ = other.size_;
      newest_pos_ = other.newest_pos_;
      has_frames_ = other.has_frames_;
      generation_ = other.generation_;
      identity_ = std::move(other.identity_);
      other.become_empty();
    }
    return *this;
  }
  ~cell_store() = default;

  /// Grows every per-cell array to `new_capacity` slots, keeping cells, metadata, the
  /// generation (outstanding plans stay valid) and every value in order. A request at or below
  /// capacity() is a no-op (like std::vector::reserve): capacity never shrinks. Allocates and
  /// copies O(capacity): call it between decode steps. capacity() changes last, so a
  /// std::bad_alloc part-way leaves the observable state as it was.
  void reserve(std::int32_t new_capacity) {
    if (new_capacity <= capacity_) return;
    cells_.pos_.resize(new_capacity);
    if (!cells_.table_) {
      speaker_.resize(new_capacity);
      voice_.resize(new_capacity);
      flags_.resize(new_capacity);
      prior_.resize(new_capacity);
    }
    tier_.resize(new_capacity);
    capacity_ = new_capacity;
  }

  /// Drops every cell and the position history, as after construction; capacity, speaker count
  /// and identity stay, and the generation advances, so plans made before are stale.
  void reset() noexcept {
    cells_.release_all();
    size_ = 0;
    newest_pos_ = 0;
    has_frames_ = false;
    ++generation_;
  }

  /// Moves the metadata of the cells into `table` (one row per position, shared with the
  /// other caches holding the same frames) and frees the per-cell arrays; later cells go there
  /// too. Once per store: a store that already shares keeps its table. Allocates (rows below
  /// the table's ring when its reserve is short).
  /// @throws audiokv::error naming `where` and "table" when a cell's metadata differs from
  ///         what the table holds at its position; nothing changes then.
  void share_frames(const char* where, std::shared_ptr<frame_table> table) {
    if (cells_.table_ || !table) return;
    for (std::int32_t j = 0; j < size_; ++j) {
      const frame_meta own = frame_of(j);
      if (table->agrees(own)) continue;
      ::audiokv::detail::throw_invalid_part(
          where, "table",
          frame_mismatch(own, table->frame(own.pos)) +
              " (this cache's cell against the table's row): the caches of a table must hold "
              "one sequence's frames");
    }
    table->prepare_each(size_, [this](std::int32_t j) { return cells_.pos_[j]; });
    for (std::int32_t j = 0; j < size_; ++j) table->acquire(frame_of(j));  // cannot throw now
    cells_.table_ = std::move(table);
    cells_.held_ = size_;
    std::vector<std::int32_t>().swap(speaker_);
    std::vector<float>().swap(voice_);
    std::vector<std::uint8_t>().swap(flags_);
    std::vector<float>().swap(prior_);
  }
  /// True after share_frames(): the metadata lives in frames().
  bool shares_frames() const noexcept { return cells_.table_ != nullptr; }
  /// The shared table (null while the metadata is held per cell).
  const std::shared_ptr<frame_table>& frames() const noexcept { return cells_.table_; }

  /// The frame of cell j.
  frame_meta frame_of(std::int32_t j) const noexcept {
    return cells_.table_ ? cells_.table_->frame(cells_.pos_[j])
                         : frame_meta{cells_.pos_[j], speaker_[j], voice_[j], flags_[j], prior_[j]};
  }
  /// Speaker of cell j.
  std::int32_t speaker_of(std::int32_t j) const noexcept {
    return cells_.table_ ? cells_.table_->speaker(cells_.pos_[j]) : speaker_[j];
  }
  /// Voice activity of cell j.
  float voice_of(std::int32_t j) const noexcept {
    return cells_.table_ ? cells_.table_->voice(cells_.pos_[j]) : voice_[j];
  }
  /// Flags of cell j.
  std::uint8_t flags_of(std::int32_t j) const noexcept {
    return cells_.table_ ? cells_.table_->flags(cells_.pos_[j]) : flags_[j];
  }
  /// Prior of cell j.
  float prior_of(std::int32_t j) const noexcept {
    return cells_.table_ ? cells_.table_->prior(cells_.pos_[j]) : prior_[j];
  }
  /// Speakers of cells [first, first + count) into out[0, count) (after share_frames()).
  void gather_speakers(std::int32_t first, std::int32_t count, std::int32_t* out) const noexcept {
    cells_.table_->gather_speakers(cells_.pos_.data() + first, count, out);
  }

  std::int32_t size() const noexcept { return size_; }
  std::int32_t capacity() const noexcept { return capacity_; }
  std::int32_t num_speakers() const noexcept { return num_speakers_; }
  std::uint64_t generation() const noexcept { return generation_; }
  /// Unique id of this cache (see cache_identity), stamped on every plan it builds.
  std::uint64_t id() const noexcept { return identity_.value(); }
  /// Position of the newest frame ever appended (kept or not); appends must exceed it.
  std::int32_t newest_pos() const noexcept { return newest_pos_; }
  bool has_frames() const noexcept { return has_frames_; }

  const std::int32_t* pos() const noexcept { return cells_.pos_.data(); }
  const std::int32_t* speaker() const noexcept { return speaker_.data(); }
  const float* voice() const noexcept { return voice_.data(); }
  const std::uint8_t* flags() const noexcept { return flags_.data(); }
  const float* prior() const noexcept { return prior_.data(); }
  const pool_tier* tier() const noexcept { return tier_.data(); }
  pool_tier* tier() noexcept { return tier_.data(); }

  /// check_num_cells() against size().
  void validate_num_cells(const char* where, std::int32_t num_cells) const {
    check_num_cells(where, num_cells, size_);
  }
  /// check_scores() against size().
  void validate_scores(const char* where, const float* attention, std::int32_t num_cells) const {
    check_scores(where, attention, num_cells, size_);
  }
  /// check_group() against size().
  void validate_group(const char* where, span<const float> attention, std::int32_t group_size,
                      std::int32_t num_cells) const {
    check_group(where, attention, group_size, num_cells, size_);
  }

  /// Appends validated frames; new cells enter `entry_tier(frame)`. With a shared table it
  /// allocates only when the table has fewer than `count` free rows (then, if that throws,
  /// nothing changed).
  template <class EntryTier>
  void append(const frame_meta* frames, std::int32_t count, EntryTier entry_tier) {
    if (cells_.table_) {
      cells_.table_->prepare(frames, count);  // the acquire() calls below then cannot throw
      for (std::int32_t i = 0; i < count; ++i) cells_.table_->acquire(frames[i]);
    }
    for (std::int32_t i = 0; i < count; ++i) {
      const std::int32_t slot = size_ + i;
      cells_.pos_[slot] = frames[i].pos;
      if (!cells_.table_) {
        speaker_[slot] = frames[i].speaker;
        voice_[slot] = frames[i].voice;
        flags_[slot] = frames[i].flags;
        prior_[slot] = frames[i].prior;
      }
      tier_[slot] = entry_tier(frames[i]);
    }
    size_ += count;
    if (cells_.table_) cells_.held_ = size_;
    if (count > 0) {
      has_frames_ = true;
      newest_pos_ = frames[count - 1].pos;
    }
    ++generation_;
  }

  /// The evict mask in `out`'s scratch, [num_cells()] cleared to 0.
  std::uint8_t* clear_evict_mask(eviction_plan& out) const {
    return ::audiokv::policy::detail::clear_evict_mask(out, size_);
  }
  /// build_plan() of the current state from the evict mask in `out`'s scratch.
  void build_plan(eviction_plan& out) const {
    ::audiokv::policy::detail::build_plan(out, size_, generation_, id());
  }

  /// An empty plan for the current state.
  void build_empty_plan(eviction_plan& out) const {
    clear_evict_mask(out);
    build_plan(out);
    out.scores.clear();
    out.ratio = 0.0f;
    out.normalized_entropy = 1.0f;
  }

  /// Throws unless `plan` was made for the current state and is well formed (check_plan()).
  void validate_plan(const char* where, const eviction_plan& plan) const {
    check_plan(where, plan, id(), generation_, size_, tier_.data());
  }

  /// Checks a batch of frames against the current state (check_frames()); throws naming
  /// frames[i].field.
  void validate_append(const char* where, const frame_meta* frames, std::int32_t count) const {
    check_frames(where, frames, count, size_, capacity_,
                 has_frames_ ? static_cast<std::int64_t>(newest_pos_) : INT64_MIN, num_speakers_,
                 cells_.table_.get());
  }

  /// Applies a validated plan to the metadata (tiers first, in old slots).
  void apply(const eviction_plan& plan) {
    apply_and_move(plan, [](std::int32_t, std::int32_t) {});
  }

  /// @brief Applies a validated plan to the metadata (tiers first, in old slots) and moves the
  /// caller's own per-cell arrays in the same pass over the move map.
  ///
  /// The result is that of apply(plan) followed by compact_array() on each of the caller's
  /// arrays: every entry from the first evicted slot on is copied to the running kept count
  /// (stable, without a branch; entries before the first evicted slot stay in place).
  /// @param plan a plan validate_plan() accepted for the current state.
  /// @param move_cell called as move_cell(to, from) with to <= from for every slot `from` from
  ///        the first evicted one on, in ascending order; it copies the caller's entries of
  ///        cell `from` to `to` (plain stores: it must not throw).
  template <class MoveCell>
  void apply_and_move(const eviction_plan& plan, MoveCell move_cell) {
    for (const std::int32_t slot : plan.promote) tier_[slot] = pool_tier::base;
    for (const std::int32_t slot : plan.demote) tier_[slot] = pool_tier::buffer;
    if (cells_.table_) {
      for (const std::int32_t slot : plan.evict) cells_.table_->release(cells_.pos_[slot]);
      cells_.held_ = plan.n_kv_after;
    }
    // Pointers, map and count in locals: a store through a byte-typed array could alias them.
    const std::int32_t n = plan.n_kv_before;
    const std::int32_t* move_to = plan.move_to.data();
    const std::int32_t first = plan.evict.empty() ? n : plan.evict.front();
    std::int32_t* pos = cells_.pos_.data();
    pool_tier* tier = tier_.data();
    std::int32_t kept = first;
    if (!cells_.table_) {
      std::int32_t* speaker = speaker_.data();
      float* voice = voice_.data();
      std::uint8_t* flags = flags_.data();
      float* prior = prior_.data();
      for (std::int32_t i = first; i < n; ++i) {
        pos[kept] = pos[i];
        speaker[kept] = speaker[i];
        voice[kept] = voice[i];
        flags[kept] = flags[i];
        prior[kept] = prior[i];
        tier[kept] = tier[i];
        move_cell(kept, i);
        kept += move_to[i] != core::evicted_slot ? 1 : 0;
      }
    } else {
      for (std::int32_t i = first; i < n; ++i) {
        pos[kept] = pos[i];
        tier[kept] = tier[i];
        move_cell(kept, i);
        kept += move_to[i] != core::evicted_slot ? 1 : 0;
      }
    }
    size_ = plan.n_kv_after;
    ++generation_;
  }

 private:
  friend struct cell_store_io;  // the snapshot form of the store

  /// The state a move leaves behind: no cells and capacity 0 (the arrays went with the move).
  void become_empty() noexcept {
    capacity_ = 0;
    reset();
  }

  std::vector<std::int32_t> speaker_;  // [capacity] per cell, or empty after share_frames()
  std::vector<float> voice_;           // [capacity] per cell, or empty after share_frames()
  std::vector<std::uint8_t> flags_;    // [capacity] frame_flag bits, or empty when shared
  std::vector<float> prior_;           // [capacity] per cell, or empty after share_frames()
  std::vector<pool_tier> tier_;        // [capacity]
  cell_positions cells_;               // positions, and their references once shared
  std::int32_t capacity_ = 0;
  std::int32_t num_speakers_ = 1;
  std::int32_t size_ = 0;
  std::int32_t newest_pos_ = 0;
  bool has_frames_ = false;
  std::uint64_t generation_ = 1;
  cache_identity identity_;  // a copy is another cache; a move keeps the id
};

}  // namespace audiokv::policy::detail
