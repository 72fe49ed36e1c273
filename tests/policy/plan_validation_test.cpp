// SPDX-License-Identifier: Apache-2.0
// cell_store::validate_plan's acceptance of a plan's move map, evict list, kept count and moved
// cells, against the definition of a well-formed plan checked entry by entry: plans built from
// random masks, then corrupted one way or another (or not at all).
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/error.hpp>
#include <audiokv/policy/detail/cell_store.hpp>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using audiokv::pool_tier;

// Well formed: move_to has n entries, each -1 or the number of non-(-1) entries before it;
// n_kv_after counts the others; evict lists the -1 slots ascending; promote names kept buffer
// cells and demote kept base cells.
bool well_formed(const audiokv::eviction_plan& plan, const std::vector<pool_tier>& tier) {
  const auto n = static_cast<std::int32_t>(tier.size());
  if (static_cast<std::int32_t>(plan.move_to.size()) != n) return false;
  std::vector<std::int32_t> minus_one;
  std::int32_t kept = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    if (plan.move_to[i] == -1) {
      minus_one.push_back(i);
    } else if (plan.move_to[i] == kept) {
      ++kept;
    } else {
      return false;
    }
  }
  if (kept != plan.n_kv_after || minus_one != plan.evict) return false;
  const auto names = [&](std::int32_t slot, pool_tier from) {
    return slot >= 0 && slot < n && plan.move_to[slot] != -1 && tier[slot] == from;
  };
  for (const std::int32_t slot : plan.promote) {
    if (!names(slot, pool_tier::buffer)) return false;
  }
  for (const std::int32_t slot : plan.demote) {
    if (!names(slot, pool_tier::base)) return false;
  }
  return true;
}

void corrupt(audiokv::eviction_plan& plan, std::int32_t n, int how, std::mt19937& rng) {
  const auto any = [&](std::int32_t lo, std::int32_t hi) {  // in [lo, hi)
    return lo + static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(hi - lo));
  };
  auto& evict = plan.evict;
  switch (how) {
    case 1:  // one entry off by one
      if (n > 0) plan.move_to[any(0, n)] += rng() % 2 == 0 ? 1 : -1;
      break;
    case 2:  // one entry to any value in [-2, n + 1)
      if (n > 0) plan.move_to[any(0, n)] = any(-2, n + 1);
      break;
    case 3:  // a listed slot dropped
      if (!evict.empty())
        evict.erase(evict.begin() + any(0, static_cast<std::int32_t>(evict.size())));
      break;
    case 4:  // a listed slot twice
      if (!evict.empty()) {
        const auto at = any(0, static_cast<std::int32_t>(evict.size()));
        evict.insert(evict.begin() + at, evict[at]);
      }
      break;
    case 5:  // two listed slots swapped
      if (evict.size() >= 2) {
        const auto at = any(0, static_cast<std::int32_t>(evict.size()) - 1);
        std::swap(evict[at], evict[at + 1]);
      }
      break;
    case 6:  // a slot listed that is kept, or outside [0, n)
      evict.push_back(any(-1, n + 2));
      std::sort(evict.begin(), evict.end());
      break;
    case 7:  // the kept count off by one
      plan.n_kv_after += rng() % 2 == 0 ? 1 : -1;
      break;
    case 8:  // a promoted or demoted slot anywhere in [-2, n + 2)
      (rng() % 2 == 0 ? plan.promote : plan.demote).push_back(any(-2, n + 2));
      break;
    case 9:  // a listed slot moved by one
      if (!evict.empty()) evict[any(0, static_cast<std::int32_t>(evict.size()))] += 1;
      break;
    case 10:  // every entry from some slot on shifted by one
      if (n > 0) {
        for (std::int32_t i = any(0, n); i < n; ++i) plan.move_to[i] += plan.move_to[i] >= 0;
      }
      break;
    default:
      break;
  }
}

TEST(PlanValidation, AcceptsExactlyTheWellFormedPlans) {
  std::mt19937 rng(17);
  std::int32_t accepted = 0, rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::int32_t n = trial % 7 == 0 ? static_cast<std::int32_t>(rng() % 3)
                                          : static_cast<std::int32_t>(rng() % 700);
    std::vector<pool_tier> tier(n);
    for (auto& t : tier) t = static_cast<pool_tier>(rng() % 3);
    audiokv::policy::detail::cell_store store(std::max(n, 1), 1);
    std::vector<audiokv::frame_meta> frames(n);
    for (std::int32_t j = 0; j < n; ++j) frames[j].pos = j;
    std::int32_t next = 0;
    store.append(frames.data(), n, [&](const audiokv::frame_meta&) { return tier[next++]; });
    // Sparse, dense or no eviction.
    const std::uint32_t density = trial % 3 == 0 ? 50u : trial % 3 == 1 ? 2u : 1000000u;
    audiokv::eviction_plan plan;
    std::uint8_t* mask = store.clear_evict_mask(plan);
    for (std::int32_t j = 0; j < n; ++j) mask[j] = rng() % density == 0 ? 1 : 0;
    store.build_plan(plan);
    for (std::int32_t j = 0; j < n; ++j) {
      if (mask[j] != 0 || rng() % 3 != 0) continue;
      if (tier[j] == pool_tier::buffer) plan.promote.push_back(j);
      if (tier[j] == pool_tier::base) plan.demote.push_back(j);
    }
    corrupt(plan, n, trial % 11, rng);
    const bool expected = well_formed(plan, tier);
    bool passed = true;
    try {
      store.validate_plan("test", plan);
    } catch (const audiokv::error&) {
      passed = false;
    }
    ASSERT_EQ(passed, expected) << "trial " << trial << " n " << n << " corruption " << trial % 11;
    (expected ? accepted : rejected) += 1;
  }
  EXPECT_GT(accepted, 500);
  EXPECT_GT(rejected, 1500);
}

}  // namespace
