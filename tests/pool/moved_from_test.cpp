// SPDX-License-Identifier: Apache-2.0
// Moved-from memory structures: after `b = std::move(a)`, every public method of `a` must be
// safe and consistent (empty, capacity 0, or a clear error), and `a` usable again once it
// gets slots or a new value. Before the fix their counters survived the move while their
// arrays did not, so the next call indexed an empty array. Run under ASan/UBSan.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/cpu/head_kv_store.hpp>
#include <audiokv/pool/shared_row_table.hpp>
#include <audiokv/pool/slot_map.hpp>
#include <audiokv/types/eviction_plan.hpp>
#include <audiokv/types/frame_table.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace audiokv;

void expect_error(const std::function<void()>& call, const std::string& argument) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected an error naming " << argument;
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
  }
}

/// A stable plan over `n` cells that evicts the listed ones.
eviction_plan plan_evicting(std::int32_t n, const std::vector<std::int32_t>& evicted) {
  eviction_plan p;
  p.n_kv_before = n;
  std::int32_t kept = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    const bool out = std::find(evicted.begin(), evicted.end(), i) != evicted.end();
    p.move_to.push_back(out ? -1 : kept);
    if (out) p.evict.push_back(i);
    kept += out ? 0 : 1;
  }
  p.n_kv_after = kept;
  return p;
}

TEST(MovedFrom, SlotMapIsEmptyWithCapacityZero) {
  slot_map a(8);
  a.append(6);
  const eviction_plan p = plan_evicting(6, {1});
  hole_fill_plan moves;
  a.plan(p, moves);
  slot_map b = std::move(a);
  EXPECT_EQ(b.size(), 6);
  b.apply(p, moves);  // moves planned before the move apply to the target
  EXPECT_EQ(b.size(), 5);
  EXPECT_EQ(a.size(), 0);
  EXPECT_EQ(a.capacity(), 0);
  EXPECT_EQ(a.slots().size(), 0u);
  expect_error([&] { a.append(1); }, "count");
  a.append(0);
  const eviction_plan empty = plan_evicting(0, {});
  a.plan(empty, moves);
  a.apply(empty, moves);
  expect_error([&] { a.plan(p, moves); }, "plan.n_kv_before");
  std::vector<float> out;
  a.gather(span<const float>(), span<float>(out));
  a.reserve(4);
  a.append(4);
  EXPECT_EQ(a.slot(3), 3);
  b = std::move(a);
  EXPECT_EQ(b.size(), 4);
  EXPECT_EQ(a.capacity(), 0);
}

TEST(MovedFrom, SharedRowTableIsEmptyWithCapacityZeroAndKeepsItsInt8Arena) {
  shared_row_table a(8, 4, 8);
  a.append_row(row_precision::full);
  a.append_shared();
  a.append_row(row_precision::int8);
  shared_row_table b = std::move(a);
  EXPECT_EQ(b.num_cells(), 3);
  EXPECT_EQ(a.num_cells(), 0);
  EXPECT_EQ(a.cell_capacity(), 0);
  EXPECT_EQ(a.num_rows(row_precision::full), 0);
  EXPECT_EQ(a.row_capacity(row_precision::int8), 0);
  EXPECT_TRUE(a.has_int8_arena());
  expect_error([&] { a.append_row(row_precision::full); }, "num_cells()");
  expect_error([&] { a.append_shared(); }, "num_cells()");
  row_transition t;
  a.plan(nullptr, 0, nullptr, t);
  a.apply(nullptr, 0, t);
  a.reserve(4, 2, 4);  // an int8 arena again: it still has one
  a.append_row(row_precision::int8);
  EXPECT_EQ(a.num_cells(), 1);
}

TEST(MovedFrom, FrameTableIsARinglessEmptyTable) {
  frame_table a(16);
  const frame_meta f0{0, 0, 1.0f, 0, 0.0f};
  a.prepare(&f0, 1);
  a.acquire(f0);
  frame_table b = std::move(a);
  EXPECT_EQ(b.live_rows(), 1);
  EXPECT_EQ(b.frame(0).pos, 0);
  EXPECT_EQ(a.window(), 0);
  EXPECT_EQ(a.live_rows(), 0);
  EXPECT_EQ(a.old_rows(), 0);
  EXPECT_EQ(a.references(0), 0u);
  EXPECT_TRUE(a.agrees(f0));
  // Still a table: positions go to its sorted rows (it allocates them).
  std::vector<frame_meta> frames;
  for (std::int32_t p = 0; p < 40; ++p) frames.push_back(frame_meta{p * 3, p % 2, 0.5f, 0, 1.0f});
  a.prepare(frames.data(), static_cast<std::int32_t>(frames.size()));
  for (const auto& f : frames) a.acquire(f);
  EXPECT_EQ(a.live_rows(), 40);
  EXPECT_EQ(a.speaker(33), 1);
  EXPECT_EQ(a.frame(30).pos, 30);
  std::int32_t pos[3] = {0, 3, 6}, speakers[3] = {};
  a.gather_speakers(pos, 3, speakers);
  EXPECT_EQ(speakers[1], 1);
  a.retain(3);
  EXPECT_EQ(a.references(3), 2u);
  for (const auto& f : frames) a.release(f.pos);
  a.release(3);
  EXPECT_EQ(a.live_rows(), 0);
  b = std::move(a);
  EXPECT_EQ(b.window(), 0);
}

TEST(MovedFrom, HeadKvStoreIsEmptyWithCapacityZero) {
  cpu::head_kv_store_config c;
  c.cell_capacity = 6;
  c.head_dim = 4;
  c.int8_buffer = true;
  c.full_rows = 3;
  cpu::head_kv_store a(c);
  const std::vector<float> k{1, 2, 3, 4}, v{4, 3, 2, 1}, q{1, 0, 0, 0};
  a.append(k.data(), v.data(), pool_tier::base);
  a.append(v.data(), k.data());
  cpu::head_kv_store b = std::move(a);
  EXPECT_EQ(b.num_cells(), 2);
  EXPECT_EQ(a.num_cells(), 0);
  EXPECT_EQ(a.config().cell_capacity, 0);
  EXPECT_EQ(a.kv_bytes(), 0);
  EXPECT_EQ(a.table_bytes(), 0);
  EXPECT_EQ(a.dense_kv_bytes(), 0);
  std::vector<float> out(4, 9.0f);
  a.attend(q.data(), out.data(), nullptr);
  EXPECT_EQ(out, std::vector<float>(4, 0.0f));
  expect_error([&] { a.append(k.data(), v.data()); }, "num_cells()");
  expect_error([&] { a.read_cell(0, out.data(), out.data()); }, "c");
  a.apply(eviction_plan{}, nullptr);
  a.reserve(0);  // nothing asked: stays empty
  EXPECT_EQ(a.config().cell_capacity, 0);
  a.reserve(6, 3);
  EXPECT_FALSE(a.append(k.data(), v.data(), pool_tier::base));  // a full-precision row
  std::vector<float> rk(4), rv(4);
  a.read_cell(0, rk.data(), rv.data());
  EXPECT_EQ(rk, k);
  b = std::move(a);
  EXPECT_EQ(b.num_cells(), 1);
}

}  // namespace
