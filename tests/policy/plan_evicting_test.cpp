// SPDX-License-Identifier: Apache-2.0
// eviction_policy::plan_evicting: every registered policy follows an eviction chosen outside it
// (an engine's own selection, a kvpress wrapper's keep set): exactly the marked cells go, the
// others keep their order, protected cells included, and the policy plans normally afterwards.
#include <gtest/gtest.h>

#include <audiokv/registry.hpp>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> names() {
  std::vector<std::string> out;
  std::stringstream list(audiokv::policy_names());
  std::string name;
  while (std::getline(list, name, ',')) out.push_back(name.substr(name.find_first_not_of(' ')));
  return out;
}

std::unique_ptr<audiokv::eviction_policy> make(const std::string& name) {
  audiokv::policy_options o;
  o.budget = 20;
  o.capacity = 40;
  o.window = 4;
  o.audiokv.budget = 20;
  o.audiokv.capacity = 40;
  o.audiokv.frame_ms = 10.0f;
  o.audiokv.min_retention_ms = 20.0f;
  return audiokv::make_policy(name, o);
}

void feed(audiokv::eviction_policy& p, std::int32_t cells, std::int32_t first_pos) {
  std::vector<audiokv::frame_meta> frames(static_cast<std::size_t>(cells));
  for (std::int32_t j = 0; j < cells; ++j) {
    frames[j].pos = first_pos + j;
    frames[j].flags = j == 0 ? audiokv::frame_flag_sink : 0;  // a protected cell to evict
  }
  if (auto* k = dynamic_cast<audiokv::knorm*>(&p)) {
    std::vector<float> norms(static_cast<std::size_t>(cells));
    for (std::int32_t j = 0; j < cells; ++j) norms[j] = 1.0f + 0.1f * static_cast<float>(j % 5);
    k->append_with_norms(frames.data(), norms.data(), cells);
  } else {
    p.append(frames.data(), cells);
  }
  std::vector<float> probs(static_cast<std::size_t>(p.num_cells()));
  for (std::size_t j = 0; j < probs.size(); ++j) probs[j] = 1.0f / static_cast<float>(probs.size());
  p.observe(probs.data(), p.num_cells());
}

TEST(PlanEvicting, EveryPolicyFollowsAnOutsideSelection) {
  for (const std::string& name : names()) {
    SCOPED_TRACE(name);
    auto p = make(name);
    feed(*p, 12, 0);
    // Evict the sink (slot 0), two in the middle and the newest cell.
    std::vector<std::uint8_t> mask(12, 0);
    for (int j : {0, 4, 5, 11}) mask[static_cast<std::size_t>(j)] = 1;
    audiokv::eviction_plan plan;
    p->plan_evicting(mask, plan);
    EXPECT_EQ(plan.evict, (std::vector<std::int32_t>{0, 4, 5, 11}));
    EXPECT_EQ(plan.n_kv_after, 8);
    EXPECT_TRUE(plan.promote.empty());
    EXPECT_TRUE(plan.demote.empty());
    p->apply(plan);
    const std::vector<std::int32_t> want = {1, 2, 3, 6, 7, 8, 9, 10};
    ASSERT_EQ(p->num_cells(), 8);
    EXPECT_EQ(std::vector<std::int32_t>(p->positions(), p->positions() + 8), want);
    // The policy goes on as usual: append, observe, plan to a target, apply.
    feed(*p, 4, 20);
    audiokv::eviction_plan next;
    p->plan_to(6, next);
    EXPECT_EQ(next.n_kv_after, 6);
    p->apply(next);
    EXPECT_EQ(p->num_cells(), 6);
  }
}

TEST(PlanEvicting, EmptyMaskIsAnEmptyPlanAndBadLengthsAreNamed) {
  for (const std::string& name : names()) {
    SCOPED_TRACE(name);
    auto p = make(name);
    feed(*p, 5, 0);
    audiokv::eviction_plan plan;
    p->plan_evicting(std::vector<std::uint8_t>(5, 0), plan);
    EXPECT_TRUE(plan.evict.empty());
    p->apply(plan);
    EXPECT_EQ(p->num_cells(), 5);
    try {
      p->plan_evicting(std::vector<std::uint8_t>(4, 0), plan);
      ADD_FAILURE() << "a mask of the wrong length must be refused";
    } catch (const audiokv::error& e) {
      EXPECT_EQ(e.argument(), "evict_mask.size()");
    }
    EXPECT_EQ(p->num_cells(), 5);
  }
}

TEST(PlanEvicting, TieredCacheKeepsThePoolsOfKeptCells) {
  auto p = make("audiokv");
  feed(*p, 12, 0);
  const audiokv::pool_tier* before = p->tiers();
  ASSERT_NE(before, nullptr);
  std::vector<audiokv::pool_tier> kept_tiers;
  std::vector<std::uint8_t> mask(12, 0);
  for (int j = 0; j < 12; ++j) {
    mask[static_cast<std::size_t>(j)] = j % 3 == 1;
    if (j % 3 != 1) kept_tiers.push_back(before[j]);
  }
  audiokv::eviction_plan plan;
  p->plan_evicting(mask, plan);
  p->apply(plan);
  ASSERT_EQ(p->num_cells(), static_cast<std::int32_t>(kept_tiers.size()));
  EXPECT_EQ(std::vector<audiokv::pool_tier>(p->tiers(), p->tiers() + p->num_cells()), kept_tiers);
}

}  // namespace
