// SPDX-License-Identifier: Apache-2.0
// Every policy of the registry: bad input names the argument and leaves the state unchanged,
// streams never exceed the budget after apply, compaction keeps positions consistent, and
// hand-worked cases of the project-defined rules (LRU, uniform stride, random).
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/policy/detail/mark_lowest.hpp>
#include <audiokv/registry.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;

const std::vector<std::string>& all_names() {
  static const std::vector<std::string> names = {
      "audiokv", "fifo",           "lru",   "streaming_llm", "h2o",
      "snapkv",  "pyramidkv",      "tova",  "knorm",         "observed_attention",
      "adakv",   "uniform_stride", "random"};
  return names;
}

policy_options small_options() {
  policy_options o;
  o.budget = 48;
  o.capacity = 56;
  o.window = 4;
  o.kernel = 3;
  o.n_sink = 2;
  o.layer = 3;  // the smallest pyramid budget: mean 48, beta 4 -> 12
  o.num_layers = 4;
  o.beta = 4;
  o.seed = 11;
  return o;
}

/// Appends one frame; gives knorm its key norm.
void append_one(eviction_policy& p, std::int32_t pos, std::mt19937& rng) {
  const auto f = test::frames(pos, 1);
  p.append(f.data(), 1);
  if (auto* k = dynamic_cast<knorm*>(&p)) {
    const float norm = std::uniform_real_distribution<float>(0.5f, 4.0f)(rng);
    k->set_key_norms(p.num_cells() - 1, &norm, 1);
  }
}

std::vector<float> random_row(std::int32_t n, std::mt19937& rng) {
  std::vector<float> a(n);
  std::gamma_distribution<float> g(0.3f, 1.0f);
  float sum = 0.0f;
  for (float& x : a) sum += (x = g(rng) + 1e-6f);
  for (float& x : a) x /= sum;
  return a;
}

struct snapshot {
  std::vector<std::int32_t> pos;
  std::vector<std::int32_t> evict;
};

snapshot take(const eviction_policy& p) {
  snapshot s;
  s.pos.assign(p.positions(), p.positions() + p.num_cells());
  eviction_plan plan;
  p.plan_to(p.num_cells() - 1, plan);  // above every policy's protected set
  s.evict = plan.evict;
  return s;
}

void expect_error_unchanged(eviction_policy& p, const std::function<void()>& call,
                            const std::string& argument) {
  const snapshot before = take(p);
  try {
    call();
    ADD_FAILURE() << p.name() << " accepted invalid " << argument;
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), argument) << p.name() << ": " << e.what();
  }
  const snapshot after = take(p);
  EXPECT_EQ(before.pos, after.pos) << p.name() << " changed on a failed call (" << argument << ")";
  EXPECT_EQ(before.evict, after.evict) << p.name() << " plan changed after a failed call";
}

class EveryPolicy : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryPolicy, StreamStaysWithinBudgetAndCompactsConsistently) {
  auto p = make_policy(GetParam(), small_options());
  EXPECT_EQ(p->name(), GetParam());
  std::mt19937 rng(42);
  eviction_plan plan;
  plan.reserve(p->capacity());
  std::int32_t evictions = 0;
  for (std::int32_t t = 0; t < 400; ++t) {
    append_one(*p, 3 * t + 1, rng);
    const auto a = random_row(p->num_cells(), rng);
    p->observe(a.data(), p->num_cells());
    p->plan(plan);
    EXPECT_EQ(plan.n_kv_before, p->num_cells());
    if (!p->wants_eviction()) {
      EXPECT_TRUE(plan.evict.empty());
      continue;
    }
    // The kept cells' positions, in order, must be what the cache holds after apply.
    std::vector<std::int32_t> expected;
    for (std::int32_t i = 0; i < plan.n_kv_before; ++i) {
      if (plan.move_to[i] != core::evicted_slot) {
        EXPECT_EQ(plan.move_to[i], static_cast<std::int32_t>(expected.size()));
        expected.push_back(p->positions()[i]);
      }
    }
    p->apply(plan);
    ++evictions;
    ASSERT_EQ(std::vector<std::int32_t>(p->positions(), p->positions() + p->num_cells()), expected);
    ASSERT_LE(p->num_cells(), p->budget()) << p->name() << " above budget after apply";
    ASSERT_TRUE(std::is_sorted(expected.begin(), expected.end()));
  }
  EXPECT_GT(evictions, 0);
  // plan_to goes exactly to the target.
  p->plan_to(10, plan);
  EXPECT_EQ(plan.n_kv_after, 10);
  p->apply(plan);
  EXPECT_EQ(p->num_cells(), 10);
}

TEST_P(EveryPolicy, BadInputNamesTheArgumentAndLeavesStateUnchanged) {
  auto p = make_policy(GetParam(), small_options());
  std::mt19937 rng(5);
  for (std::int32_t t = 0; t < 30; ++t) {
    append_one(*p, t, rng);
    const auto a = random_row(p->num_cells(), rng);
    p->observe(a.data(), p->num_cells());
  }
  const std::int32_t n = p->num_cells();
  auto a = random_row(n, rng);
  a[3] = std::numeric_limits<float>::quiet_NaN();
  expect_error_unchanged(
      *p, [&] { p->observe(a.data(), n); }, "attention[3]");
  a[3] = -0.5f;
  expect_error_unchanged(
      *p, [&] { p->observe(a.data(), n); }, "attention[3]");
  a[3] = 0.0f;
  expect_error_unchanged(
      *p, [&] { p->observe(a.data(), n + 1); }, "num_cells");
  const auto old = test::frames(5, 1);
  expect_error_unchanged(
      *p, [&] { p->append(old.data(), 1); }, "frames[0].pos");
  const std::vector<frame_meta> bad_speaker = {frame_meta{100, 7, 1.0f, 0, 0.0f}};
  expect_error_unchanged(
      *p, [&] { p->append(bad_speaker.data(), 1); }, "frames[0].speaker");
  expect_error_unchanged(
      *p,
      [&] {
        eviction_plan plan;
        p->plan_to(-1, plan);
      },
      "target_cells");
  // A stale plan: made, then the cache changed.
  eviction_plan stale;
  p->plan_to(n - 1, stale);
  append_one(*p, 1000, rng);
  expect_error_unchanged(
      *p, [&] { p->apply(stale); }, "plan.generation");
  // Capacity: appending past it throws before anything changes.
  const auto many = test::frames(2000, p->capacity());
  expect_error_unchanged(
      *p, [&] { p->append(many.data(), p->capacity()); }, "count");
}

std::string policy_test_name(const ::testing::TestParamInfo<std::string>& param_info) {
  return param_info.param;
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryPolicy, ::testing::ValuesIn(all_names()), policy_test_name);

TEST(Registry, UnknownNameListsValidNames) {
  try {
    make_policy("belady", small_options());
    FAIL();
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "name");
    for (const auto& n : all_names()) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n;
    }
  }
  policy_options o = small_options();
  o.budget = 0;
  EXPECT_THROW(make_policy("h2o", o), audiokv::error);
}

TEST(Baselines, ConfigErrorsNameTheField) {
  auto expect_field = [](const std::function<void()>& make, const std::string& field) {
    try {
      make();
      ADD_FAILURE() << "accepted " << field;
    } catch (const audiokv::error& e) {
      EXPECT_EQ(e.argument(), field) << e.what();
    }
  };
  expect_field([] { h2o(h2o_config{baseline_config{10, 0, 1}, 11}); }, "config.recent_size");
  expect_field(
      [] {
        streaming_llm(streaming_llm_config{baseline_config{4, 0, 1}, 5});
      },
      "config.n_sink");
  expect_field([] { fifo(baseline_config{0, 0, 1}); }, "config.budget");
  expect_field([] { fifo(baseline_config{10, 5, 1}); }, "config.capacity");
  expect_field([] { snapkv(snapkv_config{baseline_config{10, 0, 1}, 4, 4}); }, "config.kernel");
  expect_field([] { snapkv(snapkv_config{baseline_config{10, 0, 1}, 0}); }, "config.window");
  expect_field([] { lru(lru_config{baseline_config{10, 0, 1}, -1.0f}); }, "config.tau");
  expect_field(
      [] {
        pyramidkv(pyramidkv_config{snapkv_config{baseline_config{10, 0, 1}, 4}, 3, 2});
      },
      "config.layer");
  expect_field(
      [] {
        adakv_group(adakv_config{snapkv_config{baseline_config{10, 0, 1}}, 0});
      },
      "config.num_heads");
}

TEST(Baselines, StreamingLLMKeepsSinksThenTheFirstSinksBelowThem) {
  streaming_llm p(streaming_llm_config{baseline_config{6, 10, 1}, 2});
  const auto f = test::frames(0, 9);
  p.append(f.data(), 9);
  eviction_plan plan;
  p.plan(plan);
  p.apply(plan);
  EXPECT_EQ(std::vector<std::int32_t>(p.positions(), p.positions() + 6),
            (std::vector<std::int32_t>{0, 1, 5, 6, 7, 8}));
  // A target below the 2 sinks keeps the first target cells (kvpress keeps n_kept of its tied
  // sinks when n_kept < n_sink).
  p.plan_to(1, plan);
  p.apply(plan);
  EXPECT_EQ(std::vector<std::int32_t>(p.positions(), p.positions() + p.num_cells()),
            (std::vector<std::int32_t>{0}));
  streaming_llm s(streaming_llm_config{baseline_config{4, 10, 1}, 4});
  s.append(f.data(), 7);
  s.plan_to(2, plan);
  s.apply(plan);
  EXPECT_EQ(std::vector<std::int32_t>(s.positions(), s.positions() + s.num_cells()),
            (std::vector<std::int32_t>{0, 1}));
  s.plan_to(0, plan);
  s.apply(plan);
  EXPECT_EQ(s.num_cells(), 0);
  fifo q(baseline_config{3, 5, 1});
  q.append(f.data(), 5);
  q.plan(plan);
  q.apply(plan);
  EXPECT_EQ(std::vector<std::int32_t>(q.positions(), q.positions() + 3),
            (std::vector<std::int32_t>{2, 3, 4}));
}

TEST(Baselines, LruEvictsTheLeastRecentlyHitCell) {
  lru p(lru_config{baseline_config{3, 4, 1}, 0.3f, /*tau_per_cell=*/false});
  const auto f = test::frames(0, 4);
  p.append(f.data(), 3);
  const float step1[] = {0.5f, 0.1f, 0.4f};  // hits 0 and 2 at step 1
  p.observe(step1, 3);
  p.append(f.data() + 3, 1);                       // cell 3 used at step 1 (append)
  const float step2[] = {0.6f, 0.1f, 0.1f, 0.2f};  // hits 0 at step 2
  p.observe(step2, 4);
  // last use: 0 -> 2, 1 -> 0, 2 -> 1, 3 -> 1: cell 1 goes.
  eviction_plan plan;
  p.plan(plan);
  EXPECT_EQ(plan.evict, (std::vector<std::int32_t>{1}));
  p.plan_to(2, plan);  // then the older of the tied cells 2 and 3
  EXPECT_EQ(plan.evict, (std::vector<std::int32_t>{1, 2}));
}

TEST(Baselines, UniformStrideAndRandomAreDeterministic) {
  uniform_stride u(baseline_config{4, 10, 1});
  const auto f = test::frames(0, 10);
  u.append(f.data(), 10);
  eviction_plan plan;
  u.plan(plan);
  u.apply(plan);
  EXPECT_EQ(std::vector<std::int32_t>(u.positions(), u.positions() + 4),
            (std::vector<std::int32_t>{0, 3, 6, 9}));
  random_eviction a(random_config{baseline_config{20, 40, 1}, 9});
  random_eviction b(random_config{baseline_config{20, 40, 1}, 9});
  random_eviction c(random_config{baseline_config{20, 40, 1}, 10});
  const auto g = test::frames(0, 40);
  a.append(g.data(), 40);
  b.append(g.data(), 40);
  c.append(g.data(), 40);
  eviction_plan pa, pb, pc;
  a.plan(pa);
  b.plan(pb);
  c.plan(pc);
  EXPECT_EQ(pa.evict, pb.evict);
  EXPECT_NE(pa.evict, pc.evict);
  EXPECT_EQ(pa.evict.size(), 20u);
}

TEST(Baselines, KnormNeedsKeyNorms) {
  knorm p(baseline_config{2, 4, 1});
  const auto f = test::frames(0, 4);
  p.append(f.data(), 3);
  eviction_plan plan;
  try {
    p.plan(plan);
    FAIL();
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "key_norms[0]");
  }
  const float norms[] = {3.0f, 1.0f, 2.0f};
  p.set_key_norms(0, norms, 3);
  p.plan(plan);
  EXPECT_EQ(plan.evict, (std::vector<std::int32_t>{0}));  // the largest norm goes
  const float bad[] = {-1.0f};
  EXPECT_THROW(p.append_with_norms(f.data() + 3, bad, 1), audiokv::error);
  EXPECT_EQ(p.num_cells(), 3);
  const float keys[] = {0.0f, 0.5f};
  p.append_with_keys(f.data() + 3, keys, 2, 1);
  EXPECT_FLOAT_EQ(p.scores()[3], -0.5f);
}

TEST(Baselines, SnapkvObserveGroupNeedsTheConfiguredGroupSize) {
  snapkv p(snapkv_config{baseline_config{8, 10, 1}, 2, 1, scores::kernel_reduce::max, 2});
  const auto f = test::frames(0, 4);
  p.append(f.data(), 4);
  const std::vector<float> row(4, 0.25f);
  try {
    p.observe(row.data(), 4);
    FAIL();
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "group_size");
  }
  const std::vector<float> rows(8, 0.25f);
  p.observe_group(rows.data(), 2, 4);
  EXPECT_EQ(p.steps(), 1);
}

TEST(Baselines, PyramidBudgetFollowsTheLayer) {
  snapkv_config snap{baseline_config{100, 0, 1}, 4, 5};
  std::int64_t total = 0;
  for (int l = 0; l < 4; ++l) {
    pyramidkv p(pyramidkv_config{snap, l, 4, 20});
    EXPECT_EQ(p.mean_budget(), 100);
    total += p.budget();
    if (l > 0) {
      EXPECT_LT(p.budget(), pyramidkv(pyramidkv_config{snap, l - 1, 4, 20}).budget());
    }
  }
  EXPECT_NEAR(total / 4.0, 100.0, 1.0);
}

TEST(Baselines, AdakvHandlesShareOneRound) {
  policy_options o = small_options();
  o.budget = 10;
  o.capacity = 40;
  o.adakv_shared = adakv_group::create(adakv_config{o.snap(), 2, 0.2});
  o.adakv_head = 0;
  auto h0 = make_policy("adakv", o);
  o.adakv_head = 1;
  auto h1 = make_policy("adakv", o);
  std::mt19937 rng(1);
  const auto f = test::frames(0, 30);
  h0->append(f.data(), 30);
  h1->append(f.data(), 30);
  // Head 0 attends sharply, head 1 flatly: head 0 should get the larger share.
  std::vector<float> sharp(30, 0.001f), flat(30, 1.0f / 30);
  for (int j = 0; j < 30; j += 3) sharp[j] = 0.09f;
  for (int i = 0; i < 4; ++i) {
    h0->observe(sharp.data(), 30);
    h1->observe(flat.data(), 30);
  }
  ASSERT_TRUE(h0->wants_eviction());
  eviction_plan p0, p1;
  h0->plan(p0);
  h0->apply(p0);
  h1->plan(p1);  // part of the same round although head 0 already applied
  h1->apply(p1);
  EXPECT_EQ(h0->num_cells() + h1->num_cells(), 20);
  EXPECT_GE(std::min(h0->num_cells(), h1->num_cells()), 2);  // n_safe = max(1, int(10 * 0.2))
  EXPECT_FALSE(h0->wants_eviction());
}

TEST(MarkLowest, LowestValueFirstThenLowestKeyAndTheCountClamped) {
  // (value, key): (0.5, 4) (0.1, 7) (0.5, 2) (0.1, 3) (0.9, 0). In the order (value, key):
  // index 3, 1, 2, 0, 4.
  const std::vector<double> value{0.5, 0.1, 0.5, 0.1, 0.9};
  const std::vector<std::int32_t> key{4, 7, 2, 3, 0};
  auto marked = [&](std::int32_t count, std::int32_t& returned) {
    std::vector<std::int32_t> order{0, 1, 2, 3, 4};
    std::vector<std::uint8_t> mask(5, 0);
    returned = audiokv::policy::detail::mark_lowest(value.data(), key.data(), order.data(), 5,
                                                    count, mask.data());
    return mask;
  };
  std::int32_t n = -1;
  EXPECT_EQ(marked(1, n), (std::vector<std::uint8_t>{0, 0, 0, 1, 0}));
  EXPECT_EQ(n, 1);
  EXPECT_EQ(marked(3, n), (std::vector<std::uint8_t>{0, 1, 1, 1, 0}));
  EXPECT_EQ(n, 3);
  EXPECT_EQ(marked(4, n), (std::vector<std::uint8_t>{1, 1, 1, 1, 0}));
  EXPECT_EQ(marked(9, n), (std::vector<std::uint8_t>{1, 1, 1, 1, 1}));
  EXPECT_EQ(n, 5);
  EXPECT_EQ(marked(0, n), (std::vector<std::uint8_t>(5, 0)));
  EXPECT_EQ(n, 0);
  EXPECT_EQ(marked(-2, n), (std::vector<std::uint8_t>(5, 0)));
  EXPECT_EQ(n, 0);
}

}  // namespace
