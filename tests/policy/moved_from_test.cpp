// SPDX-License-Identifier: Apache-2.0
// Moved-from policies: after `b = std::move(a)`, every public method of `a` must be safe and
// consistent (a valid, empty object of capacity 0, or a clear error), and `a` usable again
// once it gets slots or a new value. Before the fix, a.reset() kept a capacity a no longer
// owned and a.append() stored through a null pointer (cell_store). Run under ASan/UBSan.
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <audiokv/policy/speech/attention_mass.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;
using test::frames;

/// Runs `call`, which must throw audiokv::error naming `argument`; returns its message.
std::string rejected(const std::function<void()>& call, const std::string& argument) {
  try {
    call();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted; expected an error naming " << argument;
  return {};
}

audiokv_config config_of(std::int32_t budget, std::int32_t speakers = 2) {
  audiokv_config c;
  c.budget = budget;
  c.num_speakers = speakers;
  return c;
}

/// A cache with `n` cells, observed, one plan applied and a shared frame table.
tiered_cache<> busy_cache(std::shared_ptr<frame_table> table) {
  tiered_cache<> cache(config_of(100));
  cache.share_frames(std::move(table));
  auto f = frames(0, 95, 1, 0.5f);
  f[3].flags = frame_flag_sink;
  cache.append(f);
  cache.observe(std::vector<float>(95, 0.01f));
  eviction_plan plan;
  cache.plan(plan);
  cache.apply(plan);
  return cache;
}

/// Every public member of a moved-from tiered_cache: readers see an empty cache of capacity 0,
/// the calls that need no cell work, append() is rejected, and reserve() revives it.
TEST(MovedFrom, TieredCacheIsValidAndEmptyForEveryCall) {
  auto table = std::make_shared<frame_table>(64);
  tiered_cache<> a = busy_cache(table);
  const std::int32_t cells = a.num_cells();
  const std::uint64_t id = a.id();
  eviction_plan before_move;
  a.plan_to(cells - 5, before_move);
  tiered_cache<> b = std::move(a);
  // The target is the cache it was: same id, cells, table; a plan made before applies.
  EXPECT_EQ(b.id(), id);
  EXPECT_EQ(b.num_cells(), cells);
  EXPECT_EQ(b.frames(), table);
  b.apply(before_move);

  // Readers.
  EXPECT_STREQ(a.name(), "audiokv");
  EXPECT_EQ(a.config().budget, 100);
  EXPECT_NE(a.id(), id);
  EXPECT_NE(a.id(), 0u);
  EXPECT_EQ(a.num_cells(), 0);
  EXPECT_EQ(a.capacity(), 0);
  EXPECT_EQ(a.budget(), 100);
  EXPECT_FALSE(a.wants_eviction());
  EXPECT_EQ(a.frames(), nullptr);
  EXPECT_EQ(a.speaker_baselines(), nullptr);
  EXPECT_EQ(a.pool_size(pool_tier::buffer), 0);
  EXPECT_EQ(a.pool_size(pool_tier::emergency), 0);
  EXPECT_EQ(a.base_pool_cells(), b.base_pool_cells());
  EXPECT_EQ(a.emergency_pool_cells(), b.emergency_pool_cells());
  EXPECT_EQ(a.trigger_cells(), b.trigger_cells());
  EXPECT_EQ(a.recent_window_frames(), b.recent_window_frames());
  EXPECT_EQ(a.protected_cells(), 0);
  EXPECT_EQ(a.stats().steps, 0);
  EXPECT_EQ(a.stats().evictions, 0);
  EXPECT_EQ(a.pending_frames(), 0);
  EXPECT_EQ(a.forecast().steps(), 0);
  EXPECT_FALSE(a.frontier().given());
  EXPECT_EQ(a.config_fingerprint(), b.config_fingerprint());
  a.pipeline();
  rejected([&] { a.is_protected(0); }, "slot");

  // Calls on zero cells.
  a.observe(nullptr, 0);
  a.observe(span<const float>());
  a.observe_group(span<const float>(), 4, 0);
  a.observe_group(static_cast<const float*>(nullptr), 4, 0);
  rejected([&] { a.observe(std::vector<float>(1, 0.1f)); }, "attention.size()");
  tiered_cache<>* both[2] = {&a, &b};
  const std::vector<float> row_b(static_cast<std::size_t>(b.num_cells()), 0.01f);
  const span<const float> rows[2] = {span<const float>(), span<const float>(row_b)};
  tiered_cache<>::observe_heads(span<tiered_cache<>* const>(both, 2),
                                span<const span<const float>>(rows, 2));
  EXPECT_EQ(a.stats().steps, 5);  // four observe calls and observe_heads
  eviction_plan plan;
  a.plan(plan);
  EXPECT_TRUE(plan.empty());
  EXPECT_EQ(plan.n_kv_before, 0);
  a.plan_to(0, plan);
  EXPECT_TRUE(plan.empty());
  a.apply(plan);
  a.plan_evicting(span<const std::uint8_t>(), plan);
  EXPECT_TRUE(plan.empty());
  rejected([&] { a.plan_evicting(std::vector<std::uint8_t>(1, 1), plan); }, "evict_mask.size()");
  const tiered_cache<>* heads[2] = {&a, &b};
  eviction_plan plans[2];
  tiered_cache<>::plan_heads(span<const tiered_cache<>* const>(heads, 2),
                             span<eviction_plan>(plans, 2));
  EXPECT_TRUE(plans[0].empty());
  rejected([&] { a.apply(before_move); }, "plan.cache_id");
  a.set_alignment_position(7);
  EXPECT_TRUE(a.frontier().given());
  EXPECT_EQ(a.importance(), nullptr);
  EXPECT_EQ(a.prefetch(), 0);

  // append() is rejected with a message that says why; nothing changes.
  const auto f = frames(0, 3);
  const std::string why = rejected([&] { a.append(f); }, "count");
  EXPECT_NE(why.find("capacity 0"), std::string::npos) << why;
  EXPECT_NE(why.find("reserve()"), std::string::npos) << why;
  a.append(nullptr, 0);
  EXPECT_EQ(a.num_cells(), 0);

  // A snapshot of it is an empty cache of capacity 0: the target of the move rejects it
  // (capacity), and so does the moved-from cache a normal snapshot.
  std::vector<std::byte> empty(a.snapshot_size());
  a.snapshot(empty);
  rejected([&] { b.restore(empty); }, "snapshot");
  std::vector<std::byte> full(b.snapshot_size());
  b.snapshot(full);
  const std::string capacity = rejected([&] { a.restore(full); }, "snapshot");
  EXPECT_NE(capacity.find("reserve() it first"), std::string::npos) << capacity;
  a.restore(empty);  // its own kind: accepted, still empty
  EXPECT_EQ(a.num_cells(), 0);

  a.reset();
  EXPECT_EQ(a.capacity(), 0);
  rejected([&] { a.append(f); }, "count");

  // reserve() makes it a working cache again, with speaker baselines, sharing a table.
  a.reserve(100);
  EXPECT_EQ(a.capacity(), 100);
  ASSERT_NE(a.speaker_baselines(), nullptr);
  EXPECT_EQ(a.speaker_baselines()[1], 0.0f);
  a.share_frames(std::make_shared<frame_table>(64));
  a.append(frames(0, 95, 1, 0.5f));
  a.observe(std::vector<float>(95, 0.01f));
  EXPECT_GT(a.speaker_baselines()[1], 0.0f);
  ASSERT_TRUE(a.wants_eviction());
  a.plan(plan);
  a.apply(plan);
  EXPECT_LT(a.num_cells(), a.trigger_cells());
  // A snapshot restores into it once it has the writer's capacity.
  tiered_cache<> c(config_of(100));
  c.restore(std::vector<std::byte>(full.begin(), full.end()));
  EXPECT_EQ(c.num_cells(), b.num_cells());
}

TEST(MovedFrom, TieredCacheMoveAssignmentReleasesTheTargetAndEmptiesTheSource) {
  auto table = std::make_shared<frame_table>(64);
  tiered_cache<> a = busy_cache(table);
  tiered_cache<> b = busy_cache(std::make_shared<frame_table>(64));
  const std::int32_t live = table->live_rows();
  ASSERT_GT(live, 0);
  a = std::move(b);  // a's cells leave `table`
  EXPECT_EQ(table->live_rows(), 0);
  EXPECT_EQ(b.capacity(), 0);
  EXPECT_EQ(b.num_cells(), 0);
  EXPECT_GT(a.num_cells(), 0);
  b = tiered_cache<>(config_of(100));  // assigning a cache revives it
  b.append(frames(0, 5));
  EXPECT_EQ(b.num_cells(), 5);
  a = std::move(a);  // self-move changes nothing observable
  EXPECT_GT(a.num_cells(), 0);
}

/// One baseline of each kind, each filled, moved, then every call on the moved-from one.
template <class Policy, class Config>
void check_baseline(const Config& config) {
  Policy a(config);
  a.append(frames(0, 30));
  a.observe(std::vector<float>(30, 0.02f));
  const std::uint64_t id = a.id();
  Policy b = std::move(a);
  EXPECT_EQ(b.id(), id) << b.name();
  EXPECT_EQ(b.num_cells(), 30) << b.name();
  EXPECT_STREQ(a.name(), b.name());
  EXPECT_NE(a.id(), id);
  EXPECT_EQ(a.num_cells(), 0) << a.name();
  EXPECT_EQ(a.capacity(), 0) << a.name();
  EXPECT_EQ(a.budget(), b.budget()) << a.name();
  EXPECT_EQ(a.steps(), 0) << a.name();
  EXPECT_EQ(a.cells_evicted(), 0) << a.name();
  EXPECT_FALSE(a.wants_eviction()) << a.name();
  a.observe(nullptr, 0);
  a.observe(span<const float>());
  eviction_plan plan;
  a.plan(plan);
  EXPECT_TRUE(plan.empty()) << a.name();
  a.plan_to(0, plan);
  EXPECT_TRUE(plan.empty()) << a.name();
  a.check_plan(plan);
  a.apply(plan);
  a.plan_evicting(span<const std::uint8_t>(), plan);
  EXPECT_TRUE(plan.empty());
  const std::string why = rejected([&] { a.append(frames(0, 1)); }, "count");
  // The error location keeps the policy's name after the move.
  EXPECT_EQ(why.rfind(std::string("audiokv::") + a.name(), 0), 0u) << why;
  rejected([&] { a.check_append(frames(0, 1).data(), 1); }, "count");
  rejected([&] { a.plan_to(-1, plan); }, "target_cells");
  a = std::move(b);  // assigning a policy revives it
  EXPECT_EQ(a.num_cells(), 30) << a.name();
  EXPECT_EQ(a.id(), id);
  a.plan_to(10, plan);
  a.apply(plan);
  EXPECT_EQ(a.num_cells(), 10) << a.name();
}

TEST(MovedFrom, EveryBaselineIsValidAndEmptyForEveryCall) {
  const baseline_config base{20, 40, 1};
  check_baseline<fifo>(base);
  check_baseline<lru>(lru_config{base});
  check_baseline<streaming_llm>(streaming_llm_config{base, 4});
  check_baseline<h2o>(h2o_config{base, -1});
  snapkv_config snap;
  snap.base = base;
  snap.window = 4;
  check_baseline<snapkv>(snap);
  check_baseline<pyramidkv>(pyramidkv_config{snap, 0, 1, 20});
  check_baseline<tova>(tova_config{base, false});
  check_baseline<observed_attention>(base);
  check_baseline<uniform_stride>(base);
  check_baseline<random_eviction>(random_config{base, 7});
  // knorm needs key norms to plan: give them through the moves.
  knorm a(base);
  a.append_with_norms(frames(0, 30), std::vector<float>(30, 1.0f));
  knorm b = std::move(a);
  EXPECT_EQ(a.num_cells(), 0);
  EXPECT_EQ(a.capacity(), 0);
  rejected([&] { a.append_with_norms(frames(0, 1), std::vector<float>(1, 1.0f)); }, "count");
  rejected([&] { a.set_key_norms(0, std::vector<float>(1, 1.0f)); }, "first_slot");
  eviction_plan plan;
  a.plan_to(0, plan);
  EXPECT_TRUE(plan.empty());
  b.plan_to(10, plan);
  b.apply(plan);
  EXPECT_EQ(b.num_cells(), 10);
}

TEST(MovedFrom, AdakvHandleAndGroup) {
  snapkv_config snap;
  snap.base = baseline_config{10, 30, 1};
  snap.window = 4;
  auto group = adakv_group::create(adakv_config{snap, 2, 0.2});
  auto made = group->make_head(0);
  auto& handle = static_cast<adakv_head&>(*made);
  handle.append(frames(0, 12));
  adakv_head moved = std::move(handle);
  EXPECT_EQ(moved.num_cells(), 12);
  // The moved-from handle refers to no head.
  EXPECT_EQ(handle.id(), 0u);
  EXPECT_EQ(handle.num_cells(), 0);
  EXPECT_EQ(handle.capacity(), 0);
  EXPECT_EQ(handle.budget(), 0);
  EXPECT_EQ(handle.positions(), nullptr);
  EXPECT_FALSE(handle.wants_eviction());
  EXPECT_EQ(handle.head_index(), 0);
  eviction_plan plan;
  rejected([&] { handle.group(); }, "group");
  rejected([&] { handle.append(frames(20, 1)); }, "group");
  rejected([&] { handle.observe(nullptr, 0); }, "group");
  rejected([&] { handle.observe_group(span<const float>(), 1, 0); }, "group");
  rejected([&] { handle.plan(plan); }, "group");
  rejected([&] { handle.plan_to(1, plan); }, "group");
  rejected([&] { handle.apply(plan); }, "group");
  rejected([&] { handle.plan_evicting(span<const std::uint8_t>(), plan); }, "group");
  handle = moved;  // a handle assigned to it works again
  EXPECT_EQ(handle.num_cells(), 12);

  // A group moved out from under its handles: the handles see no head, the group none.
  adakv_group other = std::move(*group);
  EXPECT_EQ(other.num_heads(), 2);
  EXPECT_EQ(group->num_heads(), 0);
  EXPECT_EQ(group->total_cells(), 0);
  EXPECT_FALSE(group->wants_eviction());
  std::vector<eviction_plan> plans;
  group->plan(plans);
  EXPECT_TRUE(plans.empty());
  group->plan_to(0, plans);
  group->apply(plans);
  rejected([&] { group->head(0); }, "head");
  rejected([&] { group->append(0, frames(0, 1).data(), 1); }, "head");
  rejected([&] { group->observe(0, nullptr, 0); }, "head");
  EXPECT_EQ(handle.num_cells(), 0);
  EXPECT_EQ(handle.id(), 0u);
  rejected([&] { handle.plan(plan); }, "head");
  EXPECT_EQ(other.head(0).num_cells(), 12);
}

TEST(MovedFrom, SequenceBatchIsAnEmptyBatch) {
  sequence_batch<tiered_cache<>> a;
  a.add_sequence(config_of(100));
  a.add_sequence(config_of(100));
  a[1].append(frames(0, 10));
  sequence_batch<tiered_cache<>> b = std::move(a);
  EXPECT_EQ(b.size(), 2);
  EXPECT_EQ(b.num_active(), 2);
  EXPECT_EQ(b[1].num_cells(), 10);
  EXPECT_EQ(a.size(), 0);
  EXPECT_EQ(a.num_active(), 0);
  EXPECT_FALSE(a.active(0));
  const std::int64_t indptr[1] = {0};
  a.observe(span<const float>(), span<const std::int64_t>(indptr, 1));
  EXPECT_EQ(a.plan_all(), 0);
  a.apply_all();
  rejected([&] { a.remove_sequence(0); }, "s");
  rejected([&] { a.share_frames(0, std::make_shared<frame_table>(8)); }, "s");
  EXPECT_EQ(a.add_sequence(config_of(100)), 0);
  EXPECT_EQ(a.num_active(), 1);
  b = std::move(a);
  EXPECT_EQ(b.num_active(), 1);
  EXPECT_EQ(a.num_active(), 0);
}

TEST(MovedFrom, AttentionMassAndPlans) {
  attention_mass a(8);
  a.append(5);
  attention_mass b = std::move(a);
  EXPECT_EQ(b.size(), 5);
  EXPECT_EQ(a.size(), 0);
  rejected([&] { a.append(1); }, "count");  // capacity 0
  a.append(0);

  // A moved-from plan is stale for the cache that made it, and plan() refills it.
  tiered_cache<> cache(config_of(100));
  cache.append(frames(0, 95));
  eviction_plan p;
  cache.plan(p);
  eviction_plan q = std::move(p);
  rejected([&] { cache.apply(p); }, "plan.move_to.size()");
  cache.plan(p);
  EXPECT_EQ(p.move_to, q.move_to);
  cache.apply(p);
}

}  // namespace
