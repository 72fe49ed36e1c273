// SPDX-License-Identifier: Apache-2.0
// tiered_cache::snapshot() / restore(): a cache restored from a mid-stream snapshot continues
// bit for bit like the original over the same inputs; every truncated, corrupted or mismatched
// snapshot is rejected naming "snapshot" and leaves the target unchanged; neither call
// allocates (counting global operator new: this binary's only translation unit including it);
// random mutations never crash the restore path.
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/counting_allocator.hpp"
#include "common/stream.hpp"
#include "common/xorshift.hpp"

namespace {

using namespace audiokv;
using bytes = std::vector<std::byte>;

/// Everything a stream's plans and the cache expose, per step.
struct trace {
  std::vector<std::int32_t> ints;   // evict, move_to, promote, demote, positions, sizes
  std::vector<std::uint32_t> bits;  // scores, ratio, entropy, importance, baselines (raw bits)
  void add(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    bits.push_back(b);
  }
  void add(const std::vector<std::int32_t>& v) {
    ints.push_back(static_cast<std::int32_t>(v.size()));
    ints.insert(ints.end(), v.begin(), v.end());
  }
};

audiokv_config stream_config() {
  audiokv_config c;
  c.budget = 300;
  c.num_speakers = 3;
  c.prefetch.enabled = true;
  c.speech.sinks.enabled = true;
  c.evaluation_share = 0.5f;  // evaluation flags then differ between cells and steer plans
  return c;
}

/// Drives `cache` for `steps` steps from `stream`: single frames and pairs, sinks at the
/// start, priors, GQA groups every third step, an engine alignment position every 50 steps,
/// plan/apply whenever the trigger asks, an explicit plan_to every 97 steps, prefetch.
trace drive(tiered_cache<>& cache, test::speech_stream& stream, std::int64_t first_step,
            std::int64_t steps) {
  eviction_plan plan;
  plan.reserve(cache.capacity());
  std::vector<float> attention, group;
  trace t;
  for (std::int64_t step = first_step; step < first_step + steps; ++step) {
    frame_meta f[2] = {stream.next_frame(), stream.next_frame()};
    const std::int32_t count = step % 5 == 0 ? 2 : 1;
    for (std::int32_t i = 0; i < count; ++i) {
      if (step < 2) f[i].flags |= frame_flag_sink;
      f[i].prior = static_cast<float>(step % 7) * 0.01f;
    }
    if (cache.num_cells() + count > cache.capacity()) {
      plan.reserve(cache.capacity());
      cache.plan_to(cache.num_cells() - count, plan);
      cache.apply(plan);
    }
    cache.append(f, count);
    stream.attention(cache.positions(), cache.num_cells(), attention);
    if (step % 3 == 0) {
      group = attention;
      for (float& a : attention) group.push_back(a * 0.5f);
      cache.observe_group(group, 2, cache.num_cells());
    } else {
      cache.observe(attention.data(), cache.num_cells());
    }
    if (step % 50 == 25) cache.set_alignment_position(f[0].pos - 40);
    const bool explicit_target = step % 97 == 0 && cache.num_cells() > 120;
    if (cache.wants_eviction() || explicit_target) {
      plan.reserve(cache.capacity());
      if (explicit_target) {
        cache.plan_to(120, plan);
      } else {
        cache.plan(plan);
      }
      t.add(plan.evict);
      t.add(plan.move_to);
      t.add(plan.promote);
      t.add(plan.demote);
      for (const float s : plan.scores) t.add(s);
      t.add(plan.ratio);
      t.add(plan.normalized_entropy);
      t.ints.push_back(plan.protections_released);
      cache.apply(plan);
    }
    t.ints.push_back(cache.prefetch());
    for (std::int32_t s = 0; s < cache.config().num_speakers; ++s) {
      t.add(cache.speaker_baselines()[s]);
    }
  }
  for (std::int32_t j = 0; j < cache.num_cells(); ++j) {
    t.add(cache.importance()[j]);
    t.ints.push_back(cache.positions()[j]);
    t.ints.push_back(static_cast<std::int32_t>(cache.tiers()[j]));
  }
  return t;
}

bytes snapshot_of(const tiered_cache<>& cache) {
  bytes out(cache.snapshot_size());
  cache.snapshot(out);
  return out;
}

// Byte offsets of the documented format.
constexpr std::size_t header_bytes = 48;
constexpr std::size_t generation_at = header_bytes + 4 + 1;

/// The snapshot without the generation and the checksum: the state that must match between a
/// cache and its restored copy (the copy's generation is ahead, so its old plans are stale).
bytes state_of(const tiered_cache<>& cache) {
  bytes s = snapshot_of(cache);
  for (std::size_t i = 0; i < 8; ++i) s[generation_at + i] = std::byte{0};
  s.resize(s.size() - 8);
  return s;
}

std::int32_t read_i32(const bytes& b, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(b[at + i]) << (8 * i);
  return static_cast<std::int32_t>(v);
}
std::uint64_t read_u64(const bytes& b, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(b[at + i]) << (8 * i);
  return v;
}
void write_u64(bytes& b, std::size_t at, std::uint64_t v) {
  for (std::size_t i = 0; i < 8; ++i) b[at + i] = static_cast<std::byte>(v >> (8 * i));
}

/// FNV-1a 64 from its definition: h = 14695981039346656037; h = (h ^ byte) * 1099511628211.
std::uint64_t fnv1a(const bytes& b, std::size_t n) {
  std::uint64_t h = 14695981039346656037ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<std::uint64_t>(b[i]);
    h *= 1099511628211ull;
  }
  return h;
}
void fix_checksum(bytes& b) { write_u64(b, b.size() - 8, fnv1a(b, b.size() - 8)); }

/// restore() must throw audiokv::error naming "snapshot" whose message contains `expect`, and
/// leave `target` exactly as it was.
void expect_rejected(tiered_cache<>& target, const bytes& in, const std::string& expect) {
  const bytes before = snapshot_of(target);
  try {
    target.restore(in);
    ADD_FAILURE() << "accepted; expected: " << expect;
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "snapshot");
    EXPECT_NE(std::string(e.what()).find(expect), std::string::npos)
        << e.what() << "\n  expected to contain: " << expect;
  }
  EXPECT_EQ(snapshot_of(target), before);
}

struct snapshot_fixture {
  audiokv_config config = stream_config();
  tiered_cache<> source{config};
  test::speech_stream stream{11, 3};
  bytes snap;
  snapshot_fixture() {
    drive(source, stream, 0, 1200);
    snap = snapshot_of(source);
  }
};

TEST(Snapshot, LayoutSizeMagicAndChecksumFollowTheDocumentedFormat) {
  const snapshot_fixture f;
  const std::int64_t n = f.source.num_cells();
  ASSERT_GT(n, 0);
  // 48 header + 23 per cell + 4 per speaker + 130 other state + 4 per boundary within the
  // horizon (header word 11) + 8 checksum.
  const std::int32_t boundaries = read_i32(f.snap, 44);
  EXPECT_GE(boundaries, 0);
  EXPECT_EQ(f.snap.size(), static_cast<std::size_t>(186 + 23 * n + 4 * 3 + 4 * boundaries));
  const char magic[8] = {'A', 'K', 'V', 'S', 'N', 'A', 'P', '\0'};
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(static_cast<char>(f.snap[i]), magic[i]);
  EXPECT_EQ(static_cast<int>(f.snap[8]), 2);  // version 2, little-endian
  EXPECT_EQ(read_u64(f.snap, 16), f.snap.size());
  EXPECT_EQ(read_u64(f.snap, f.snap.size() - 8), fnv1a(f.snap, f.snap.size() - 8));
  // The first cell's position, little-endian after the 13 bytes of store header.
  std::int32_t pos0 = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    pos0 |= static_cast<std::int32_t>(f.snap[header_bytes + 13 + i]) << (8 * i);
  }
  EXPECT_EQ(pos0, f.source.positions()[0]);
  bytes small(f.snap.size() - 1);
  EXPECT_THROW(f.source.snapshot(small), error);
}

TEST(Snapshot, RestoredCacheContinuesBitForBit) {
  snapshot_fixture f;
  ASSERT_GT(f.source.stats().evictions, 3);
  ASSERT_GT(f.source.stats().promotions, 0);
  ASSERT_GT(f.source.forecast().steps(), 0);

  // A target with its own, different history and an outstanding plan.
  tiered_cache<> target(f.config);
  test::speech_stream other(99, 3);
  drive(target, other, 0, 700);
  const std::uint64_t id = target.id();
  eviction_plan old_plan;
  old_plan.reserve(target.capacity());
  target.plan_to(target.num_cells() - 1, old_plan);
  target.reserve(f.source.capacity());
  target.restore(f.snap);
  EXPECT_EQ(target.id(), id);
  EXPECT_THROW(target.apply(old_plan), error);  // made before the restore: stale
  EXPECT_EQ(state_of(target), state_of(f.source));
  EXPECT_EQ(target.num_cells(), f.source.num_cells());
  EXPECT_EQ(target.stats().evictions, f.source.stats().evictions);
  EXPECT_EQ(target.forecast().steps(), f.source.forecast().steps());
  EXPECT_EQ(target.frontier().given(), f.source.frontier().given());
  EXPECT_EQ(target.frontier().position(), f.source.frontier().position());

  // A plan of the source is foreign to the target.
  eviction_plan foreign;
  f.source.plan_to(f.source.num_cells() - 1, foreign);
  EXPECT_THROW(target.apply(foreign), error);

  test::speech_stream copy = f.stream;
  const trace expected = drive(f.source, f.stream, 1200, 1500);
  const trace got = drive(target, copy, 1200, 1500);
  ASSERT_GT(expected.ints.size(), 1500u);
  EXPECT_EQ(got.ints, expected.ints);
  EXPECT_EQ(got.bits, expected.bits);
  EXPECT_EQ(state_of(target), state_of(f.source));
  EXPECT_EQ(target.capacity(), f.source.capacity());
}

TEST(Snapshot, EveryTruncationIsRejectedWithoutChange) {
  const snapshot_fixture f;
  tiered_cache<> target(f.config);
  test::speech_stream other(5, 3);
  drive(target, other, 0, 400);
  target.reserve(f.source.capacity());
  for (std::size_t len = 0; len < f.snap.size(); ++len) {
    const bytes cut(f.snap.begin(), f.snap.begin() + static_cast<std::ptrdiff_t>(len));
    const std::string expect = len < 56
                                   ? "truncated: " + std::to_string(len) + " of at least 56 bytes"
                                   : "truncated: " + std::to_string(len) + " of " +
                                         std::to_string(f.snap.size()) + " bytes";
    expect_rejected(target, cut, expect);
    if (HasFailure()) break;
  }
  bytes longer = f.snap;
  longer.push_back(std::byte{0});
  expect_rejected(target, longer, "trailing bytes");
}

TEST(Snapshot, EveryFlippedByteIsRejectedWithoutChange) {
  const snapshot_fixture f;
  tiered_cache<> target(f.config);
  target.reserve(f.source.capacity());
  for (std::size_t at = 0; at < f.snap.size(); ++at) {
    bytes bad = f.snap;
    bad[at] ^= std::byte{0x5a};
    // Header fields checked before the checksum name themselves; the rest is a checksum error.
    expect_rejected(target, bad, at < 48 ? "snapshot" : "checksum mismatch");
    if (HasFailure()) break;
  }
  bytes magic = f.snap;
  magic[0] = std::byte{'X'};
  expect_rejected(target, magic, "magic");
  bytes version = f.snap;
  version[8] = std::byte{3};
  fix_checksum(version);
  expect_rejected(target, version, "format version");
  bytes sum = f.snap;
  sum.back() ^= std::byte{1};
  expect_rejected(target, sum, "checksum mismatch");
}

TEST(Snapshot, ValuesOutOfRangeAreRejectedEvenWithAValidChecksum) {
  const snapshot_fixture f;
  tiered_cache<> target(f.config);
  target.reserve(f.source.capacity());
  const std::size_t n = static_cast<std::size_t>(f.source.num_cells());
  const std::size_t pos_at = header_bytes + 13, speaker_at = pos_at + 4 * n;
  const std::size_t voice_at = speaker_at + 4 * n, flags_at = voice_at + 4 * n;
  const std::size_t prior_at = flags_at + n, tier_at = prior_at + 4 * n;
  const std::size_t importance_at = tier_at + n;
  const auto corrupt = [&](std::size_t at, std::uint32_t value, int width,
                           const std::string& expect) {
    bytes bad = f.snap;
    for (int i = 0; i < width; ++i) bad[at + i] = static_cast<std::byte>(value >> (8 * i));
    fix_checksum(bad);
    expect_rejected(target, bad, expect);
  };
  // pos[5] = pos[4]: not strictly ascending.
  std::uint32_t pos4 = 0;
  for (int i = 0; i < 4; ++i)
    pos4 |= static_cast<std::uint32_t>(f.snap[pos_at + 16 + i]) << (8 * i);
  corrupt(pos_at + 20, pos4, 4, "pos[5] must exceed the previous");
  corrupt(speaker_at + 4 * 7, 3, 4, "speaker[7] must be in [0, num_speakers)");
  corrupt(voice_at + 4 * 2, 0x3f800001u, 4, "voice[2] must be in [0, 1]");  // 1 + ulp
  corrupt(prior_at, 0x7fc00000u, 4, "prior[0] must be finite");             // NaN
  corrupt(tier_at + n - 1, 3, 1, "tier[" + std::to_string(n - 1) + "]");
  corrupt(importance_at + 4, 0xbf800000u, 4, "importance[1] must be finite and >= 0");  // -1
  corrupt(importance_at + 4 * n + 3, 2, 1, "evaluated[3] must be 0 or 1");
  corrupt(36, static_cast<std::uint32_t>(f.source.capacity() + 1), 4, "num_cells");
  // An alignment position without its "given" byte (snapshot() writes 0 there).
  ASSERT_TRUE(f.source.frontier().given());
  ASSERT_NE(f.source.frontier().position(), 0);
  const std::size_t boundaries = static_cast<std::size_t>(read_i32(f.snap, 44));
  const std::size_t boundary_at = f.snap.size() - 8 - 4 * boundaries;
  corrupt(boundary_at - 8 - 4 - 1, 0, 1, "alignment position must be 0");
  // Boundaries: the count within [0, horizon + 1], positions ascending within the horizon.
  corrupt(44, 102, 4, "boundaries");  // horizon 1 s of 10 ms frames: at most 101
  ASSERT_GE(boundaries, 2u);
  const std::int32_t newest = read_i32(f.snap, header_bytes);
  corrupt(boundary_at + 4, static_cast<std::uint32_t>(read_i32(f.snap, boundary_at)), 4,
          "boundary[1] must exceed the previous boundary");
  corrupt(boundary_at, static_cast<std::uint32_t>(newest - 101), 4, "boundary[0]");
  corrupt(boundary_at + 4 * (boundaries - 1), static_cast<std::uint32_t>(newest + 1), 4,
          "boundary[" + std::to_string(boundaries - 1) + "]");
  // Every cell a sink: more than the emergency pool holds.
  bytes sinks = f.snap;
  for (std::size_t j = 0; j < n; ++j) sinks[flags_at + j] |= std::byte{frame_flag_sink};
  fix_checksum(sinks);
  expect_rejected(target, sinks, "sink too many");
}

TEST(Snapshot, BoundariesWhoseFramesLeftAreCarried) {
  // A phoneme boundary protects its neighbourhood for the horizon after its own frame is
  // evicted (F15); the snapshot carries the boundary, so the restored cache protects the same
  // cells, and a snapshot of it is the same bytes.
  audiokv_config c;
  c.budget = 100;
  c.boundary_radius = 2;
  tiered_cache<> source(c);
  auto f = test::frames(0, 60);
  f[30].flags = frame_flag_phoneme_boundary;
  source.append(f.data(), 60);
  eviction_plan plan;
  source.plan_to(source.num_cells(), plan);  // evicts nothing; rewritten to evict cell 30
  plan.evict = {30};
  for (std::int32_t j = 0; j < 60; ++j) plan.move_to[j] = j < 30 ? j : j == 30 ? -1 : j - 1;
  plan.n_kv_after = 59;
  plan.promote.clear();
  plan.demote.clear();
  source.apply(plan);
  const bytes snap = snapshot_of(source);
  EXPECT_EQ(read_i32(snap, 44), 1);
  tiered_cache<> target(c);
  target.restore(snap);
  for (std::int32_t j = 0; j < source.num_cells(); ++j)
    EXPECT_EQ(target.is_protected(j), source.is_protected(j)) << j;
  for (std::int32_t j = 28; j <= 31; ++j) EXPECT_TRUE(target.is_protected(j)) << j;
  EXPECT_EQ(state_of(target), state_of(source));
}

// The generation counts appends, applies, resets and restores; a snapshot near 2^64 made
// the restored counter wrap, and a plan made before the restore matched again after a few
// appends. Any generation from 2^63 on is rejected, before anything changes.
TEST(Snapshot, AGenerationThatCouldWrapIsRejected) {
  const snapshot_fixture f;
  tiered_cache<> target(f.config);
  target.reserve(f.source.capacity());
  target.restore(f.snap);
  eviction_plan stale;
  target.plan_to(target.num_cells() - 1, stale);  // made before the restore below: stale
  for (const std::uint64_t generation :
       {std::uint64_t{1} << 63, (std::uint64_t{1} << 63) + 5, ~std::uint64_t{0}}) {
    bytes bad = snapshot_of(target);
    write_u64(bad, generation_at, generation);
    fix_checksum(bad);
    expect_rejected(target, bad, "generation must be below 2^63");
  }
  // 2^64 - 2: a restore would set the counter to 2^64 - 1, and stale.generation + 1 empty
  // appends (each a new generation, with the same cells) would wrap it to the stale plan's.
  bytes wrapping = snapshot_of(target);
  write_u64(wrapping, generation_at, ~std::uint64_t{0} - 1);
  fix_checksum(wrapping);
  expect_rejected(target, wrapping, "generation must be below 2^63");
  for (std::uint64_t i = 0; i <= stale.generation; ++i) target.append(nullptr, 0);
  EXPECT_THROW(target.apply(stale), error);
  // The highest accepted generation leaves 2^63 counts before a wrap.
  bytes top = snapshot_of(target);
  write_u64(top, generation_at, (std::uint64_t{1} << 63) - 1);
  fix_checksum(top);
  target.restore(top);
  EXPECT_EQ(read_u64(snapshot_of(target), generation_at), std::uint64_t{1} << 63);
  EXPECT_THROW(target.apply(stale), error);
}

// A bad field names the field with its value, not the snapshot: "snapshot: header word 3 must
// be 0 (it is 7; ...)", where the message used to read "snapshot = 7".
TEST(Snapshot, AFieldErrorNamesTheFieldAndItsValue) {
  const snapshot_fixture f;
  tiered_cache<> target(f.config);
  target.reserve(f.source.capacity());
  bytes bad = f.snap;
  bad[12] = std::byte{7};  // header word 3
  fix_checksum(bad);
  try {
    target.restore(bad);
    FAIL() << "accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "snapshot");
    const std::string what = e.what();
    EXPECT_NE(what.find("snapshot: header word 3 must be 0 (it is 7; the field ends at byte 16)"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find("snapshot = "), std::string::npos) << what;
  }
}

TEST(Snapshot, AnotherConfigurationOrCapacityIsRejected) {
  const snapshot_fixture f;
  const std::vector<std::function<void(audiokv_config&)>> changes = {
      [](audiokv_config& c) { c.budget = 301; },
      [](audiokv_config& c) { c.capacity = 400; },
      [](audiokv_config& c) {
        c.split.base = 0.61f;
        c.split.buffer = 0.29f;
      },
      [](audiokv_config& c) {
        c.split.buffer = 0.25f;
        c.split.emergency = 0.15f;
      },
      [](audiokv_config& c) {
        c.split.base = 0.65f;
        c.split.emergency = 0.05f;
      },
      [](audiokv_config& c) { c.trigger = 0.91f; },
      [](audiokv_config& c) { c.alpha = 0.31f; },
      [](audiokv_config& c) { c.neighbour_prior = false; },
      [](audiokv_config& c) { c.evaluation_share = 0.6f; },
      [](audiokv_config& c) { c.base_rate = 0.06f; },
      [](audiokv_config& c) { c.lambda = 0.21f; },
      [](audiokv_config& c) { c.voice_weight = 0.4f; },
      [](audiokv_config& c) { c.boundary_radius = 9; },
      [](audiokv_config& c) { c.boundary_horizon_ms = 900.0f; },
      [](audiokv_config& c) { c.min_retention_ms = 210.0f; },
      [](audiokv_config& c) { c.frame_ms = 11.0f; },
      [](audiokv_config& c) { c.baseline_rate = 0.2f; },
      [](audiokv_config& c) { c.drift_window = 11; },
      [](audiokv_config& c) { c.drift_factor = 2.5f; },
      [](audiokv_config& c) { c.prior = prior_mode::multiply; },
      [](audiokv_config& c) { c.prefetch.enabled = false; },
      [](audiokv_config& c) { c.prefetch.beta = 0.2f; },
      [](audiokv_config& c) { c.prefetch.decay = 0.9f; },
      [](audiokv_config& c) { c.prefetch.horizon_steps = 3; },
      [](audiokv_config& c) { c.prefetch.margin = 0.3f; },
      [](audiokv_config& c) { c.prefetch.min_burst_frames = 1; },
      [](audiokv_config& c) { c.prefetch.granularity = 32; },
      [](audiokv_config& c) { c.speech.sinks.enabled = false; },
      [](audiokv_config& c) { c.speech.sinks.first = 5; },
      [](audiokv_config& c) { c.speech.sinks.observed = 9; },
      [](audiokv_config& c) { c.speech.sinks.max_share = 0.3f; },
      [](audiokv_config& c) { c.speech.coverage.enabled = false; },
      [](audiokv_config& c) { c.speech.coverage.segment_ms = 900.0f; },
      [](audiokv_config& c) { c.speech.coverage.share = 0.9f; },
      [](audiokv_config& c) { c.speech.coverage.silence_weight = 0.3f; },
      [](audiokv_config& c) { c.speech.coverage.centre_band = 0.5f; },
      [](audiokv_config& c) { c.speech.coverage.segment_cells = 2; },
      [](audiokv_config& c) { c.speech.coverage.phase = 0.25f; },
      [](audiokv_config& c) { c.speech.frontier.enabled = false; },
      [](audiokv_config& c) { c.speech.frontier.estimate = false; },
      [](audiokv_config& c) { c.speech.frontier.filter = 7; },
      [](audiokv_config& c) { c.speech.frontier.lookback_ms = 900.0f; },
      [](audiokv_config& c) { c.speech.frontier.past_density = 0.3f; },
      [](audiokv_config& c) {
        c.speech.frontier.past_decay_floor = 0.0f;
        c.speech.frontier.past_decay_ms = 2000.0f;
      },
      [](audiokv_config& c) { c.speech.frontier.past_decay_floor = 2.0f; },
      [](audiokv_config& c) { c.speech.frontier.frontier_density = 0.25f; },
      [](audiokv_config& c) { c.text_recent_share = 0.25f; },
  };
  for (std::size_t i = 0; i < changes.size(); ++i) {
    SCOPED_TRACE("config change " + std::to_string(i));
    audiokv_config other = f.config;
    changes[i](other);
    tiered_cache<> target(other);
    EXPECT_NE(target.config_fingerprint(), f.source.config_fingerprint());
    target.reserve(f.source.capacity());
    if (target.capacity() != f.source.capacity()) continue;  // rejected by capacity instead
    expect_rejected(target, f.snap, "config fingerprint");
  }
  // Another pipeline shape (a stage fewer).
  using short_pipeline = smoothing_pipeline<median_stage<5>, trend_stage, speaker_norm_stage>;
  const tiered_cache<short_pipeline> shorter(f.config);
  EXPECT_NE(shorter.config_fingerprint(), f.source.config_fingerprint());
  // A pipeline of many stages: its shape is hashed in full (the fingerprint's buffer grows
  // with the stage count), so one more stage changes it.
  using long_pipeline =
      smoothing_pipeline<median_stage<3>, median_stage<5>, median_stage<7>, trend_stage,
                         trend_stage, speaker_norm_stage, speaker_norm_stage>;
  using longer_pipeline =
      smoothing_pipeline<median_stage<3>, median_stage<5>, median_stage<7>, trend_stage,
                         trend_stage, speaker_norm_stage, speaker_norm_stage, speaker_norm_stage>;
  const tiered_cache<long_pipeline> long_cache(f.config);
  const tiered_cache<longer_pipeline> longer_cache(f.config);
  EXPECT_NE(long_cache.config_fingerprint(), longer_cache.config_fingerprint());
  // Another number of speakers: named in the header check.
  audiokv_config speakers = f.config;
  speakers.num_speakers = 4;
  tiered_cache<> four(speakers);
  four.reserve(f.source.capacity());
  expect_rejected(four, f.snap, "num_speakers");
  // Same configuration, larger capacity.
  tiered_cache<> larger(f.config);
  larger.reserve(f.source.capacity() + 64);
  expect_rejected(larger, f.snap, "capacity");
  // Same configuration, smaller capacity: asks for reserve().
  tiered_cache<> smaller(f.config);
  if (smaller.capacity() < f.source.capacity()) {
    expect_rejected(smaller, f.snap, "reserve() it first");
  }
}

// The allocation check below means something only if the replacement operator new is live.
std::vector<int>* volatile g_escape = nullptr;

TEST(Snapshot, SnapshotAndRestoreAllocateNothing) {
  const std::int64_t made = test::count_allocations([] { g_escape = new std::vector<int>(100); });
  delete g_escape;
  ASSERT_EQ(made, 2);  // the vector object and its buffer

  const snapshot_fixture f;
  tiered_cache<> target(f.config);
  target.reserve(f.source.capacity());
  bytes out(f.source.snapshot_size());
  EXPECT_EQ(test::count_allocations([&] { f.source.snapshot(out); }), 0);
  EXPECT_EQ(test::count_allocations([&] { target.restore(out); }), 0);
  EXPECT_EQ(state_of(target), state_of(f.source));
}

TEST(Snapshot, RandomMutationsAreRejectedOrRestoreAUsableCache) {
  audiokv_config config = stream_config();
  config.prefetch.enabled = false;
  config.capacity = 360;
  tiered_cache<> source(config);
  test::speech_stream stream(3, 3);
  drive(source, stream, 0, 800);
  const bytes snap = snapshot_of(source);
  tiered_cache<> target(config);
  test::xorshift64 rng(12345);
  std::int64_t accepted = 0, rejected = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    bytes bad = snap;
    const int edits = 1 + static_cast<int>(rng.next() % 4);
    for (int e = 0; e < edits; ++e) {
      bad[rng.next() % bad.size()] = static_cast<std::byte>(rng.next());
    }
    if (rng.next() % 8 == 0) bad.resize(rng.next() % bad.size());
    if (rng.next() % 2 == 0 && bad.size() >= 8) fix_checksum(bad);  // reach the value checks
    const bytes before = snapshot_of(target);
    try {
      target.restore(bad);
      ++accepted;
    } catch (const error& e) {
      ++rejected;
      ASSERT_EQ(e.argument(), "snapshot");
      ASSERT_EQ(snapshot_of(target), before) << e.what();
      continue;
    }
    // An accepted state keeps the invariants and supports a planned eviction.
    for (std::int32_t j = 1; j < target.num_cells(); ++j) {
      ASSERT_LT(target.positions()[j - 1], target.positions()[j]);
    }
    eviction_plan plan;
    // Down to half, or to the cells no plan may evict when they are more.
    target.plan_to(target.num_cells() / 2, plan);
    ASSERT_EQ(plan.n_kv_after, std::max(target.num_cells() / 2, target.protected_cells()));
    target.apply(plan);
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 10);
}

}  // namespace
