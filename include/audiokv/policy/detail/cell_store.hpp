// SPDX-License-Identifier: Apache-2.0
/// @file
/// Per-cell metadata and the plan/apply mechanics every policy shares: argument validation,
/// cache identity, building a stable move map from an evict mask, and compacting per-cell
/// arrays by a plan.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../../core/compaction.hpp"
#include "../../core/importance.hpp"
#include "../../detail/describe.hpp"
#include "../../error.hpp"
#include "../../span.hpp"
#include "../../types/eviction_plan.hpp"
#include "../../types/frame.hpp"
#include "../../types/frame_table.hpp"
#include "../../types/move_map.hpp"
#include "../../types/pool_split.hpp"

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

/// FNV-1a 64 of [data, data + n), continuing from `hash` (offset basis 14695981039346656037,
/// prime 1099511628211).
inline std::uint64_t fnv1a64(const std::byte* data, std::size_t n,
                             std::uint64_t hash = 14695981039346656037ull) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    hash ^= static_cast<std::uint64_t>(data[i]);
    hash *= 1099511628211ull;
  }
  return hash;
}

/// Writes little-endian fixed-width values to a byte buffer the caller sized.
class snapshot_writer {
 public:
  explicit snapshot_writer(std::byte* out) noexcept : out_(out) {}
  void u8(std::uint8_t v) noexcept { out_[at_++] = static_cast<std::byte>(v); }
  void u32(std::uint32_t v) noexcept {
    for (int b = 0; b < 4; ++b) u8(static_cast<std::uint8_t>(v >> (8 * b)));
  }
  void u64(std::uint64_t v) noexcept {
    for (int b = 0; b < 8; ++b) u8(static_cast<std::uint8_t>(v >> (8 * b)));
  }
  void i32(std::int32_t v) noexcept { u32(static_cast<std::uint32_t>(v)); }
  void i64(std::int64_t v) noexcept { u64(static_cast<std::uint64_t>(v)); }
  void f32(float v) noexcept {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    u32(bits);
  }
  void f64(double v) noexcept {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    u64(bits);
  }
  std::size_t written() const noexcept { return at_; }
  const std::byte* data() const noexcept { return out_; }

 private:
  std::byte* out_;
  std::size_t at_ = 0;
};

/// Reads little-endian fixed-width values from a byte buffer whose length the caller checked.
/// check() throws audiokv::error naming "snapshot" with `where` and the message.
class snapshot_reader {
 public:
  snapshot_reader(const char* where, const std::byte* in) noexcept : where_(where), in_(in) {}
  std::uint8_t u8() noexcept { return static_cast<std::uint8_t>(in_[at_++]); }
  std::uint32_t u32() noexcept {
    std::uint32_t v = 0;
    for (int b = 0; b < 4; ++b) v |= static_cast<std::uint32_t>(u8()) << (8 * b);
    return v;
  }
  std::uint64_t u64() noexcept {
    std::uint64_t v = 0;
    for (int b = 0; b < 8; ++b) v |= static_cast<std::uint64_t>(u8()) << (8 * b);
    return v;
  }
  std::int32_t i32() noexcept { return static_cast<std::int32_t>(u32()); }
  std::int64_t i64() noexcept { return static_cast<std::int64_t>(u64()); }
  float f32() noexcept {
    const std::uint32_t bits = u32();
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  double f64() noexcept {
    const std::uint64_t bits = u64();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  /// A 0/1 byte; anything else throws naming `field` (with `index` when >= 0).
  bool flag(const char* field, long long index = -1) {
    const std::uint8_t v = u8();
    check(v <= 1, static_cast<int>(v), field, index, "must be 0 or 1");
    return v != 0;
  }
  /// Unless `ok`, throws audiokv::error naming "snapshot", whose message gives the field
  /// (field[index] when index >= 0), the expectation, the value and the byte offset after the
  /// field: "snapshot: num_cells must be ... (it is 5000; the field ends at byte 40)".
  /// The message is built only on failure, so a passing check allocates nothing.
  template <class Value>
  void check(bool ok, const Value& value, const char* field, long long index,
             const char* expectation) const {
    if (!ok) fail(value, field, index, expectation);
  }
  /// check() of a field without index.
  template <class Value>
  void check(bool ok, const Value& value, const char* field, const char* expectation) const {
    if (!ok) fail(value, field, -1, expectation);
  }
  std::size_t offset() const noexcept { return at_; }
  const char* where() const noexcept { return where_; }
  /// The next byte to read.
  const std::byte* here() const noexcept { return in_ + at_; }

 private:
  template <class Value>
  [[noreturn]] void fail(const Value& value, const char* field, long long index,
                         const char* expectation) const {
    const std::string name =
        index >= 0 ? ::audiokv::detail::indexed(field, index) : std::string(field);
    ::audiokv::detail::throw_invalid_part(
        where_, "snapshot",
        ::audiokv::detail::describe(name, " ", expectation, " (it is ", value,
                                    "; the field ends at byte ", at_, ")"));
  }

  const char* where_;
  const std::byte* in_;
  std::size_t at_ = 0;
};

/// Compacts one per-cell array by a plan's move map (kept entries keep their order).
/// @pre the map is stable (validate_plan): a kept entry's target is the count of kept entries
/// before it, so each entry is copied to that count without a branch (an evicted one is
/// overwritten by the next kept entry, or lands past the kept cells). The count, the map and
/// the data are locals: a store through a byte-typed array could alias them.
template <class T>
void compact_array(std::vector<T>& values, const eviction_plan& plan) {
  T* data = values.data();
  const std::int32_t* move_to = plan.move_to.data();
  const std::int32_t n = plan.n_kv_before;
  std::int32_t kept = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    data[kept] = data[i];
    kept += move_to[i] != core::evicted_slot ? 1 : 0;
  }
}

/// A process-wide unique, nonzero id (a relaxed atomic counter: uniqueness is all it needs).
inline std::uint64_t next_cache_id() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

/// @brief The identity of one cache, stamped on its plans (eviction_plan::cache_id).
///
/// A copy is a different cache: copying (construction or assignment) draws a new id, so a
/// plan made by the source is rejected by the copy even though both have the same history.
/// A move relocates the same cache: the target takes the id (plans made before the move stay
/// valid on it) and the moved-from object draws a new one.
class cache_identity {
 public:
  cache_identity() noexcept : id_(next_cache_id()) {}
  cache_identity(const cache_identity&) noexcept : id_(next_cache_id()) {}
  cache_identity(cache_identity&& other) noexcept : id_(other.id_) { other.id_ = next_cache_id(); }
  cache_identity& operator=(const cache_identity& other) noexcept {
    if (this != &other) id_ = next_cache_id();
    return *this;
  }
  cache_identity& operator=(cache_identity&& other) noexcept {
    if (this != &other) {
      id_ = other.id_;
      other.id_ = next_cache_id();
    }
    return *this;
  }
  ~cache_identity() = default;

  std::uint64_t value() const noexcept { return id_; }

 private:
  std::uint64_t id_;
};

/// @brief The positions of a cache's cells and, once shared, the references they hold in a
/// frame_table: released when the holder is destroyed, retained once more by a copy (another
/// cache with the same cells), handed over by a move.
class cell_positions {
 public:
  cell_positions() = default;
  cell_positions(const cell_positions& other)
      : table_(other.table_), pos_(other.pos_), held_(other.held_) {
    for (std::int32_t j = 0; j < held_; ++j) table_->retain(pos_[j]);
  }
  cell_positions(cell_positions&& other) noexcept
      : table_(std::move(other.table_)), pos_(std::move(other.pos_)), held_(other.held_) {
    other.held_ = 0;
  }
  cell_positions& operator=(const cell_positions& other) {
    if (this != &other) {
      cell_positions copy(other);
      *this = std::move(copy);
    }
    return *this;
  }
  cell_positions& operator=(cell_positions&& other) noexcept {
    if (this != &other) {
      release_all();
      table_ = std::move(other.table_);
      pos_ = std::move(other.pos_);
      held_ = other.held_;
      other.held_ = 0;
    }
    return *this;
  }
  ~cell_positions() { release_all(); }

  /// Releases every held position (the cells are gone).
  void release_all() noexcept {
    for (std::int32_t j = 0; j < held_; ++j) table_->release(pos_[j]);
    held_ = 0;
  }

  std::shared_ptr<frame_table> table_;  // null: the cache holds its metadata itself
  std::vector<std::int32_t> pos_;       // [capacity] logical positions, ascending in [0, size)
  std::int32_t held_ = 0;               // positions [0, held_) are held in table_ (== cells)
};

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

  /// Checks a batch of frames against the current state; throws naming frames[i].field.
  void validate_append(const char* where, const frame_meta* frames, std::int32_t count) const {
    AUDIOKV_REQUIRE(count >= 0, where, "count", count, "must be >= 0");
    AUDIOKV_REQUIRE(count == 0 || frames != nullptr, where, "frames", "nullptr",
                    "must point to count frames");
    AUDIOKV_REQUIRE(
        static_cast<std::int64_t>(size_) + count <= capacity_, where, "count", count,
        capacity_ == 0 ? "exceeds the capacity 0 of this cache (a moved-from cache holds no slots: "
                         "reserve() them or assign a cache to it)"
                       : ::audiokv::detail::describe(
                             "exceeds the free capacity: ", capacity_ - size_, " of ", capacity_,
                             " slots free (plan and apply an eviction first)")
                             .c_str());
    std::int64_t previous = has_frames_ ? static_cast<std::int64_t>(newest_pos_) : INT64_MIN;
    for (std::int32_t i = 0; i < count; ++i) {
      const frame_meta& f = frames[i];
      AUDIOKV_REQUIRE(f.pos > previous, where, ::audiokv::detail::indexed("frames", i) + ".pos",
                      f.pos,
                      "must be greater than the previous frame's position (frames out of order)");
      AUDIOKV_REQUIRE(f.speaker >= 0 && f.speaker < num_speakers_, where,
                      ::audiokv::detail::indexed("frames", i) + ".speaker", f.speaker,
                      "unknown speaker id (must be in [0, num_speakers))");
      AUDIOKV_REQUIRE(std::isfinite(f.voice) && f.voice >= 0.0f && f.voice <= 1.0f, where,
                      ::audiokv::detail::indexed("frames", i) + ".voice", f.voice,
                      "must be in [0, 1]");
      AUDIOKV_REQUIRE(std::isfinite(f.prior), where,
                      ::audiokv::detail::indexed("frames", i) + ".prior", f.prior,
                      "must be finite");
      if (cells_.table_ && !cells_.table_->agrees(f)) {
        ::audiokv::detail::throw_invalid_part(
            where, ::audiokv::detail::indexed("frames", i),
            frame_mismatch(f, cells_.table_->frame(f.pos)) +
                ": every cache of a sequence appends the same frames");
      }
      previous = f.pos;
    }
  }

  /// Checks num_cells == size(); throws naming "num_cells" with the expected count.
  void validate_num_cells(const char* where, std::int32_t num_cells) const {
    AUDIOKV_REQUIRE(
        num_cells == size_, where, "num_cells", num_cells,
        ::audiokv::detail::describe("must equal the number of cached cells (", size_, ")").c_str());
  }

  /// Checks one step's scores over the cached cells, [num_cells] with num_cells == size(),
  /// each finite and >= 0; throws naming attention[j].
  void validate_scores(const char* where, const float* attention, std::int32_t num_cells) const {
    validate_num_cells(where, num_cells);
    AUDIOKV_REQUIRE(num_cells == 0 || attention != nullptr, where, "attention", "nullptr",
                    "must point to the scores");
    for (std::int32_t j = 0; j < num_cells; ++j) {
      AUDIOKV_REQUIRE(core::is_valid_attention(attention[j]), where,
                      ::audiokv::detail::indexed("attention", j), attention[j],
                      "must be finite and >= 0");
    }
  }

  /// Checks one step's GQA scores [group_size, num_cells] row-major: group_size >= 1,
  /// num_cells == size(), then the length attention.size() == group_size * num_cells before
  /// any element is read, then each value (finite, >= 0; throws naming attention[row][cell]).
  void validate_group(const char* where, span<const float> attention, std::int32_t group_size,
                      std::int32_t num_cells) const {
    AUDIOKV_REQUIRE(group_size >= 1, where, "group_size", group_size, "must be >= 1");
    validate_num_cells(where, num_cells);
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
    std::uint8_t* mask = types::detail::plan_scratch::at_least(out.scratch.mask, size_);
    // The count in a local: byte stores may alias size_, which would be reloaded per byte.
    const std::int32_t n = size_;
    for (std::int32_t i = 0; i < n; ++i) mask[i] = 0;
    return mask;
  }

  /// Fills `out` (evict list, move map, sizes, generation, cache id) from the evict mask in
  /// its scratch (clear_evict_mask()).
  void build_plan(eviction_plan& out) const {
    const std::uint8_t* mask = out.scratch.mask.data();
    out.promote.clear();
    out.demote.clear();
    out.move_to.resize(size_);
    // Evicted slots interleave unpredictably with kept ones: each slot is written at the
    // running evicted count in scratch without a branch, and the list copied after. The kept
    // count before slot i is i minus the evicted count (one counter to advance).
    std::int32_t* evicted = types::detail::plan_scratch::at_least(out.scratch.order_b, size_);
    std::int32_t* move_to = out.move_to.data();
    const std::int32_t n = size_;
    std::int32_t evicted_count = 0;
    for (std::int32_t i = 0; i < n; ++i) {
      const bool keep = mask[i] == 0;
      move_to[i] = core::compaction_target(keep, i - evicted_count);
      evicted[evicted_count] = i;
      evicted_count += static_cast<std::int32_t>(!keep);
    }
    out.evict.assign(evicted, evicted + evicted_count);
    out.n_kv_before = size_;
    out.n_kv_after = size_ - evicted_count;
    out.generation = generation_;
    out.cache_id = id();
    out.protections_released = 0;
  }

  /// An empty plan for the current state.
  void build_empty_plan(eviction_plan& out) const {
    clear_evict_mask(out);
    build_plan(out);
    out.scores.clear();
    out.ratio = 0.0f;
    out.normalized_entropy = 1.0f;
  }

  /// Throws unless `plan` was made for the current state and is well formed.
  void validate_plan(const char* where, const eviction_plan& plan) const {
    AUDIOKV_REQUIRE(plan.cache_id == id(), where, "plan.cache_id", plan.cache_id,
                    ::audiokv::detail::describe("foreign plan: it was made by cache ",
                                                plan.cache_id, ", not by this cache (id ", id(),
                                                "); a plan applies only to the cache that made it")
                        .c_str());
    AUDIOKV_REQUIRE(plan.generation == generation_ && plan.n_kv_before == size_, where,
                    "plan.generation", plan.generation,
                    ::audiokv::detail::describe(
                        "stale plan: it was made for generation ", plan.generation, " with ",
                        plan.n_kv_before, " cells, but this cache is at generation ", generation_,
                        " with ", size_, " cells (every append and apply starts a new generation)")
                        .c_str());
    AUDIOKV_REQUIRE(static_cast<std::int32_t>(plan.move_to.size()) == size_, where,
                    "plan.move_to.size()", plan.move_to.size(),
                    ::audiokv::detail::describe("must equal num_cells() = ", size_).c_str());
    if (!move_map_agrees(plan)) {
      // The checks that name the first bad entry, in this order.
      const std::int32_t kept =
          types::detail::require_stable_move_map(where, "plan.move_to", plan.move_to.data(), size_);
      AUDIOKV_REQUIRE(
          kept == plan.n_kv_after, where, "plan.n_kv_after", plan.n_kv_after,
          ::audiokv::detail::describe("must equal the number of kept cells (", kept, ")").c_str());
      // evict must list exactly the slots with move_to == -1, ascending.
      std::size_t next = 0;
      for (std::int32_t i = 0; i < size_; ++i) {
        if (plan.move_to[i] != core::evicted_slot) continue;
        AUDIOKV_REQUIRE(next < plan.evict.size() && plan.evict[next] == i, where,
                        ::audiokv::detail::indexed("plan.evict", static_cast<long long>(next)),
                        next < plan.evict.size() ? plan.evict[next] : -1,
                        "must list the evicted slots (move_to == -1) in ascending order");
        ++next;
      }
      AUDIOKV_REQUIRE(next == plan.evict.size(), where, "plan.evict.size()", plan.evict.size(),
                      ::audiokv::detail::describe(
                          "must equal the number of cells with move_to == -1 (", next, ")")
                          .c_str());
    }
    if (!moved_cells_agree(plan)) {
      // The checks that name the first bad slot, in this order.
      for (const std::int32_t slot : plan.promote) {
        AUDIOKV_REQUIRE(slot >= 0 && slot < size_ && plan.move_to[slot] != core::evicted_slot &&
                            tier_[slot] == pool_tier::buffer,
                        where, "plan.promote", slot, "must name a kept buffer-pool cell");
      }
      for (const std::int32_t slot : plan.demote) {
        AUDIOKV_REQUIRE(slot >= 0 && slot < size_ && plan.move_to[slot] != core::evicted_slot &&
                            tier_[slot] == pool_tier::base,
                        where, "plan.demote", slot, "must name a kept base-pool cell");
      }
    }
  }

  /// True when every slot of plan.promote names a kept buffer-pool cell and every slot of
  /// plan.demote a kept base-pool cell (plan.move_to has size() entries): validate_plan()'s
  /// checks of the moves, one pass per list without a branch per slot.
  bool moved_cells_agree(const eviction_plan& plan) const noexcept {
    const std::int32_t* move_to = plan.move_to.data();
    const pool_tier* tier = tier_.data();
    const auto n = static_cast<std::uint32_t>(size_);
    if (n == 0u) return plan.promote.empty() && plan.demote.empty();
    auto agree = [&](const std::vector<std::int32_t>& slots, pool_tier from) {
      bool ok = true;
      for (const std::int32_t slot : slots) {
        const bool inside = static_cast<std::uint32_t>(slot) < n;
        const std::int32_t at = inside ? slot : 0;  // slot 0 exists when a slot is inside
        ok = ok & inside & (move_to[at] != core::evicted_slot) & (tier[at] == from);
      }
      return ok;
    };
    return agree(plan.promote, pool_tier::buffer) & agree(plan.demote, pool_tier::base);
  }

  /// True when plan.move_to ([size()] entries) is stable (each entry -1 or the count of kept
  /// entries before it), keeps plan.n_kv_after cells, and plan.evict lists exactly its -1 slots
  /// in ascending order: validate_plan()'s move-map and evict-list checks.
  ///
  /// Walked along the evict list: it must ascend strictly inside [0, size()), each listed slot
  /// must map to -1, and every slot i between the k-th and the (k+1)-th listed one (and after
  /// the last) to i - k >= 0, so no other slot maps to -1. That check of a run between two
  /// listed slots has no dependence from entry to entry and vectorises; evicted slots are few.
  bool move_map_agrees(const eviction_plan& plan) const noexcept {
    const auto listed = static_cast<std::int32_t>(plan.evict.size());
    const std::int32_t* evict = plan.evict.data();
    const std::int32_t* move_to = plan.move_to.data();
    const std::int32_t n = size_;
    if (listed > n || n - listed != plan.n_kv_after) return false;
    std::int32_t from = 0;  // the first slot after the previous listed one
    for (std::int32_t k = 0; k <= listed; ++k) {
      const std::int32_t until = k < listed ? evict[k] : n;
      if (until < from || until >= n + (k < listed ? 0 : 1)) return false;
      std::int32_t wrong = 0;
      for (std::int32_t i = from; i < until; ++i) {
        wrong |= static_cast<std::int32_t>(move_to[i] != i - k);
      }
      if (wrong != 0) return false;
      if (k < listed && move_to[until] != core::evicted_slot) return false;
      from = until + 1;
    }
    return true;
  }

  /// Bytes save() writes for `n` cells.
  static constexpr std::size_t snapshot_bytes(std::int32_t n) noexcept {
    return 4 + 1 + 8 + static_cast<std::size_t>(n) * (4 + 4 + 4 + 1 + 4 + 1);
  }

  /// Writes newest_pos, has_frames, generation and each cell's pos, speaker, voice, flags,
  /// prior and tier (snapshot_bytes(size()) bytes). The identity is not written.
  void save(snapshot_writer& w) const noexcept {
    w.i32(newest_pos_);
    w.u8(has_frames_ ? 1 : 0);
    w.u64(generation_);
    for (std::int32_t j = 0; j < size_; ++j) w.i32(cells_.pos_[j]);
    for (std::int32_t j = 0; j < size_; ++j) w.i32(speaker_of(j));
    for (std::int32_t j = 0; j < size_; ++j) w.f32(voice_of(j));
    for (std::int32_t j = 0; j < size_; ++j) w.u8(flags_of(j));
    for (std::int32_t j = 0; j < size_; ++j) w.f32(prior_of(j));
    for (std::int32_t j = 0; j < size_; ++j) w.u8(static_cast<std::uint8_t>(tier_[j]));
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
  void load(snapshot_reader& r, std::int32_t n, std::int32_t max_sinks, bool commit) {
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
    const bool per_cell = commit && !cells_.table_;
    if (commit && cells_.table_) {
      // Room first (a std::bad_alloc here changes nothing), then the cells' old positions are
      // released before the snapshot's overwrite them.
      cells_.table_->prepare_each(n, [&](std::int32_t j) { return value(0, 4, j).i32(); });
      cells_.release_all();
    }
    std::int64_t previous = INT64_MIN;
    for (std::int32_t j = 0; j < n; ++j) {
      const std::int32_t p = r.i32();
      r.check(p > previous && p <= newest, p, "pos", j,
              "must exceed the previous cell's position and not exceed newest_pos");
      previous = p;
      if (commit) cells_.pos_[j] = p;
    }
    for (std::int32_t j = 0; j < n; ++j) {
      const std::int32_t s = r.i32();
      r.check(s >= 0 && s < num_speakers_, s, "speaker", j, "must be in [0, num_speakers)");
      if (per_cell) speaker_[j] = s;
    }
    for (std::int32_t j = 0; j < n; ++j) {
      const float v = r.f32();
      r.check(std::isfinite(v) && v >= 0.0f && v <= 1.0f, v, "voice", j, "must be in [0, 1]");
      if (per_cell) voice_[j] = v;
    }
    std::int32_t sinks = 0;
    for (std::int32_t j = 0; j < n; ++j) {
      const std::uint8_t f = r.u8();
      sinks += (f & frame_flag_sink) != 0;
      r.check(sinks <= max_sinks, static_cast<int>(f), "flags", j,
              "is one sink too many for the emergency pool");
      if (per_cell) flags_[j] = f;
    }
    for (std::int32_t j = 0; j < n; ++j) {
      const float v = r.f32();
      r.check(std::isfinite(v), v, "prior", j, "must be finite");
      if (per_cell) prior_[j] = v;
    }
    for (std::int32_t j = 0; j < n; ++j) {
      const std::uint8_t t = r.u8();
      r.check(t <= static_cast<std::uint8_t>(pool_tier::emergency), static_cast<int>(t), "tier", j,
              "must be 0 (buffer), 1 (base) or 2 (emergency)");
      if (commit) tier_[j] = static_cast<pool_tier>(t);
    }
    if (cells_.table_) {
      // The checked metadata again, one frame per cell: it must agree with what the table
      // holds for the sequence's other caches (positions only this cache holds are replaced).
      frame_table& table = *cells_.table_;
      const std::int32_t* own = cells_.pos_.data();
      for (std::int32_t j = 0; j < n; ++j) {
        const frame_meta f{value(0, 4, j).i32(), value(4, 4, j).i32(), value(8, 4, j).f32(),
                           value(12, 1, j).u8(), value(13, 4, j).f32()};
        if (commit) {
          table.acquire(f);  // room prepared above: cannot throw
          continue;
        }
        const bool only_mine =
            table.references(f.pos) == 1 && std::binary_search(own, own + size_, f.pos);
        r.check(only_mine || table.agrees(f), f.pos, "pos", j,
                "is a frame the sequence's shared frame table holds with other metadata");
      }
      if (commit) cells_.held_ = n;
    }
    if (commit) {
      size_ = n;
      newest_pos_ = newest;
      has_frames_ = has_frames;
      generation_ = (generation > generation_ ? generation : generation_) + 1;
    }
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
