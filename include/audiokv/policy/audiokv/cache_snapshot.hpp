// SPDX-License-Identifier: Apache-2.0
/// @file
/// The byte format of a tiered_cache snapshot: snapshot_codec writes a cache's mutable state
/// and reads it back, checking every value before anything changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "../../core/prefetch.hpp"
#include "../../detail/describe.hpp"
#include "../../error.hpp"
#include "../../span.hpp"
#include "../detail/cell_store.hpp"
#include "../detail/cell_store_io.hpp"
#include "../speech/alignment_frontier.hpp"
#include "audiokv_stats.hpp"
#include "protection_rules.hpp"

namespace audiokv::policy::detail {

/// @brief Reads and writes the snapshot of a tiered_cache (`Cache`, which befriends it).
///
/// Format (version `version`, every value little-endian): header: magic "AKVSNAP\0", u32
/// version, u32 0, u64 total size, u64 config fingerprint, i32 capacity, i32 num_cells, i32
/// num_speakers, i32 boundaries; cells: newest position, has-frames byte, u64 generation, then
/// per-cell arrays pos, speaker, voice, flags, prior, tier, importance, evaluated; speaker
/// baselines; drift state (f64 running std, i64 steps); statistics (9 x i64); prefetch
/// forecast (f32 rate, f32 peak, i64 steps); the engine's alignment position (byte given, i32
/// position); i64 pending frames; the positions of the phoneme boundaries within the horizon,
/// ascending (i32 each, `boundaries` of them); then the u64 FNV-1a 64 of every byte before it.
/// Neither writing nor reading allocates (messages are built only on failure).
template <class Cache>
class snapshot_codec {
 public:
  /// Version of the byte format.
  static constexpr std::uint32_t version = 2;
  static constexpr std::uint64_t magic = 0x0050414E53564B41ull;  ///< "AKVSNAP\0"
  static constexpr std::size_t header_bytes = 48;                ///< header size
  static constexpr std::size_t stats_count = 9;                  ///< counters of audiokv_stats

  /// Bytes of a snapshot of `c` with `cells` cells and `boundaries` boundaries.
  static std::size_t bytes(const Cache& c, std::int32_t cells, std::int32_t boundaries) noexcept {
    return header_bytes + cell_store_io::snapshot_bytes(cells) +
           c.importance_.snapshot_bytes(cells) + stats_count * 8 + (4 + 4 + 8) + (1 + 4) + 8 +
           static_cast<std::size_t>(boundaries) * 4 + 8;
  }
  /// Bytes write() writes for `c` now.
  static std::size_t size(const Cache& c) noexcept {
    return bytes(c, c.store_.size(), active_boundaries(c));
  }

  /// Writes `c` into out[0, size(c)); `out` holds at least that many bytes (checked by the
  /// caller).
  static void write(const Cache& c, span<std::byte> out) noexcept {
    snapshot_writer w(out.data());
    w.u64(magic);
    w.u32(version);
    w.u32(0);
    w.u64(size(c));
    w.u64(c.config_fingerprint());
    w.i32(c.store_.capacity());
    w.i32(c.store_.size());
    w.i32(c.config_.num_speakers);
    w.i32(active_boundaries(c));
    cell_store_io::save(c.store_, w);
    c.importance_.save(w, c.store_.size());
    const audiokv_stats& s = c.stats_;
    for (const std::int64_t v :
         {s.steps, s.evictions, s.cells_evicted, s.promotions, s.demotions, s.emergency_evictions,
          s.protections_released, s.drift_resets, s.reservations}) {
      w.i64(v);
    }
    w.f32(c.forecast_.rate());
    w.f32(c.forecast_.peak());
    w.i64(c.forecast_.steps());
    // The frontier's estimate is fed by observe_peak(), which the cache never calls: its only
    // state here is the engine's position.
    w.u8(c.frontier_.given() ? 1 : 0);
    w.i32(c.frontier_.given() ? c.frontier_.position() : 0);
    w.i64(c.pending_frames_);
    const protection_rules& p = c.protection_;
    for (const std::int32_t* b = p.active_begin(c.store_); b != p.active_end(); ++b) w.i32(*b);
    w.u64(fnv1a64(out.data(), w.written()));
  }

  /// Replaces the state of `c` by the snapshot `in`, after checking, in order: the length
  /// against the header, magic, version, the total size, counts, the checksum, the
  /// fingerprint, the capacity, then every value. Throws audiokv::error naming "snapshot"
  /// from `where`; `c` is then unchanged.
  static void read(Cache& c, const char* where, span<const std::byte> in) {
    const std::size_t size = in.size();
    if (size < header_bytes + 8) {
      ::audiokv::detail::throw_invalid(
          where, "snapshot", ::audiokv::detail::describe(size, " bytes").c_str(),
          ::audiokv::detail::describe("truncated: ", size, " of at least ", header_bytes + 8,
                                      " bytes")
              .c_str());
    }
    snapshot_reader header(where, in.data());
    const std::uint64_t stored_magic = header.u64();
    header.check(stored_magic == magic, stored_magic, "magic",
                 "is not an audiokv tiered_cache snapshot's (\"AKVSNAP\\0\")");
    const std::uint32_t stored_version = header.u32();
    // Messages with numbers are built only on failure, so an accepted restore allocates nothing.
    if (stored_version != version) {
      header.check(
          false, stored_version, "format version",
          ::audiokv::detail::describe("is not supported (this build reads version ", version, ")")
              .c_str());
    }
    const std::uint32_t reserved = header.u32();
    header.check(reserved == 0, reserved, "header word 3", "must be 0");
    const std::uint64_t total = header.u64();
    const std::uint64_t fingerprint = header.u64();
    const std::int32_t capacity = header.i32();
    const std::int32_t cells = header.i32();
    const std::int32_t speakers = header.i32();
    const std::int32_t boundaries = header.i32();
    header.check(cells >= 0 && cells <= capacity, cells, "num_cells",
                 "must be in [0, capacity] of the snapshot");
    header.check(speakers == c.config_.num_speakers, speakers, "num_speakers",
                 "differs from this cache's config.num_speakers");
    header.check(boundaries >= 0 && boundaries <= c.protection_.max_active(), boundaries,
                 "boundaries", "must be in [0, boundary horizon in frames + 1]");
    const std::size_t expected = bytes(c, cells, boundaries);
    if (total != expected) {
      header.check(
          false, total, "total size",
          ::audiokv::detail::describe("disagrees with its counts (", expected, " bytes)").c_str());
    }
    if (size != total) {
      ::audiokv::detail::throw_invalid(
          where, "snapshot", ::audiokv::detail::describe(size, " bytes").c_str(),
          (size < total ? ::audiokv::detail::describe("truncated: ", size, " of ", total, " bytes")
                        : ::audiokv::detail::describe("trailing bytes: ", size,
                                                      " bytes, the snapshot has ", total))
              .c_str());
    }
    snapshot_reader tail(where, in.data() + (size - 8));
    const std::uint64_t stored_sum = tail.u64();
    const std::uint64_t sum = fnv1a64(in.data(), size - 8);
    if (stored_sum != sum) {
      ::audiokv::detail::throw_invalid(
          where, "snapshot", ::audiokv::detail::describe(size, " bytes").c_str(),
          "checksum mismatch (FNV-1a 64 of the payload): corrupt snapshot");
    }
    const std::uint64_t own = c.config_fingerprint();
    if (fingerprint != own) {
      header.check(
          false, fingerprint, "config fingerprint",
          ::audiokv::detail::describe("differs from this cache's (", own,
                                      "): the snapshot was made with another configuration or "
                                      "pipeline")
              .c_str());
    }
    const std::int32_t own_capacity = c.store_.capacity();
    if (capacity != own_capacity) {
      header.check(
          false, capacity, "capacity",
          ::audiokv::detail::describe("differs from this cache's capacity() = ", own_capacity,
                                      capacity > own_capacity ? " (reserve() it first)" : "")
              .c_str());
    }
    load_state(c, in.data(), cells, boundaries, /*commit=*/false);  // throws on the first bad value
    load_state(c, in.data(), cells, boundaries, /*commit=*/true);
  }

 private:
  /// Phoneme boundaries within the horizon (at most horizon frames + 1).
  static std::int32_t active_boundaries(const Cache& c) noexcept {
    return static_cast<std::int32_t>(c.protection_.active_end() -
                                     c.protection_.active_begin(c.store_));
  }

  // Reads the state after a header read() checked; writes it only when `commit`.
  static void load_state(Cache& c, const std::byte* in, std::int32_t cells, std::int32_t boundaries,
                         bool commit) {
    snapshot_reader r("tiered_cache::restore", in + header_bytes);
    // The store's newest position and has-frames byte, which bound the boundaries below.
    snapshot_reader head("tiered_cache::restore", in + header_bytes);
    const std::int64_t newest = head.i32();
    const bool has_frames = head.u8() != 0;
    cell_store_io::load(c.store_, r, cells, c.pools_.emergency_cells(), commit);
    c.importance_.load(r, cells, commit);
    std::int64_t counters[stats_count];
    for (std::int64_t& v : counters) {
      v = r.i64();
      r.check(v >= 0, v, "stats", "counters must be >= 0");
    }
    const float rate = r.f32();
    // Both are averages of frames per step, which never exceed max_forecast_cells.
    constexpr float most = static_cast<float>(core::max_forecast_cells);
    r.check(rate >= 0.0f && rate <= most, rate, "forecast rate", "must be in [0, 2^31]");
    const float peak = r.f32();
    r.check(peak >= 0.0f && peak <= most, peak, "forecast peak", "must be in [0, 2^31]");
    const std::int64_t forecast_steps = r.i64();
    r.check(forecast_steps >= 0, forecast_steps, "forecast steps", "must be >= 0");
    const bool given = r.flag("alignment position given");
    const std::int32_t position = r.i32();
    r.check(given || position == 0, position, "alignment position",
            "must be 0 when none was given (the form snapshot() writes)");
    const std::int64_t pending = r.i64();
    r.check(pending >= 0, pending, "pending_frames", "must be >= 0");
    // Boundaries within the horizon of the newest position, ascending (what write() writes).
    const std::int64_t horizon = newest - c.config_.boundary_horizon_frames();
    r.check(boundaries == 0 || has_frames, boundaries, "boundaries",
            "must be 0 when no frame was appended");
    const snapshot_reader boundary_list = r;
    std::int64_t previous = horizon - 1;
    for (std::int32_t i = 0; i < boundaries; ++i) {
      const std::int32_t b = r.i32();
      r.check(b > previous && b <= newest, b, "boundary", i,
              "must exceed the previous boundary and lie within the horizon of newest_pos");
      previous = b;
    }
    if (!commit) return;
    snapshot_reader list = boundary_list;
    c.protection_.assign(boundaries, [&](std::int32_t) { return list.i32(); });
    c.stats_ = audiokv_stats{counters[0], counters[1], counters[2], counters[3], counters[4],
                             counters[5], counters[6], counters[7], counters[8]};
    c.forecast_.restore_state(rate, peak, forecast_steps);
    c.frontier_ = alignment_frontier(c.config_.speech.frontier.filter);
    if (given) c.frontier_.set_position(position);
    c.pending_frames_ = pending;
  }
};

}  // namespace audiokv::policy::detail
