// SPDX-License-Identifier: Apache-2.0
// Frame metadata shared per sequence (types/frame_table.hpp, tiered_cache::share_frames): the
// table's rows and counts by hand; a cache that shares its table with caches of other heads
// (which keep other cells) reproduces the golden digests recorded before sharing existed;
// shared and per-cell caches write the same snapshot bytes step by step and restore each
// other's snapshots; copies, reset and destruction return every row; the table holds exactly
// the union of the caches' cells.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <audiokv/types/frame_table.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "common/earlier_floor.hpp"
#include "common/state_digest.hpp"
#include "common/stream.hpp"

namespace {

using namespace audiokv;

TEST(FrameTable, PositionsAreCountedAndOlderOnesLeaveTheRingInOrder) {
  frame_table t(4, 2);  // a ring of positions [lo, lo + 4)
  EXPECT_EQ(t.window(), 4);
  const frame_meta f0{0, 1, 0.5f, frame_flag_phoneme_boundary, 0.25f};
  t.acquire(f0);
  t.acquire(f0);  // a second cache holding the same frame
  EXPECT_EQ(t.references(0), 2u);
  EXPECT_EQ(t.live_rows(), 1);
  frame_meta other = f0;
  other.prior = -0.0f;
  EXPECT_FALSE(t.agrees(other));  // 0.25 vs -0 at a live position
  other.pos = 1;
  EXPECT_TRUE(t.agrees(other));  // position 1 is not live
  for (std::int32_t p = 1; p <= 3; ++p) t.acquire(frame_meta{p, p, 1.0f, 0, 0.0f});
  EXPECT_EQ(t.live_rows(), 4);
  t.release(1);
  t.release(2);
  EXPECT_EQ(t.live_rows(), 2);
  EXPECT_EQ(t.references(1), 0u);
  // Position 5 moves the ring to [2, 6): live position 0 goes below it, released 1 is dropped.
  t.acquire(frame_meta{5, 2, 0.0f, 0, 0.5f});
  EXPECT_EQ(t.old_rows(), 1);
  EXPECT_EQ(t.live_rows(), 3);
  EXPECT_EQ(t.references(0), 2u);
  EXPECT_EQ(t.speaker(0), 1);
  EXPECT_EQ(t.prior(0), 0.25f);
  EXPECT_EQ(t.flags(0), frame_flag_phoneme_boundary);
  // Position 9: ring [6, 10); live 3 and 5 go below it, after 0.
  t.acquire(frame_meta{9, 0, 1.0f, frame_flag_sink, 0.0f});
  EXPECT_EQ(t.old_rows(), 3);
  const std::int32_t pos[4] = {0, 3, 5, 9};
  std::int32_t speakers[4] = {};
  t.gather_speakers(pos, 4, speakers);
  EXPECT_EQ(std::vector<std::int32_t>(speakers, speakers + 4),
            (std::vector<std::int32_t>{1, 3, 2, 0}));
  EXPECT_EQ(t.voice(5), 0.0f);
  EXPECT_EQ(t.flags(9), frame_flag_sink);
  // A released older position may come back with other metadata; an older position never seen
  // is inserted in order.
  t.release(3);
  EXPECT_EQ(t.references(3), 0u);
  EXPECT_TRUE(t.agrees(frame_meta{3, 7, 1.0f, 0, 0.0f}));
  t.acquire(frame_meta{3, 7, 1.0f, 0, 0.0f});
  EXPECT_EQ(t.speaker(3), 7);
  t.acquire(frame_meta{1, 4, 1.0f, 0, 0.0f});
  EXPECT_EQ(t.old_rows(), 4);
  EXPECT_EQ(t.speaker(1), 4);
  EXPECT_EQ(t.speaker(0), 1);
  EXPECT_EQ(t.speaker(5), 2);
  EXPECT_EQ(t.live_rows(), 5);
  EXPECT_EQ(t.peak_rows(), 5);
}

using test::fnv1a;

/// Head h's attention: the stream's, scaled by a cell- and head-dependent factor (h = 0: the
/// stream's own), so the heads keep different cells.
void head_attention(const std::vector<float>& base, std::int32_t h, std::vector<float>& out) {
  out.resize(base.size());
  for (std::size_t j = 0; j < base.size(); ++j) {
    const auto k = static_cast<std::int32_t>(j);
    out[j] =
        h == 0 ? base[j] : base[j] * (0.25f + 0.5f * static_cast<float>((k * (3 + 2 * h)) % 7));
  }
}

/// The golden digest of tests/policy/golden_digest_test.cpp (observe feed) for head 0, while
/// `companions` more caches share head 0's frame table and keep other cells.
std::uint64_t shared_digest(const audiokv_config& config, std::int64_t frames,
                            std::int32_t companions, std::int32_t window, std::int32_t& peak_rows) {
  // A small ring, so that most cells live below it and are found by binary search.
  auto table = std::make_shared<frame_table>(window);
  std::vector<tiered_cache<>> heads;
  heads.reserve(static_cast<std::size_t>(companions) + 1);
  for (std::int32_t h = 0; h <= companions; ++h) {
    heads.emplace_back(config);
    heads.back().share_frames(table);
  }
  test::speech_stream stream(7, config.num_speakers);
  // Each companion draws its attention from a stream of its own, so head 0 sees exactly the
  // golden test's attention.
  std::vector<test::speech_stream> own(static_cast<std::size_t>(companions) + 1,
                                       test::speech_stream(7, config.num_speakers));
  eviction_plan plan;
  plan.reserve(heads[0].capacity());
  std::vector<float> attention, mine;
  fnv1a d;
  for (std::int64_t step = 0; step < frames; ++step) {
    frame_meta f = stream.next_frame();
    if (step < 2) f.flags |= frame_flag_sink;
    for (std::size_t h = 1; h < heads.size(); ++h) own[h].next_frame();
    for (std::size_t h = 0; h < heads.size(); ++h) {
      tiered_cache<>& cache = heads[h];
      cache.append(&f, 1);
      const std::int32_t n = cache.num_cells();
      (h == 0 ? stream : own[h]).attention(cache.positions(), n, attention);
      head_attention(attention, static_cast<std::int32_t>(h), mine);
      cache.observe(mine.data(), n);
      if (h == 0) test::digest_state(d, cache, config.num_speakers);
      if (!cache.wants_eviction()) continue;
      cache.plan(plan);
      if (h == 0) test::digest_plan(d, plan);
      cache.apply(plan);
    }
  }
  test::digest_stats(d, heads[0].stats());
  // The table holds exactly the union of the heads' positions (every frame is shared).
  std::set<std::int32_t> held;
  for (const auto& cache : heads)
    held.insert(cache.positions(), cache.positions() + cache.num_cells());
  EXPECT_EQ(table->live_rows(), static_cast<std::int32_t>(held.size()));
  peak_rows = table->peak_rows();
  return d.value;
}

TEST(SharedFrames, GoldenDigestsHoldWhileOtherHeadsShareTheTable) {
  // The expected values are golden_digest_test's, recorded before frame tables existed (with the
  // one coverage floor over all time of that code: the segment_ms floor, frontier_density 0).
  audiokv_config a;
  a.budget = 600;
  a.num_speakers = 3;
  test::use_segment_ms_floor(a.speech);
  a.speech.frontier.frontier_density = 0.0f;
  std::int32_t peak = 0;
  EXPECT_EQ(shared_digest(a, 12000, 3, 256, peak), 0x24626446f79d16baull);
  // Four heads keeping different cells: the union stays well below 4 x capacity.
  std::printf("4 heads, budget 600 (capacity %d): peak %d shared rows\n",
              tiered_cache<>(a).capacity(), peak);
  EXPECT_LT(peak, 4 * tiered_cache<>(a).capacity());
  audiokv_config b = a;
  b.num_speakers = 1;
  b.evaluation_share = 0.5f;
  b.neighbour_prior = false;
  b.prior = prior_mode::multiply;
  b.drift_window = 4;
  b.drift_factor = 1.2f;
  EXPECT_EQ(shared_digest(b, 12000, 2, 64, peak), 0xe2c01efe90979e11ull);
}

/// Frames with every field varied (speaker, voice, flags, prior).
frame_meta varied_frame(test::speech_stream& stream, std::int64_t step) {
  frame_meta f = stream.next_frame();
  f.voice = static_cast<float>((step * 37) % 11) / 10.0f;
  f.prior = static_cast<float>((step * 13) % 9) / 16.0f - 0.25f;
  if (step % 97 == 5) f.flags |= frame_flag_critical;
  if (step < 2) f.flags |= frame_flag_sink;
  return f;
}

std::vector<std::byte> snapshot_of(const tiered_cache<>& cache) {
  std::vector<std::byte> bytes(cache.snapshot_size());
  cache.snapshot(bytes);
  return bytes;
}

TEST(SharedFrames, SnapshotsEqualPerCellCachesStepByStepAndRestoreAcrossModes) {
  audiokv_config config;
  config.budget = 400;
  config.num_speakers = 3;
  config.speech.coverage.enabled = true;
  config.speech.frontier.enabled = true;
  config.prior = prior_mode::add;
  auto table = std::make_shared<frame_table>(1024);
  tiered_cache<> alone(config), shared(config), other(config);
  shared.share_frames(table);
  other.share_frames(table);
  test::speech_stream stream(11, config.num_speakers), other_stream(11, config.num_speakers);
  eviction_plan p1, p2;
  p1.reserve(alone.capacity());
  p2.reserve(alone.capacity());
  std::vector<float> attention, mine;
  for (std::int64_t step = 0; step < 5000; ++step) {
    const frame_meta f = varied_frame(stream, step);
    other_stream.next_frame();
    for (tiered_cache<>* c : {&alone, &shared, &other}) c->append(&f, 1);
    stream.attention(alone.positions(), alone.num_cells(), attention);
    alone.observe(attention.data(), alone.num_cells());
    shared.observe(attention.data(), shared.num_cells());
    other_stream.attention(other.positions(), other.num_cells(), attention);
    head_attention(attention, 2, mine);
    other.observe(mine.data(), other.num_cells());
    if (alone.wants_eviction()) {
      alone.plan(p1);
      shared.plan(p2);
      ASSERT_EQ(p1.move_to, p2.move_to) << "step " << step;
      ASSERT_EQ(0, std::memcmp(p1.scores.data(), p2.scores.data(), p1.scores.size() * 4));
      alone.apply(p1);
      shared.apply(p2);
    }
    if (other.wants_eviction()) {
      other.plan(p2);
      other.apply(p2);
    }
    if (step % 250 == 0) {
      ASSERT_EQ(snapshot_of(alone), snapshot_of(shared)) << "step " << step;
    }
  }
  ASSERT_EQ(snapshot_of(alone), snapshot_of(shared));
  // A shared cache restores a per-cell cache's snapshot and the reverse; both then write the
  // same bytes (each restore advanced the generation the same way from a fresh cache).
  const std::vector<std::byte> bytes = snapshot_of(alone);
  tiered_cache<> fresh_shared(config);
  fresh_shared.share_frames(table);
  fresh_shared.restore(bytes);
  tiered_cache<> fresh_alone(config);
  fresh_alone.restore(snapshot_of(shared));
  EXPECT_EQ(snapshot_of(fresh_shared), snapshot_of(fresh_alone));
  EXPECT_EQ(snapshot_of(fresh_shared).size(), bytes.size());
  // And both continue bit for bit like each other.
  for (std::int64_t step = 5000; step < 5600; ++step) {
    const frame_meta f = varied_frame(stream, step);
    fresh_shared.append(&f, 1);
    fresh_alone.append(&f, 1);
    stream.attention(fresh_alone.positions(), fresh_alone.num_cells(), attention);
    fresh_alone.observe(attention.data(), fresh_alone.num_cells());
    fresh_shared.observe(attention.data(), fresh_shared.num_cells());
    if (!fresh_alone.wants_eviction()) continue;
    fresh_alone.plan(p1);
    fresh_shared.plan(p2);
    ASSERT_EQ(p1.move_to, p2.move_to) << "step " << step;
    fresh_alone.apply(p1);
    fresh_shared.apply(p2);
  }
  EXPECT_EQ(snapshot_of(fresh_shared), snapshot_of(fresh_alone));
  // Restoring over cells already held releases them: the table holds the union again.
  other.restore(bytes);
  std::set<std::int32_t> held;
  for (const tiered_cache<>* c : {&shared, &other, &fresh_shared}) {
    held.insert(c->positions(), c->positions() + c->num_cells());
  }
  EXPECT_EQ(table->live_rows(), static_cast<std::int32_t>(held.size()));
}

TEST(SharedFrames, SparseNegativeAndJumpingPositionsThroughATinyRing) {
  // Positions from -5000 in steps of 37 with jumps of 100,000: a ring of 8 positions is
  // passed by nearly every frame, so almost every cell lives below it; the shared cache still
  // plans and snapshots exactly like one holding its metadata per cell.
  audiokv_config config;
  config.budget = 100;
  config.num_speakers = 2;
  auto table = std::make_shared<frame_table>(8);
  tiered_cache<> alone(config), shared(config), other(config);
  shared.share_frames(table);
  other.share_frames(table);
  test::speech_stream stream(5, 2);
  eviction_plan p1, p2;
  std::vector<float> attention(static_cast<std::size_t>(alone.capacity()));
  std::int32_t pos = -5000;
  for (std::int32_t step = 0; step < 3000; ++step) {
    frame_meta f = varied_frame(stream, step);
    pos += 37 + (step % 500 == 499 ? 100000 : 0);
    f.pos = pos;
    for (tiered_cache<>* c : {&alone, &shared, &other}) c->append(&f, 1);
    for (tiered_cache<>* c : {&alone, &shared, &other}) {
      const std::int32_t n = c->num_cells();
      const std::int32_t salt = c == &other ? 7 : 3;
      for (std::int32_t j = 0; j < n; ++j) {
        attention[j] = 1.0f / static_cast<float>(1 + ((j * salt + step) % 19));
      }
      c->observe(attention.data(), n);
    }
    if (other.wants_eviction()) {
      other.plan(p2);
      other.apply(p2);
    }
    if (!alone.wants_eviction()) continue;
    alone.plan(p1);
    shared.plan(p2);
    ASSERT_EQ(p1.move_to, p2.move_to) << "step " << step;
    alone.apply(p1);
    shared.apply(p2);
  }
  EXPECT_EQ(snapshot_of(alone), snapshot_of(shared));
  EXPECT_GT(table->old_rows(), 0);
  std::set<std::int32_t> held(shared.positions(), shared.positions() + shared.num_cells());
  held.insert(other.positions(), other.positions() + other.num_cells());
  EXPECT_EQ(table->live_rows(), static_cast<std::int32_t>(held.size()));
}

TEST(SharedFrames, CopiesResetAndDestructionReturnEveryRow) {
  audiokv_config config;
  config.budget = 200;
  auto table = std::make_shared<frame_table>();
  {
    tiered_cache<> per_cell(config);
    test::speech_stream stream(3, 1);
    std::vector<frame_meta> frames;
    for (std::int64_t s = 0; s < 100; ++s) frames.push_back(varied_frame(stream, s));
    per_cell.append(frames.data(), 100);
    const std::vector<std::byte> before = snapshot_of(per_cell);
    // Cells already cached move into the table.
    per_cell.share_frames(table);
    EXPECT_EQ(table->live_rows(), 100);
    EXPECT_EQ(snapshot_of(per_cell), before);
    {
      const tiered_cache<> copy = per_cell;  // shares the table: the same rows, counted twice
      EXPECT_EQ(copy.frames(), table);
      EXPECT_EQ(table->live_rows(), 100);
      EXPECT_EQ(snapshot_of(copy), before);
    }
    EXPECT_EQ(table->live_rows(), 100);
    tiered_cache<> moved = std::move(per_cell);
    EXPECT_EQ(snapshot_of(moved), before);
    moved.reset();
    EXPECT_EQ(table->live_rows(), 0);
    moved.append(frames.data(), 10);
    EXPECT_EQ(table->live_rows(), 10);
  }
  EXPECT_EQ(table->live_rows(), 0);
}

TEST(SharedFrames, OtherMetadataAtALivePositionIsRejectedWithNoChange) {
  audiokv_config config;
  config.budget = 50;
  auto table = std::make_shared<frame_table>(64);
  tiered_cache<> a(config), b(config);
  a.share_frames(table);
  b.share_frames(table);
  const std::vector<frame_meta> frames = test::frames(0, 4);
  a.append(frames);
  b.append(span<const frame_meta>(frames.data(), 2));
  std::vector<frame_meta> wrong(frames.begin() + 2, frames.end());
  wrong[1].voice = 0.5f;  // position 3 differs from what a appended
  const std::vector<std::byte> before = snapshot_of(b);
  try {
    b.append(wrong);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "frames[1]");
  }
  EXPECT_EQ(snapshot_of(b), before);
  EXPECT_EQ(table->references(2), 1u);  // frames[0] of the rejected call was not taken
  // A snapshot whose frame at a position other caches hold differs is rejected too.
  tiered_cache<> alone(config);
  alone.append(std::vector<frame_meta>{frames[0], frames[1], frames[2], wrong[1]});
  try {
    b.restore(snapshot_of(alone));
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "snapshot");
  }
  EXPECT_EQ(snapshot_of(b), before);
  // So is a cache whose cells differ from the table's when it attaches.
  try {
    alone.share_frames(table);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "table");
  }
  EXPECT_EQ(alone.frames(), nullptr);
  EXPECT_EQ(table->live_rows(), 4);
}

TEST(SharedFrames, BatchesPerLayerShareOneTablePerSequence) {
  // Two layers, each a sequence_batch of three sequences of different lengths; sequence s of
  // both layers shares table s. The shared batches plan exactly as two unshared ones.
  audiokv_config config;
  config.budget = 120;
  config.num_speakers = 2;
  constexpr std::int32_t kLayers = 2, kSeqs = 3;
  std::vector<sequence_batch<tiered_cache<>>> shared(kLayers), alone(kLayers);
  std::vector<std::shared_ptr<frame_table>> tables;
  for (std::int32_t s = 0; s < kSeqs; ++s) tables.push_back(std::make_shared<frame_table>());
  for (std::int32_t l = 0; l < kLayers; ++l) {
    for (std::int32_t s = 0; s < kSeqs; ++s) {
      EXPECT_EQ(shared[l].add_sequence(config), s);
      alone[l].add_sequence(config);
      shared[l].share_frames(s, tables[s]);
    }
  }
  try {
    shared[0].share_frames(kSeqs, tables[0]);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "s");
  }
  std::vector<test::speech_stream> streams;
  for (std::int32_t s = 0; s < kSeqs; ++s) streams.emplace_back(20 + s, 2);
  std::vector<float> scores;
  std::vector<std::int64_t> indptr;
  for (std::int32_t step = 0; step < 1500; ++step) {
    for (std::int32_t s = 0; s < kSeqs; ++s) {
      if (step % (s + 1) != 0) continue;  // sequences advance at different rates
      const frame_meta f = streams[s].next_frame();
      for (std::int32_t l = 0; l < kLayers; ++l) {
        shared[l][s].append(&f, 1);
        alone[l][s].append(&f, 1);
      }
    }
    for (std::int32_t l = 0; l < kLayers; ++l) {
      indptr.assign(1, 0);
      scores.clear();
      for (std::int32_t s = 0; s < kSeqs; ++s) {
        const std::int32_t n = alone[l][s].num_cells();
        for (std::int32_t j = 0; j < n; ++j) {
          scores.push_back(1.0f / static_cast<float>(1 + ((j * (3 + l) + step) % 13)));
        }
        indptr.push_back(static_cast<std::int64_t>(scores.size()));
      }
      shared[l].observe(scores, indptr);
      alone[l].observe(scores, indptr);
      shared[l].plan_all();
      alone[l].plan_all();
      for (std::int32_t s = 0; s < kSeqs; ++s) {
        ASSERT_EQ(shared[l].plan(s).move_to, alone[l].plan(s).move_to) << "step " << step;
      }
      shared[l].apply_all();
      alone[l].apply_all();
    }
  }
  for (std::int32_t s = 0; s < kSeqs; ++s) {
    std::set<std::int32_t> held;
    for (std::int32_t l = 0; l < kLayers; ++l) {
      held.insert(shared[l][s].positions(), shared[l][s].positions() + shared[l][s].num_cells());
    }
    EXPECT_EQ(tables[s]->live_rows(), static_cast<std::int32_t>(held.size())) << "sequence " << s;
  }
  // Removing sequence 1 from layer 0 releases its rows: layer 1's cells remain.
  shared[0].remove_sequence(1);
  EXPECT_EQ(tables[1]->live_rows(), shared[1][1].num_cells());
  shared[1].remove_sequence(1);
  EXPECT_EQ(tables[1]->live_rows(), 0);
}

}  // namespace
