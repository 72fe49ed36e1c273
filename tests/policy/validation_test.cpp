// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;
using test::frames;

audiokv_config valid_config() {
  audiokv_config c;
  c.budget = 100;
  c.num_speakers = 2;
  return c;
}

void expect_config_error(const std::function<void(audiokv_config&)>& mutate,
                         const std::string& argument) {
  audiokv_config c = valid_config();
  mutate(c);
  try {
    tiered_cache<> cache(c);
    FAIL() << "accepted invalid " << argument;
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(argument), std::string::npos) << e.what();
  }
}

TEST(Validation, EveryConfigFieldIsChecked) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_config_error([](auto& c) { c.budget = 0; }, "config.budget");
  expect_config_error([](auto& c) { c.capacity = 50; }, "config.capacity");
  expect_config_error([](auto& c) { c.split.base = 0.7f; },
                      "split.base + split.buffer + split.emergency");
  expect_config_error([](auto& c) { c.split.buffer = -0.1f; }, "split.buffer");
  expect_config_error([nan](auto& c) { c.split.emergency = nan; }, "split.emergency");
  expect_config_error([](auto& c) { c.trigger = 1.5f; }, "config.trigger");
  expect_config_error([](auto& c) { c.alpha = 0.0f; }, "config.alpha");
  expect_config_error([](auto& c) { c.base_rate = -0.1f; }, "config.base_rate");
  expect_config_error([nan](auto& c) { c.lambda = nan; }, "config.lambda");
  expect_config_error([](auto& c) { c.voice_weight = -1.0f; }, "config.voice_weight");
  expect_config_error([](auto& c) { c.boundary_radius = -1; }, "config.boundary_radius");
  expect_config_error([](auto& c) { c.frame_ms = 0.0f; }, "config.frame_ms");
  expect_config_error([](auto& c) { c.min_retention_ms = -5.0f; }, "config.min_retention_ms");
  expect_config_error([](auto& c) { c.num_speakers = 0; }, "config.num_speakers");
  expect_config_error([](auto& c) { c.baseline_rate = 2.0f; }, "config.baseline_rate");
  expect_config_error([](auto& c) { c.drift_window = 1; }, "config.drift_window");
  expect_config_error([](auto& c) { c.drift_factor = 0.0f; }, "config.drift_factor");
  // Protected set (recent window + emergency pool) not below the trigger level, with a
  // window that may not shrink: the setting that breaks it is named (see
  // Validation.ProtectedSetErrorNamesTheCauseWithCounts).
  expect_config_error(
      [](auto& c) {
        c.budget = 20;
        c.shrink_recent_window = false;
      },
      "config.min_retention_ms");
}

/// Snapshot of everything observable, to prove failed calls change nothing.
struct snapshot {
  std::vector<std::int32_t> pos;
  std::vector<float> importance;
  std::vector<pool_tier> tiers;
  audiokv_stats stats;
  bool operator==(const snapshot& o) const {
    return pos == o.pos && importance == o.importance && tiers == o.tiers &&
           stats.steps == o.stats.steps && stats.cells_evicted == o.stats.cells_evicted;
  }
};

snapshot take(const tiered_cache<>& c) {
  const auto n = c.num_cells();
  return {std::vector<std::int32_t>(c.positions(), c.positions() + n),
          std::vector<float>(c.importance(), c.importance() + n),
          std::vector<pool_tier>(c.tiers(), c.tiers() + n), c.stats()};
}

class FailedCalls : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = frames(0, 50);
    cache.append(f.data(), 50);
    std::vector<float> a(50, 0.02f);
    cache.observe(a.data(), 50);
    before = take(cache);
  }
  void expect_rejected(const std::function<void()>& call, const std::string& argument) {
    try {
      call();
      FAIL() << "accepted bad " << argument;
    } catch (const audiokv::error& e) {
      EXPECT_EQ(e.argument(), argument) << e.what();
    }
    EXPECT_TRUE(take(cache) == before) << "state changed by a failed call on " << argument;
  }
  tiered_cache<> cache{valid_config()};
  snapshot before;
};

TEST_F(FailedCalls, NanAndInfAndNegativeScores) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity(), -0.5f}) {
    std::vector<float> a(50, 0.02f);
    a[17] = bad;
    expect_rejected([&] { cache.observe(a.data(), 50); }, "attention[17]");
  }
}

TEST_F(FailedCalls, ShapeMismatch) {
  std::vector<float> a(49, 0.02f);
  expect_rejected([&] { cache.observe(a.data(), 49); }, "num_cells");
  expect_rejected([&] { cache.observe(nullptr, 50); }, "attention");
  std::vector<float> g(100, 0.01f);
  expect_rejected([&] { cache.observe_group(g.data(), 0, 50); }, "group_size");
}

TEST_F(FailedCalls, UnknownSpeakerOutOfOrderAndBadVoice) {
  auto f = frames(50, 3);
  f[2].speaker = 2;
  expect_rejected([&] { cache.append(f.data(), 3); }, "frames[2].speaker");
  auto g = frames(49, 1);
  expect_rejected([&] { cache.append(g.data(), 1); }, "frames[0].pos");
  auto h = frames(50, 2);
  h[1].pos = 50;
  expect_rejected([&] { cache.append(h.data(), 2); }, "frames[1].pos");
  auto v = frames(50, 1);
  v[0].voice = 2.0f;
  expect_rejected([&] { cache.append(v.data(), 1); }, "frames[0].voice");
  v[0].voice = 1.0f;
  v[0].prior = std::numeric_limits<float>::quiet_NaN();
  expect_rejected([&] { cache.append(v.data(), 1); }, "frames[0].prior");
  expect_rejected([&] { cache.append(v.data(), -1); }, "count");
}

TEST_F(FailedCalls, CapacityAndSinks) {
  auto f = frames(50, 51);
  expect_rejected([&] { cache.append(f.data(), 51); }, "count");
  auto s = frames(50, 11);
  for (auto& fr : s) fr.flags = frame_flag_sink;
  expect_rejected([&] { cache.append(s.data(), 11); }, "frames[10].flags");
}

TEST_F(FailedCalls, TargetsBelowTheProtectedSetAndStalePlans) {
  eviction_plan plan;
  expect_rejected([&] { cache.plan_to(-1, plan); }, "target_cells");
  // A target below the 20 protected recent frames gives a plan down to them (tested in
  // FailedCalls.TargetBelowTheProtectedSetStopsAtTheProtectedCells).
  cache.plan_to(40, plan);
  plan.move_to[3] = 7;
  expect_rejected([&] { cache.apply(plan); }, "plan.move_to[3]");
  cache.plan_to(40, plan);
  plan.generation += 1;
  expect_rejected([&] { cache.apply(plan); }, "plan.generation");
}

TEST(Validation, CompactRejectsMismatchedViews) {
  std::vector<float> k(10 * 2 * 4);
  eviction_plan plan;
  plan.n_kv_before = 11;
  plan.move_to.assign(11, 0);
  EXPECT_THROW(cpu::compact(kv_view<float>(k.data(), layout_nhd{{10, 2, 4}}), 0, plan),
               audiokv::error);
  plan.n_kv_before = 10;
  plan.move_to.assign(10, 0);
  EXPECT_THROW(cpu::compact(kv_view<float>(k.data(), layout_nhd{{10, 2, 4}}), 2, plan),
               audiokv::error);
}

}  // namespace

namespace {

using namespace audiokv;

// Regressions for the defects tests/fuzz found (tests/fuzz/README.md, "Known defects").
TEST_F(FailedCalls, TamperedEvictListsAndTierChanges) {
  eviction_plan plan;
  cache.plan_to(40, plan);
  plan.evict.push_back(1000);  // defect 3: out-of-range slot in evict
  expect_rejected([&] { cache.apply(plan); }, "plan.evict.size()");
  cache.plan_to(40, plan);
  plan.evict[0] = -1;
  expect_rejected([&] { cache.apply(plan); }, "plan.evict[0]");
}

// apply() checks the move map and the evict list in one pass first; each way a plan can
// disagree with itself must still be reported under the argument the entry-by-entry checks
// name, with the state untouched.
TEST_F(FailedCalls, EveryMoveMapAndEvictListDisagreementNamesItsArgument) {
  eviction_plan plan;
  cache.plan_to(40, plan);
  ASSERT_EQ(plan.evict.size(), 10u);
  const eviction_plan good = plan;
  const std::int32_t last_kept = [&] {
    std::int32_t j = plan.n_kv_before - 1;
    while (plan.move_to[j] == core::evicted_slot) --j;
    return j;
  }();
  plan.move_to[last_kept] += 1;  // a kept cell's target one past its kept count
  expect_rejected([&] { cache.apply(plan); }, "plan.move_to[" + std::to_string(last_kept) + "]");
  plan = good;
  plan.n_kv_after -= 1;
  expect_rejected([&] { cache.apply(plan); }, "plan.n_kv_after");
  plan = good;
  std::swap(plan.evict[4], plan.evict[5]);  // the right slots, out of order
  expect_rejected([&] { cache.apply(plan); }, "plan.evict[4]");
  plan = good;
  plan.evict.pop_back();  // one evicted slot unlisted
  expect_rejected([&] { cache.apply(plan); }, "plan.evict[9]");
  plan = good;
  plan.evict.clear();
  expect_rejected([&] { cache.apply(plan); }, "plan.evict[0]");
  plan = good;
  plan.evict.back() = plan.evict[8];  // a slot listed twice
  expect_rejected([&] { cache.apply(plan); }, "plan.evict[9]");
  plan = good;
  cache.apply(plan);
  EXPECT_EQ(cache.num_cells(), 40);
}

TEST(Validation, PromotingAnEmergencyCellIsRejected) {  // defect 5
  audiokv_config c;
  c.budget = 100;
  tiered_cache<> cache(c);
  auto f = test::frames(0, 50);
  f[3].flags = frame_flag_segment_start;
  cache.append(f.data(), 50);
  eviction_plan plan;
  cache.plan_to(40, plan);
  plan.promote.push_back(3);
  try {
    cache.apply(plan);
    FAIL() << "promoted an emergency cell";
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "plan.promote");
  }
  EXPECT_EQ(cache.tiers()[3], pool_tier::emergency);
}

TEST(Validation, CompactRejectsUnstableMoveMaps) {  // defect 1
  std::vector<float> k(4 * 2);
  eviction_plan plan;
  plan.n_kv_before = 4;
  plan.move_to = {0, -1, 1, 1000};
  try {
    cpu::compact(kv_view<float, layout_hnd>(k.data(), layout_hnd{{4, 1, 2}}), 0, plan);
    FAIL() << "accepted move_to[3] = 1000";
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "plan.move_to[3]");
  }
}

TEST(Validation, DurationsSpanningTooManyFramesAreRejected) {  // defect 2
  audiokv_config c;
  c.budget = 100;
  c.min_retention_ms = 1e30f;
  EXPECT_THROW(c.validate(), audiokv::error);
  c.min_retention_ms = 200.0f;
  c.frame_ms = 1e-40f;  // denormal
  EXPECT_THROW(c.validate(), audiokv::error);
}

TEST(Validation, ExtremeFiniteInputsKeepPlansDefined) {  // defect 7
  audiokv_config c;
  c.budget = 100;
  c.prior = prior_mode::multiply;
  tiered_cache<> cache(c);
  auto f = test::frames(0, 95);
  for (int j = 0; j < 95; j += 3) f[j].prior = 3e38f;
  cache.append(f.data(), 90);
  std::vector<float> a(90, 0.5f);
  cache.observe(a.data(), 90);
  eviction_plan plan;
  cache.plan(plan);
  EXPECT_GE(plan.ratio, 0.0f);
  EXPECT_LE(plan.ratio, 1.0f);
  EXPECT_LT(plan.n_kv_after, cache.trigger_cells());
}

TEST(Validation, EmptyPlansResetReleasedProtections) {  // defect 6
  audiokv_config c;
  c.budget = 100;
  c.boundary_radius = 10;
  c.split = {0.0f, 0.9f, 0.1f};
  tiered_cache<> cache(c);
  auto f = test::frames(0, 80);
  for (int j = 5; j < 75; j += 10) f[j].flags = frame_flag_phoneme_boundary;
  cache.append(f.data(), 80);
  eviction_plan plan;
  cache.plan_to(40, plan);
  ASSERT_GT(plan.protections_released, 0);
  cache.apply(plan);
  const auto released = cache.stats().protections_released;
  cache.plan(plan);  // below the trigger: empty
  EXPECT_EQ(plan.protections_released, 0);
  cache.apply(plan);
  EXPECT_EQ(cache.stats().protections_released, released);
}

}  // namespace

namespace {

using namespace audiokv;

/// Runs `call`, which must throw audiokv::error; returns it.
audiokv::error thrown_by(const std::function<void()>& call) {
  try {
    call();
  } catch (const audiokv::error& e) {
    return e;
  }
  ADD_FAILURE() << "no audiokv::error thrown";
  return audiokv::error("", "");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- lengths of caller buffers: checked before anything is read ----

TEST_F(FailedCalls, GroupScoresShorterThanGroupSizeTimesCellsAreRejectedBeforeAnyRead) {
  // Two query rows given, four claimed: the span form (a std::vector converts to it) knows
  // the length, so nothing past the 100 floats is read (ASan would report it otherwise).
  const std::vector<float> two_rows(2 * 50, 0.01f);
  const audiokv::error e = thrown_by([&] { cache.observe_group(two_rows, 4, 50); });
  EXPECT_EQ(e.argument(), "attention.size()");
  EXPECT_TRUE(contains(e.what(), "attention.size() = 100")) << e.what();
  EXPECT_TRUE(contains(e.what(), "4 x 50 = 200")) << e.what();
  EXPECT_TRUE(take(cache) == before);
  expect_rejected([&] { cache.observe_group(span<const float>(two_rows.data(), 99), 2, 50); },
                  "attention.size()");
  expect_rejected([&] { cache.observe_group(span<const float>(nullptr, 100), 2, 50); },
                  "attention");
}

TEST_F(FailedCalls, SpanObserveAndAppendCheckTheirLengths) {
  const std::vector<float> short_row(49, 0.02f);
  const audiokv::error e = thrown_by([&] { cache.observe(short_row); });
  EXPECT_EQ(e.argument(), "attention.size()");
  EXPECT_TRUE(contains(e.what(), "(50)")) << e.what();
  EXPECT_TRUE(take(cache) == before);
  auto bad = frames(50, 3);
  bad[1].pos = 10;
  expect_rejected([&] { cache.append(span<const frame_meta>(bad)); }, "frames[1].pos");
}

TEST(Validation, SpanFormsEqualThePointerForms) {
  tiered_cache<> by_span(valid_config()), by_pointer(valid_config());
  const auto f = frames(0, 6);
  by_span.append(f);
  by_pointer.append(f.data(), 6);
  const std::vector<float> rows = {0.1f, 0.2f, 0.3f, 0.1f, 0.2f, 0.1f,
                                   0.3f, 0.0f, 0.1f, 0.2f, 0.2f, 0.2f};
  by_span.observe_group(rows, 2, 6, gqa_reduce::max);
  by_pointer.observe_group(rows.data(), 2, 6, gqa_reduce::max);
  const std::vector<float> row = {0.5f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f};
  by_span.observe(row);
  by_pointer.observe(row.data(), 6);
  // max of the two rows, then the EMA (alpha 0.3) twice, hand-computed for cell 0 and 1.
  EXPECT_FLOAT_EQ(by_span.importance()[0], 0.3f * 0.5f + 0.7f * (0.3f * 0.3f));
  EXPECT_FLOAT_EQ(by_span.importance()[1], 0.3f * 0.1f + 0.7f * (0.3f * 0.2f));
  for (int j = 0; j < 6; ++j) EXPECT_EQ(by_span.importance()[j], by_pointer.importance()[j]);
}

TEST(Validation, BaselineBuffersAreLengthChecked) {
  policy_options o;
  o.budget = 8;
  for (const char* name : {"h2o", "snapkv", "tova", "lru", "observed_attention"}) {
    auto p = make_policy(name, o);
    const auto f = frames(0, 5);
    p->append(span<const frame_meta>(f));
    EXPECT_EQ(p->num_cells(), 5) << name;
    const std::vector<float> four(4, 0.25f);
    const audiokv::error e = thrown_by([&] { p->observe(four); });
    EXPECT_EQ(e.argument(), "attention.size()") << name;
    EXPECT_TRUE(contains(e.what(), "(5)")) << name << ": " << e.what();
  }
  h2o heavy(h2o_config{baseline_config{8, 0, 1}, -1});
  const auto f = frames(0, 5);
  heavy.append(f.data(), 5);
  const std::vector<float> one_row(5, 0.2f);
  const audiokv::error e = thrown_by([&] { heavy.observe_group(one_row, 3, 5); });
  EXPECT_EQ(e.argument(), "attention.size()");
  EXPECT_TRUE(contains(e.what(), "3 x 5 = 15")) << e.what();
  EXPECT_EQ(heavy.steps(), 0);
  const std::vector<std::uint8_t> mask(4, 0);
  eviction_plan plan;
  EXPECT_EQ(thrown_by([&] { heavy.plan_evicting(mask, plan); }).argument(), "evict_mask.size()");

  knorm norms(baseline_config{8, 0, 1});
  const std::vector<float> keys(5 * 4 - 1, 1.0f);  // one value short of 5 keys of 4 dims
  const audiokv::error k = thrown_by([&] { norms.append_with_keys(f, keys, 4); });
  EXPECT_EQ(k.argument(), "keys.size()");
  EXPECT_TRUE(contains(k.what(), "5 x 4 = 20")) << k.what();
  EXPECT_EQ(norms.num_cells(), 0);
  const std::vector<float> three_norms(3, 1.0f);
  EXPECT_EQ(thrown_by([&] { norms.append_with_norms(f, three_norms); }).argument(),
            "key_norms.size()");

  adakv_config ada;
  ada.snap.base.budget = 8;
  ada.snap.group_size = 2;
  ada.num_heads = 2;
  auto group = adakv_group::create(ada);
  group->append_all(f.data(), 5);
  EXPECT_EQ(thrown_by([&] { group->observe_group(1, one_row, 2, 5); }).argument(),
            "attention.size()");
  EXPECT_EQ(group->head(1).steps(), 0);
}

TEST(Validation, SequenceBatchChecksOffsetAndScoreLengths) {
  sequence_batch<tiered_cache<>> batch;
  batch.add_sequence(valid_config());
  batch.add_sequence(valid_config());
  const auto f = frames(0, 3);
  batch[0].append(f.data(), 3);
  batch[1].append(f.data(), 2);
  const std::vector<float> scores(5, 0.2f);
  const std::vector<std::int64_t> two_offsets = {0, 3};
  EXPECT_EQ(thrown_by([&] { batch.observe(scores, two_offsets); }).argument(), "indptr.size()");
  const std::vector<float> short_scores(4, 0.2f);
  const std::vector<std::int64_t> indptr = {0, 3, 5};
  const audiokv::error e = thrown_by([&] { batch.observe(short_scores, indptr); });
  EXPECT_EQ(e.argument(), "scores.size()");
  EXPECT_TRUE(contains(e.what(), "indptr[size()] = 5")) << e.what();
  EXPECT_EQ(batch[0].stats().steps, 0);
  batch.observe(scores, indptr);
  EXPECT_EQ(batch[1].stats().steps, 1);
}

TEST_F(FailedCalls, IsProtectedRejectsSlotsOutsideTheCells) {
  EXPECT_EQ(thrown_by([&] { (void)cache.is_protected(50); }).argument(), "slot");
  EXPECT_EQ(thrown_by([&] { (void)cache.is_protected(-1); }).argument(), "slot");
}

// ---- a plan belongs to the cache that made it ----

TEST(Validation, PlanOfAnotherCacheWithTheSameHistoryIsRejected) {
  // Two heads with identical histories: same generation, same length; only the identity
  // tells head 0's plan from head 1's.
  tiered_cache<> head0(valid_config()), head1(valid_config());
  const auto f = frames(0, 95);
  const std::vector<float> a(95, 1.0f / 95);
  for (tiered_cache<>* c : {&head0, &head1}) {
    c->append(f.data(), 95);
    c->observe(a.data(), 95);
  }
  ASSERT_NE(head0.id(), head1.id());
  eviction_plan plan;
  head0.plan(plan);
  ASSERT_FALSE(plan.empty());
  EXPECT_EQ(plan.cache_id, head0.id());
  const audiokv::error e = thrown_by([&] { head1.apply(plan); });
  EXPECT_EQ(e.argument(), "plan.cache_id");
  EXPECT_TRUE(contains(e.what(), "plan")) << e.what();
  EXPECT_TRUE(contains(e.what(), "cache " + std::to_string(head0.id()))) << e.what();
  EXPECT_TRUE(contains(e.what(), "id " + std::to_string(head1.id()))) << e.what();
  EXPECT_EQ(head1.num_cells(), 95);
  EXPECT_EQ(head1.stats().evictions, 0);
  head0.apply(plan);
  EXPECT_EQ(head0.num_cells(), plan.n_kv_after);
}

TEST(Validation, ACopyIsAnotherCacheAndAMoveTheSameOne) {
  tiered_cache<> original(valid_config());
  const auto f = frames(0, 95);
  original.append(f.data(), 95);
  eviction_plan plan;
  original.plan(plan);
  tiered_cache<> copy = original;
  EXPECT_NE(copy.id(), original.id());
  EXPECT_EQ(thrown_by([&] { copy.apply(plan); }).argument(), "plan.cache_id");
  tiered_cache<> assigned(valid_config());
  const std::uint64_t assigned_id = assigned.id();
  assigned = original;
  EXPECT_NE(assigned.id(), original.id());
  EXPECT_NE(assigned.id(), assigned_id);
  EXPECT_EQ(thrown_by([&] { assigned.apply(plan); }).argument(), "plan.cache_id");
  const std::uint64_t id = original.id();
  tiered_cache<> moved = std::move(original);
  EXPECT_EQ(moved.id(), id);
  moved.apply(plan);  // made before the move, by the same cache
  EXPECT_EQ(moved.num_cells(), plan.n_kv_after);
}

TEST(Validation, BaselinePlansBelongToTheirCache) {
  policy_options o;
  o.budget = 8;
  for (const char* name : {"h2o", "snapkv", "streaming_llm", "tova", "random"}) {
    auto p0 = make_policy(name, o), p1 = make_policy(name, o);
    const auto f = frames(0, 9);
    const std::vector<float> a(9, 1.0f / 9);
    for (auto* p : {p0.get(), p1.get()}) {
      p->append(f.data(), 9);
      p->observe(a.data(), 9);
    }
    eviction_plan plan;
    p0->plan(plan);
    ASSERT_FALSE(plan.empty()) << name;
    const audiokv::error e = thrown_by([&] { p1->apply(plan); });
    EXPECT_EQ(e.argument(), "plan.cache_id") << name;
    EXPECT_TRUE(contains(e.what(), std::to_string(p0->id()))) << e.what();
    EXPECT_TRUE(contains(e.what(), std::to_string(p1->id()))) << e.what();
    EXPECT_EQ(p1->num_cells(), 9) << name;
  }
  // AdaKV: head 0's part of the joint selection is not head 1's, even at equal lengths.
  auto group = adakv_group::create(adakv_config{snapkv_config{baseline_config{8, 0, 1}}, 2});
  const auto f = frames(0, 9);
  group->append_all(f.data(), 9);
  std::vector<eviction_plan> plans;
  group->plan(plans);
  std::swap(plans[0], plans[1]);
  EXPECT_EQ(thrown_by([&] { group->apply(plans); }).argument(), "plan.cache_id");
  EXPECT_EQ(group->total_cells(), 18);
}

// ---- messages say what was expected ----

TEST_F(FailedCalls, WrongCellCountSaysTheExpectedCount) {
  const std::vector<float> a(49, 0.02f);
  const audiokv::error e = thrown_by([&] { cache.observe(a.data(), 49); });
  EXPECT_EQ(e.argument(), "num_cells");
  EXPECT_TRUE(contains(e.what(), "num_cells = 49")) << e.what();
  EXPECT_TRUE(contains(e.what(), "cached cells (50)")) << e.what();
}

TEST_F(FailedCalls, StalePlanShowsBothGenerations) {
  eviction_plan plan, probe;
  cache.plan_to(40, plan);
  auto f = frames(50, 1);
  cache.append(f.data(), 1);
  before = take(cache);
  cache.plan_to(1000, probe);  // an empty plan records the current generation
  ASSERT_EQ(probe.generation, plan.generation + 1);
  const audiokv::error e = thrown_by([&] { cache.apply(plan); });
  EXPECT_EQ(e.argument(), "plan.generation");
  EXPECT_TRUE(
      contains(e.what(), "generation " + std::to_string(plan.generation) + " with 50 cells"))
      << e.what();
  EXPECT_TRUE(
      contains(e.what(), "generation " + std::to_string(probe.generation) + " with 51 cells"))
      << e.what();
  EXPECT_TRUE(take(cache) == before);
}

TEST_F(FailedCalls, NanInAGroupNamesQueryRowAndCell) {
  std::vector<float> g(3 * 50, 0.01f);
  g[2 * 50 + 17] = std::numeric_limits<float>::quiet_NaN();  // query row 2, cell 17
  expect_rejected([&] { cache.observe_group(g, 3, 50); }, "attention[2][17]");
  expect_rejected([&] { cache.observe_group(g.data(), 3, 50); }, "attention[2][17]");
  g[2 * 50 + 17] = 0.01f;
  g[49] = -1.0f;  // row 0, last cell
  expect_rejected([&] { cache.observe_group(g, 3, 50); }, "attention[0][49]");
  // A single row keeps its one index.
  std::vector<float> a(50, 0.02f);
  a[17] = std::numeric_limits<float>::quiet_NaN();
  expect_rejected([&] { cache.observe(a); }, "attention[17]");
}

TEST(Validation, BaselineGroupNanNamesQueryRowAndCell) {
  snapkv_config c;
  c.base.budget = 8;
  c.group_size = 2;
  snapkv snap(c);
  const auto f = frames(0, 5);
  snap.append(f.data(), 5);
  std::vector<float> g(2 * 5, 0.2f);
  g[5 + 3] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(thrown_by([&] { snap.observe_group(g, 2, 5); }).argument(), "attention[1][3]");
  const audiokv::error e = thrown_by([&] { snap.observe(g.data(), 5); });
  EXPECT_EQ(e.argument(), "group_size");
  EXPECT_TRUE(contains(e.what(), "config.group_size = 2")) << e.what();
}

TEST(Validation, ProtectedSetErrorNamesTheCauseWithCounts) {
  // The window may not shrink here (shrink_recent_window false): a window that does not fit is
  // an error naming its cause.
  auto error_for = [](audiokv_config c) {
    c.shrink_recent_window = false;
    return thrown_by([&] { c.validate(); });
  };
  audiokv_config c;  // 10 ms frames, recent window 200 ms, emergency 10%, trigger 90%
  c.budget = 20;     // window 20 frames >= trigger level 18 on its own
  audiokv::error e = error_for(c);
  EXPECT_EQ(e.argument(), "config.min_retention_ms");
  for (const char* part : {"= 20 frames", "= 2 cells", "= 22 protected cells", "= 18 cells"}) {
    EXPECT_TRUE(contains(e.what(), part)) << part << " in " << e.what();
  }

  c = audiokv_config{};
  c.budget = 1000;
  c.min_retention_ms = 10.0f;
  c.split = {0.0f, 0.03125f, 0.96875f};  // emergency pool 968 >= trigger level 900 on its own
  e = error_for(c);
  EXPECT_EQ(e.argument(), "split.emergency");
  for (const char* part : {"= 1 frames", "= 968 cells", "= 969 protected cells", "= 900 cells"}) {
    EXPECT_TRUE(contains(e.what(), part)) << part << " in " << e.what();
  }

  c = audiokv_config{};
  c.budget = 100;
  c.min_retention_ms = 850.0f;  // 85 frames + 10 emergency = 95 >= 90, neither alone
  e = error_for(c);
  EXPECT_EQ(e.argument(), "config.budget");
  for (const char* part : {"= 85 frames", "= 10 cells", "= 95 protected cells", "= 90 cells"}) {
    EXPECT_TRUE(contains(e.what(), part)) << part << " in " << e.what();
  }
  c.min_retention_ms = 840.0f;  // 84 + 10 = 94: still too many
  c.shrink_recent_window = false;
  EXPECT_THROW(c.validate(), audiokv::error);
  c.min_retention_ms = 790.0f;  // 79 + 10 = 89 < 90
  EXPECT_NO_THROW(c.validate());
  // By default the window shrinks to fit instead: 90 - 1 - 10 = 79 frames of the 84 asked.
  c.min_retention_ms = 840.0f;
  c.shrink_recent_window = true;
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.retention_frames(), 84);
  EXPECT_EQ(c.recent_window_frames(), 79);
  // An emergency pool that alone reaches the trigger is rejected either way.
  c = audiokv_config{};
  c.budget = 1000;
  c.split = {0.0f, 0.03125f, 0.96875f};
  EXPECT_EQ(thrown_by([&] { c.validate(); }).argument(), "split.emergency");
}

// A target below the cells no plan may evict used to throw ("target_cells = 5 is below the
// 20 cells no plan may evict"), which stopped a streaming host mid-clip. The plan now goes down
// to those cells and says so in n_kv_after; nothing protected goes.
TEST_F(FailedCalls, TargetBelowTheProtectedSetStopsAtTheProtectedCells) {
  eviction_plan plan;
  // valid_config(): a 200 ms window of 10 ms frames protects the newest 20 of the 50 cells.
  ASSERT_EQ(cache.protected_cells(), 20);
  for (const std::int32_t target : {0, 1, 5, 19, 20}) {
    cache.plan_to(target, plan);
    EXPECT_EQ(plan.n_kv_after, 20) << target;
    for (const std::int32_t slot : plan.evict) EXPECT_FALSE(cache.is_protected(slot)) << slot;
  }
  cache.plan_to(21, plan);
  EXPECT_EQ(plan.n_kv_after, 21);
  EXPECT_TRUE(take(cache) == before) << "planning changed the cache";
  cache.plan_to(3, plan);
  cache.apply(plan);
  EXPECT_EQ(cache.num_cells(), 20);
  EXPECT_EQ(cache.protected_cells(), 20);
}

}  // namespace

namespace {

using namespace audiokv;

/// Runs `call`, which must throw audiokv::error naming `argument`; returns its message.
std::string message_of(const std::function<void()>& call, const std::string& argument) {
  try {
    call();
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error naming " << argument;
  return {};
}

// A cache whose cells disagree with a shared table used to be told "table = 0": the 0 was a
// position, printed as if it were the table. The message now names the position and both
// frames; append() of a frame that disagrees says the same under "frames[i]".
TEST(ErrorMessages, ASharedTableThatDisagreesNamesThePositionAndBothFrames) {
  audiokv_config c;
  c.budget = 100;
  auto table = std::make_shared<frame_table>(64);
  tiered_cache<> a(c), b(c);
  a.share_frames(table);
  a.append(test::frames(0, 4));
  auto other = test::frames(0, 4);
  other[2].voice = 0.5f;
  b.append(other);
  const std::string what = message_of([&] { b.share_frames(table); }, "table");
  EXPECT_NE(what.find("share_frames: table: the frame at position 2 (speaker 0, voice 0.5, "
                      "flags 0, prior 0) differs from (speaker 0, voice 1, flags 0, prior 0)"),
            std::string::npos)
      << what;
  EXPECT_EQ(what.find("table = "), std::string::npos) << what;
  EXPECT_EQ(b.frames(), nullptr);

  tiered_cache<> d(c);
  d.share_frames(table);
  const std::string appended = message_of([&] { d.append(other); }, "frames[2]");
  EXPECT_NE(appended.find("append: frames[2]: the frame at position 2 (speaker 0, voice 0.5"),
            std::string::npos)
      << appended;
  EXPECT_EQ(d.num_cells(), 0);
}

// make_policy("audiokv") accepted a budget of 2^31 - 1 and then failed to allocate, while h2o
// and snapkv said "must be < INT32_MAX". Every policy now checks budgets and capacities
// against one bound, max_cache_cells = 2^30, with one message.
TEST(ErrorMessages, EveryPolicyRejectsABudgetAboveTheOneBoundWithOneMessage) {
  static_assert(max_cache_cells == (1 << 30));
  const std::string names = policy_names();
  std::vector<std::string> all;
  for (std::size_t from = 0; from < names.size();) {
    const std::size_t comma = std::min(names.find(", ", from), names.size());
    all.push_back(names.substr(from, comma - from));
    from = comma + 2;
  }
  ASSERT_EQ(all.size(), 13u);
  const std::string bound = ": must be <= 1073741824 (max_cache_cells, 2^30)";
  for (const std::string& name : all) {
    for (const std::int32_t budget : {max_cache_cells + 1, INT32_MAX - 1, INT32_MAX}) {
      policy_options o;
      o.budget = budget;
      const std::string what = message_of([&] { make_policy(name, o); }, "config.budget");
      EXPECT_NE(what.find("config.budget = " + std::to_string(budget) + bound), std::string::npos)
          << name << ": " << what;
    }
    policy_options o;
    o.budget = 64;
    o.capacity = max_cache_cells + 1;
    const std::string what = message_of([&] { make_policy(name, o); }, "config.capacity");
    EXPECT_NE(what.find("config.capacity = 1073741825" + bound), std::string::npos)
        << name << ": " << what;
  }
  audiokv_config c;
  c.budget = 100;
  tiered_cache<> cache(c);
  const std::string what = message_of([&] { cache.reserve(max_cache_cells + 1); }, "new_capacity");
  EXPECT_NE(what.find("new_capacity = 1073741825" + bound), std::string::npos) << what;
  EXPECT_EQ(cache.capacity(), 100);
}

}  // namespace
