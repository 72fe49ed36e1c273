// SPDX-License-Identifier: Apache-2.0
// pool_manager::plan_promotions against the procedure its documentation states, written out
// with sorts: the best ready cells fill the base pool's room, then the next best replace the
// weakest base cells pair by pair while they beat them (order of core/selection.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/core/selection.hpp>
#include <audiokv/policy/audiokv/pool_manager.hpp>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace {

using audiokv::pool_tier;
using audiokv::policy::detail::protect_always;

std::vector<pool_tier> reference(const std::vector<float>& score,
                                 const std::vector<std::uint8_t>& protection,
                                 std::vector<pool_tier> tier, std::int32_t base_cells) {
  const auto n = static_cast<std::int32_t>(score.size());
  std::vector<std::int32_t> ready, base;
  for (std::int32_t j = 0; j < n; ++j) {
    if (tier[j] == pool_tier::buffer && protection[j] != protect_always) ready.push_back(j);
    if (tier[j] == pool_tier::base) base.push_back(j);
  }
  const auto before = [&](std::int32_t a, std::int32_t b) {
    return audiokv::core::evicts_before(score[a], a, score[b], b);
  };
  std::sort(ready.begin(), ready.end(), [&](std::int32_t a, std::int32_t b) {
    return before(b, a);  // best first
  });
  std::sort(base.begin(), base.end(), before);  // weakest first
  const auto num_ready = static_cast<std::int32_t>(ready.size());
  const std::int32_t room =
      std::max(0, std::min(base_cells - static_cast<std::int32_t>(base.size()), num_ready));
  for (std::int32_t i = 0; i < room; ++i) tier[ready[i]] = pool_tier::base;
  for (std::int32_t i = room, b = 0; i < num_ready && b < static_cast<std::int32_t>(base.size());
       ++i, ++b) {
    if (!before(base[b], ready[i])) break;
    tier[ready[i]] = pool_tier::base;
    tier[base[b]] = pool_tier::buffer;
  }
  return tier;
}

std::vector<pool_tier> planned(const std::vector<float>& score,
                               const std::vector<std::uint8_t>& protection,
                               const std::vector<pool_tier>& tier, std::int32_t base_cells) {
  const auto n = static_cast<std::int32_t>(score.size());
  audiokv::policy::audiokv_config config;
  config.budget = 1 << 20;  // base_cells / 2^20 is exact in a float
  config.split.base = static_cast<float>(base_cells) / static_cast<float>(1 << 20);
  config.split.emergency = 0.0f;
  config.split.buffer = 1.0f - config.split.base;
  const audiokv::policy::detail::pool_manager pools(config);
  EXPECT_EQ(pools.base_cells(), base_cells);
  audiokv::policy::detail::cell_store store(std::max(n, 1), 1);
  std::vector<audiokv::frame_meta> frames(n);
  for (std::int32_t j = 0; j < n; ++j) frames[j].pos = j;
  store.append(frames.data(), n, [](const audiokv::frame_meta&) { return pool_tier::buffer; });
  std::vector<pool_tier> tier_after = tier;
  std::vector<std::int32_t> order(n + 1, -7);
  std::vector<std::uint32_t> key_bits(n + 1, 0xDEADBEEFu);
  std::vector<std::uint8_t> mask(n + 1, 0);
  pools.plan_promotions(store, score.data(), protection.data(), tier_after.data(), order.data(),
                        key_bits.data(), mask.data());
  EXPECT_EQ(std::count(mask.begin(), mask.end(), 0), n + 1) << "the evict mask is not written";
  return tier_after;
}

// Scores of one kind: heavy ties, the edges of the float range (+-0, +-FLT_MAX, denormals,
// FLT_MIN), the final-score range [1.5, 16) of the speech rules, or spread widely.
float draw(std::mt19937& rng, int kind) {
  static const float edges[] = {0.0f,      -0.0f, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, 1.0e-45f,
                                -1.0e-45f, 1.5f,  16.0f,   -1.0f,    2.0f,    1.0e-38f, -3.0e38f};
  switch (kind) {
    case 0:
      return static_cast<float>(rng() % 4) * 0.5f - 0.5f;
    case 1:
      return edges[rng() % (sizeof edges / sizeof edges[0])];
    case 2:
      return std::uniform_real_distribution<float>(1.5f, 16.0f)(rng);
    case 3:
      return 4.0f * static_cast<float>(rng() % 4) + 1.5f +
             static_cast<float>(rng() % 3) * 0.25f;  // few distinct values, many ties
    default:
      return std::uniform_real_distribution<float>(-1e30f, 1e30f)(rng);
  }
}

TEST(PlanPromotions, EqualsPairwiseProcedureOnAdversarialInputs) {
  std::mt19937 rng(5);
  const std::int32_t sizes[] = {0, 1, 2, 3, 5, 17, 64, 255, 1001, 4095, 4096, 4099, 9001};
  int cases = 0;
  for (const std::int32_t n : sizes) {
    for (int trial = 0; trial < (n < 4096 ? 40 : 8); ++trial) {
      const int kind = trial % 5;
      std::vector<float> score(n);
      for (auto& s : score) s = draw(rng, kind);
      std::vector<std::uint8_t> protection(n);
      std::vector<pool_tier> tier(n);
      const int mix = trial % 4;  // all buffer, all base, no base, mixed
      for (std::int32_t j = 0; j < n; ++j) {
        protection[j] = static_cast<std::uint8_t>(rng() % 3);
        const std::uint32_t t = mix == 0   ? 0u
                                : mix == 1 ? 1u
                                : mix == 2 ? rng() % 3 / 2 * 2u
                                           : rng() % 3;
        tier[j] = static_cast<pool_tier>(t);
      }
      std::int32_t in_base = 0;
      for (const pool_tier t : tier) in_base += t == pool_tier::base;
      // Base pool below, at and above the cells in it, and none.
      const std::int32_t base_cells[] = {0, in_base / 2, in_base, in_base + (n + 1) / 3, 1000};
      for (const std::int32_t cells : base_cells) {
        if (cells > 1000) continue;
        ASSERT_EQ(planned(score, protection, tier, cells),
                  reference(score, protection, tier, cells))
            << "n " << n << " trial " << trial << " base cells " << cells;
        ++cases;
      }
    }
  }
  EXPECT_GT(cases, 1000);
}

// Every contender scores the same: the rejected are exactly the earliest contenders, so the
// cut falls inside a run of ties that non-contenders interleave.
TEST(PlanPromotions, AllTiedRejectsTheEarliestContenders) {
  const std::int32_t n = 12;
  const std::vector<float> score(n, 3.0f);
  // Slots: 0 emergency, 1 buffer always-protected, then buffer and base alternating.
  std::vector<pool_tier> tier(n, pool_tier::buffer);
  std::vector<std::uint8_t> protection(n, 0);
  tier[0] = pool_tier::emergency;
  protection[1] = protect_always;
  for (std::int32_t j = 2; j < n; ++j) tier[j] = j % 2 == 0 ? pool_tier::buffer : pool_tier::base;
  // 10 contenders (5 ready, 5 base), a base pool of 7: the 3 earliest contenders (slots 2, 3, 4)
  // end in the buffer pool, slots 5..11 in the base pool; slots 0 and 1 keep their tiers.
  const std::vector<pool_tier> after = planned(score, protection, tier, 7);
  const pool_tier B = pool_tier::buffer, S = pool_tier::base;
  EXPECT_EQ(after, (std::vector<pool_tier>{pool_tier::emergency, B, B, B, B, S, S, S, S, S, S, S}));
  EXPECT_EQ(after, reference(score, protection, tier, 7));
}

}  // namespace
