// SPDX-License-Identifier: Apache-2.0
// Hole-filling compaction (core/hole_filling.hpp, pool/slot_map.hpp, cpu::compact's
// hole_fill_plan mode): a hand-worked case, random plans against a dense time-ordered oracle
// (byte-exact rows, positions travelling with them, moves <= evicted), a real tiered_cache
// stream whose decisions equal the stable mode's, and every error with an unchanged state.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <audiokv/cpu/compact.hpp>
#include <audiokv/pool/slot_map.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;

/// A stable logical plan from a keep mask, written from the definition (move_to = exclusive
/// prefix count of kept cells).
eviction_plan plan_from_keep(const std::vector<bool>& keep, std::uint64_t generation = 0) {
  eviction_plan p;
  p.n_kv_before = static_cast<std::int32_t>(keep.size());
  std::int32_t kept = 0;
  for (std::int32_t i = 0; i < p.n_kv_before; ++i) {
    p.move_to.push_back(keep[i] ? kept++ : -1);
    if (!keep[i]) p.evict.push_back(i);
  }
  p.n_kv_after = kept;
  p.generation = generation;
  return p;
}

TEST(HoleFill, HandWorkedCase) {
  // Slots 0..7 in time order; evict cells 1 and 4 -> 6 kept. Holes below 6: {1, 4}; kept at or
  // beyond 6: {6, 7}. So 6 -> 1 and 7 -> 4, two moves; the stable mode would move 5 rows
  // (2->1, 3->2, 5->3, 6->4, 7->5).
  slot_map map(8);
  map.append(8);
  const auto plan = plan_from_keep({true, false, true, true, false, true, true, true});
  hole_fill_plan moves;
  map.plan(plan, moves);
  EXPECT_EQ(moves.src, (std::vector<std::int32_t>{6, 7}));
  EXPECT_EQ(moves.dst, (std::vector<std::int32_t>{1, 4}));
  EXPECT_EQ(moves.move_to, (std::vector<std::int32_t>{0, -1, 2, 3, -1, 5, 1, 4}));
  EXPECT_EQ(moves.n_after, 6);

  std::vector<std::int32_t> rows{10, 11, 12, 13, 14, 15, 16, 17};
  cpu::compact(kv_view<std::int32_t, layout_nhd>(rows.data(), layout_nhd{{8, 1, 1}}), 0, moves);
  EXPECT_EQ(rows, (std::vector<std::int32_t>{10, 16, 12, 13, 17, 15, 16, 17}));
  map.apply(plan, moves);
  // Logical (time) order of the kept cells 0,2,3,5,6,7 -> slots 0,2,3,5,1,4.
  ASSERT_EQ(map.size(), 6);
  EXPECT_EQ(std::vector<std::int32_t>(map.slots().begin(), map.slots().end()),
            (std::vector<std::int32_t>{0, 2, 3, 5, 1, 4}));
  // The next row is appended at slot 6.
  map.append(1);
  EXPECT_EQ(map.slot(6), 6);

  // Evicting the cells at slots 2 and 1 (logical 1 and 4) -> n_after 5; slot 1 is a hole
  // below 5, the only kept slot >= 5 is 5 (logical 3) ... and slot 6 (logical 6).
  const auto plan2 = plan_from_keep({true, false, true, true, false, true, true});
  map.plan(plan2, moves);
  EXPECT_EQ(moves.src, (std::vector<std::int32_t>{5, 6}));
  EXPECT_EQ(moves.dst, (std::vector<std::int32_t>{1, 2}));
}

struct dense_cell {
  std::int32_t pos;
  std::vector<std::uint16_t> row;  // [heads * dim]
};

/// Many random rounds of append + random eviction on a [capacity, heads, dim] buffer (and a
/// [capacity] position buffer) compacted in hole-filling mode, against a dense list of the kept
/// cells in time order.
template <class Layout>
void run_random_rounds(std::uint32_t seed, std::int32_t heads, std::int32_t dim, bool per_head,
                       Layout layout) {
  const std::int32_t capacity = layout.extents.num_cells;
  std::mt19937 rng(seed);
  std::vector<std::uint16_t> buffer(static_cast<std::size_t>(layout.required_span_size()));
  std::vector<std::int32_t> positions(capacity, -1);
  kv_view<std::uint16_t, Layout> kv(buffer.data(), layout);
  kv_view<std::int32_t, layout_nhd> pos_view(positions.data(), layout_nhd{{capacity, 1, 1}});
  std::vector<dense_cell> oracle;
  slot_map map(capacity);
  hole_fill_plan moves;
  moves.reserve(capacity);
  std::int32_t next_pos = 0;
  std::int64_t total_moves = 0, total_evicted = 0;
  for (int round = 0; round < 300; ++round) {
    const std::int32_t room = capacity - map.size();
    const std::int32_t add = std::uniform_int_distribution<std::int32_t>(0, room)(rng);
    for (std::int32_t a = 0; a < add; ++a) {
      const std::int32_t slot = map.size() + a;
      dense_cell c{next_pos++, std::vector<std::uint16_t>(heads * dim)};
      for (auto& v : c.row) v = static_cast<std::uint16_t>(rng());
      for (std::int32_t h = 0; h < heads; ++h)
        for (std::int32_t d = 0; d < dim; ++d) kv(slot, h, d) = c.row[h * dim + d];
      positions[slot] = c.pos;
      oracle.push_back(std::move(c));
    }
    map.append(add);
    const std::int32_t n = map.size();
    // Eviction density varies per round: none, a few, most, or all.
    const double p_evict = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    const double p = round % 7 == 0 ? 0.0 : (round % 11 == 0 ? 1.0 : p_evict * p_evict);
    std::vector<bool> keep(n);
    for (std::int32_t i = 0; i < n; ++i)
      keep[i] = std::uniform_real_distribution<double>(0.0, 1.0)(rng) >= p;
    const auto plan = plan_from_keep(keep, static_cast<std::uint64_t>(round));
    map.plan(plan, moves);
    const std::int32_t evicted = n - plan.n_kv_after;
    ASSERT_LE(moves.num_moves(), evicted) << "round " << round;
    // Exactly the kept cells whose slot is at or beyond the new end move.
    std::int32_t beyond = 0;
    for (std::int32_t i = 0; i < n; ++i) beyond += keep[i] && map.slot(i) >= plan.n_kv_after;
    ASSERT_EQ(moves.num_moves(), beyond);
    total_moves += moves.num_moves();
    total_evicted += evicted;
    if (per_head) {
      for (std::int32_t h = 0; h < heads; ++h) cpu::compact(kv, h, moves);
    } else {
      cpu::compact_all_heads(kv, moves);
    }
    cpu::compact(pos_view, 0, moves);
    map.apply(plan, moves);
    std::vector<dense_cell> kept;
    for (std::int32_t i = 0; i < n; ++i)
      if (keep[i]) kept.push_back(std::move(oracle[i]));
    oracle = std::move(kept);
    ASSERT_EQ(map.size(), static_cast<std::int32_t>(oracle.size()));
    std::vector<bool> used(capacity, false);
    for (std::int32_t i = 0; i < map.size(); ++i) {
      const std::int32_t s = map.slot(i);
      ASSERT_TRUE(s >= 0 && s < map.size() && !used[s]) << "slots must be a permutation";
      used[s] = true;
      ASSERT_EQ(positions[s], oracle[i].pos) << "round " << round << " cell " << i;
      for (std::int32_t h = 0; h < heads; ++h)
        for (std::int32_t d = 0; d < dim; ++d)
          ASSERT_EQ(kv(s, h, d), oracle[i].row[h * dim + d])
              << "round " << round << " cell " << i << " head " << h << " dim " << d;
    }
  }
  EXPECT_GT(total_moves, 0);
  EXPECT_LE(total_moves, total_evicted);
}

TEST(HoleFill, RandomPlansMatchDenseOracleNhdAllHeads) {
  for (std::uint32_t seed = 1; seed <= 4; ++seed)
    run_random_rounds(seed, 3, 8, false, layout_nhd{{97, 3, 8}});
}

TEST(HoleFill, RandomPlansMatchDenseOracleHndPerHead) {
  for (std::uint32_t seed = 5; seed <= 8; ++seed)
    run_random_rounds(seed, 2, 5, true, layout_hnd{{64, 2, 5}});
}

TEST(HoleFill, RandomPlansMatchDenseOracleTransposedV) {
  // llama.cpp's transposed V: dim-major, cells contiguous within a (head, dim) column.
  const std::int32_t cap = 41, heads = 2, dim = 4;
  layout_strided l{{cap, heads, dim}, 1, static_cast<std::int64_t>(dim) * cap, cap};
  run_random_rounds(9, heads, dim, false, l);
}

/// The per-position score an engine would compute from a row (here: from the position stored
/// with it), elementwise, so physical and logical order give bit-identical values.
float score_of(std::int32_t pos, std::int32_t now) {
  const std::uint32_t h = static_cast<std::uint32_t>(pos) * 2654435761u;
  const float content = 0.05f + static_cast<float>(h >> 8) / static_cast<float>(1u << 24);
  return content / (1.0f + 0.01f * static_cast<float>(now - pos)) * 1e-3f;
}

TEST(HoleFill, TieredCacheStreamDecidesLikeStableMode) {
  audiokv_config config;
  config.budget = 256;
  tiered_cache<> stable(config), holes(config);
  const std::int32_t cap = stable.capacity();
  slot_map map(cap);
  eviction_plan p_stable, p_holes;
  p_stable.reserve(cap);
  p_holes.reserve(cap);
  hole_fill_plan moves;
  moves.reserve(cap);
  // One head of K as [cap, 1, 4] float rows whose first element is the position, and a separate
  // position array per slot, for each mode.
  std::vector<float> k_stable(cap * 4), k_holes(cap * 4);
  std::vector<std::int32_t> pos_holes(cap);
  std::vector<float> scores(cap), physical(cap);
  test::speech_stream stream(3, 1);
  std::int64_t stable_moves = 0, hole_moves = 0, evicted = 0;
  for (std::int32_t step = 0; step < 6000; ++step) {
    const frame_meta f = stream.next_frame();
    const std::int32_t n0 = stable.num_cells();
    ASSERT_EQ(n0, holes.num_cells());
    for (std::int32_t d = 0; d < 4; ++d) {
      k_stable[n0 * 4 + d] = static_cast<float>(f.pos) + 0.25f * d;
      k_holes[n0 * 4 + d] = static_cast<float>(f.pos) + 0.25f * d;
    }
    pos_holes[n0] = f.pos;
    stable.append(&f, 1);
    holes.append(&f, 1);
    map.append(1);
    const std::int32_t n = stable.num_cells();
    for (std::int32_t i = 0; i < n; ++i) scores[i] = score_of(stable.positions()[i], f.pos);
    stable.observe(scores.data(), n);
    for (std::int32_t s = 0; s < n; ++s) physical[s] = score_of(pos_holes[s], f.pos);
    map.gather(span<const float>(physical.data(), n), span<float>(scores.data(), n));
    holes.observe(scores.data(), n);
    ASSERT_EQ(stable.wants_eviction(), holes.wants_eviction());
    if (!stable.wants_eviction()) continue;
    stable.plan(p_stable);
    holes.plan(p_holes);
    ASSERT_EQ(p_stable.move_to, p_holes.move_to) << "step " << step;
    for (std::int32_t i = 0; i < n; ++i)
      stable_moves += p_stable.move_to[i] >= 0 && p_stable.move_to[i] != i;
    map.plan(p_holes, moves);
    hole_moves += moves.num_moves();
    evicted += static_cast<std::int64_t>(p_holes.evict.size());
    cpu::compact(kv_view<float, layout_nhd>(k_stable.data(), layout_nhd{{cap, 1, 4}}), 0, p_stable);
    cpu::compact(kv_view<float, layout_nhd>(k_holes.data(), layout_nhd{{cap, 1, 4}}), 0, moves);
    cpu::compact(kv_view<std::int32_t, layout_nhd>(pos_holes.data(), layout_nhd{{cap, 1, 1}}), 0,
                 moves);
    stable.apply(p_stable);
    holes.apply(p_holes);
    map.apply(p_holes, moves);
    for (std::int32_t i = 0; i < holes.num_cells(); ++i) {
      ASSERT_EQ(pos_holes[map.slot(i)], holes.positions()[i]);
      ASSERT_EQ(std::memcmp(&k_holes[map.slot(i) * 4], &k_stable[i * 4], 4 * sizeof(float)), 0);
    }
  }
  EXPECT_GT(evicted, 0);
  EXPECT_LE(hole_moves, evicted);
  EXPECT_LT(hole_moves, stable_moves);
}

TEST(HoleFill, ErrorsChangeNothing) {
  slot_map map(8);
  EXPECT_THROW(map.append(9), error);
  try {
    map.append(-1);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "count");
  }
  EXPECT_EQ(map.size(), 0);
  map.append(6);
  const auto good = plan_from_keep({true, false, true, true, true, true}, 4);
  hole_fill_plan moves;
  map.plan(good, moves);
  const hole_fill_plan saved = moves;

  // A plan for another size, or a non-stable logical map: rejected, `moves` unchanged.
  auto wrong = plan_from_keep({true, true, false}, 4);
  try {
    map.plan(wrong, moves);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "plan.n_kv_before");
  }
  auto unstable = good;
  unstable.move_to[2] = 0;
  try {
    map.plan(unstable, moves);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "plan.move_to[2]");
  }
  EXPECT_EQ(moves.src, saved.src);
  EXPECT_EQ(moves.move_to, saved.move_to);

  // A tampered move list: dst not an evicted slot -> nothing moves.
  std::vector<std::int32_t> rows{0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<std::int32_t> original = rows;
  kv_view<std::int32_t, layout_nhd> kv(rows.data(), layout_nhd{{8, 1, 1}});
  auto tampered = moves;
  ASSERT_EQ(tampered.num_moves(), 1);
  tampered.dst[0] = 0;
  try {
    cpu::compact(kv, 0, tampered);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "plan.dst[0]");
  }
  tampered = moves;
  tampered.src[0] = 2;  // below n_after: would overwrite a kept row's source
  EXPECT_THROW(cpu::compact_all_heads(kv, tampered), error);
  tampered = moves;
  tampered.n_before = 9;  // beyond the view
  EXPECT_THROW(cpu::compact(kv, 0, tampered), error);
  EXPECT_THROW(cpu::compact(kv, 1, moves), error);
  EXPECT_EQ(rows, original);

  // Stale moves (the map changed since) and moves of another plan: rejected, map unchanged.
  const std::vector<std::int32_t> slots_before(map.slots().begin(), map.slots().end());
  auto other = good;
  other.generation = 5;
  try {
    map.apply(other, moves);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "moves.plan_generation");
  }
  map.append(1);
  const auto good7 = plan_from_keep({true, false, true, true, true, true, true}, 4);
  try {
    map.apply(good7, moves);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "moves.map_generation");
  }
  EXPECT_EQ(map.size(), 7);
  for (std::int32_t i = 0; i < 6; ++i) EXPECT_EQ(map.slot(i), slots_before[i]);

  std::vector<float> phys(3), logi(7);
  try {
    map.gather(phys, logi);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "physical.size()");
  }
}

}  // namespace
