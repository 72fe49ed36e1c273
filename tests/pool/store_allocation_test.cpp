// SPDX-License-Identifier: Apache-2.0
// cpu::head_kv_store allocates nothing after construction: a stream of repeated and fresh frames
// through an AudioKV cache, with shared rows and the int8 buffer arena on, counted by a
// replacement global operator new over every append / attend / apply.
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <audiokv/cpu/head_kv_store.hpp>
#include <random>
#include <vector>

#include "common/counting_allocator.hpp"
#include "common/stream.hpp"

namespace {

using namespace audiokv;

TEST(HeadKvStoreAllocation, DecodeStepsNeverAllocate) {
  constexpr std::int32_t dim = 32, capacity = 400;
  audiokv_config pc;
  pc.budget = 300;
  pc.capacity = capacity;
  pc.frame_ms = 20.0f;
  tiered_cache<> policy(pc);
  cpu::head_kv_store_config c;
  c.cell_capacity = capacity;
  c.head_dim = dim;
  c.share_rows = true;
  c.int8_buffer = true;
  c.full_rows = policy.base_pool_cells() + policy.emergency_pool_cells();
  cpu::head_kv_store store(c);
  eviction_plan plan;
  plan.reserve(capacity);
  std::vector<float> k(dim), v(dim), q(dim), out(dim), probs(capacity);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::int64_t allocations = 0, evictions = 0, shared = 0;
  for (std::int32_t t = 0; t < 5000; ++t) {
    const bool repeat = t > 0 && rng() % 2 == 0;  // half the frames repeat the previous one
    for (std::int32_t d = 0; d < dim; ++d) {
      if (!repeat) k[d] = normal(rng), v[d] = normal(rng);
      q[d] = normal(rng);
    }
    const frame_meta frame{t, 0, 1.0f, frame_flag_none, 0.0f};
    allocations += test::count_allocations([&] {
      policy.append(&frame, 1);
      shared += store.append(k.data(), v.data());
      store.attend(q.data(), out.data(), probs.data());
      policy.observe(probs.data(), store.num_cells());
      if (!policy.wants_eviction()) return;
      policy.plan(plan);
      policy.apply(plan);
      store.apply(plan, policy.tiers());
      ++evictions;
    });
    ASSERT_EQ(store.num_cells(), policy.num_cells());
  }
  EXPECT_GT(evictions, 50);
  EXPECT_GT(shared, 1000);
  EXPECT_GT(store.num_rows(row_precision::int8), 0);
  EXPECT_GT(store.num_rows(row_precision::full), 0);
  EXPECT_EQ(allocations, 0);
}

}  // namespace
