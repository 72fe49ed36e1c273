// SPDX-License-Identifier: Apache-2.0
// sequence_batch as a serving engine's request slots: remove a finished sequence, reuse its
// slot, and every sequence still equals an independent cache fed the same stream; errors name
// the argument and change nothing.
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <audiokv/pool/sequence_batch.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;

audiokv_config config_with_budget(std::int32_t budget) {
  audiokv_config c;
  c.budget = budget;
  return c;
}

/// One sequence's driver: its stream and the independent reference cache.
struct driver {
  test::speech_stream stream;
  std::unique_ptr<tiered_cache<>> alone;
  std::vector<float> scores;
  driver(unsigned seed, std::int32_t budget)
      : stream(seed, 1), alone(std::make_unique<tiered_cache<>>(config_with_budget(budget))) {}
};

TEST(SequenceBatchLifecycle, RemoveAndReuseKeepEverySequenceIndependent) {
  sequence_batch<tiered_cache<>> batch;
  std::vector<std::unique_ptr<driver>> drivers;
  const std::int32_t budgets[] = {120, 200, 90};
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(batch.add_sequence(config_with_budget(budgets[s])), s);
    drivers.push_back(std::make_unique<driver>(200 + s, budgets[s]));
  }
  eviction_plan plan;
  std::vector<float> scores;
  std::vector<std::int64_t> indptr;
  unsigned next_seed = 300;
  for (int step = 0; step < 2500; ++step) {
    // Sequence 1 finishes every 700 steps; the next sequence takes its slot 100 steps later.
    if (step % 700 == 350 && batch.active(1)) {
      batch.remove_sequence(1);
      drivers[1].reset();
      EXPECT_EQ(batch.num_active(), 2);
      EXPECT_FALSE(batch.active(1));
    }
    if (step % 700 == 450 && !batch.active(1)) {
      EXPECT_EQ(batch.add_sequence(config_with_budget(150)), 1) << "the free slot is reused";
      drivers[1] = std::make_unique<driver>(next_seed++, 150);
      EXPECT_EQ(batch[1].num_cells(), 0);
      EXPECT_TRUE(batch.plan(1).evict.empty());
    }
    scores.clear();
    indptr.assign(1, 0);
    for (std::int32_t s = 0; s < batch.size(); ++s) {
      if (batch.active(s)) {
        driver& d = *drivers[s];
        const frame_meta f = d.stream.next_frame();
        batch[s].append(&f, 1);
        d.alone->append(&f, 1);
        d.stream.attention(batch[s].positions(), batch[s].num_cells(), d.scores);
        scores.insert(scores.end(), d.scores.begin(), d.scores.end());
        d.alone->observe(d.scores.data(), d.alone->num_cells());
      }
      indptr.push_back(static_cast<std::int64_t>(scores.size()));
    }
    batch.observe(scores, indptr);
    batch.plan_all();
    for (std::int32_t s = 0; s < batch.size(); ++s) {
      if (!batch.active(s)) {
        EXPECT_TRUE(batch.plan(s).evict.empty() && batch.plan(s).move_to.empty());
        continue;
      }
      drivers[s]->alone->plan(plan);
      ASSERT_EQ(batch.plan(s).move_to, plan.move_to) << "step " << step << " sequence " << s;
      drivers[s]->alone->apply(plan);
    }
    batch.apply_all();
    for (std::int32_t s = 0; s < batch.size(); ++s) {
      if (!batch.active(s)) continue;
      ASSERT_EQ(batch[s].num_cells(), drivers[s]->alone->num_cells());
      for (std::int32_t c = 0; c < batch[s].num_cells(); ++c)
        ASSERT_EQ(batch[s].positions()[c], drivers[s]->alone->positions()[c]);
    }
  }
  EXPECT_EQ(batch.size(), 3) << "reuse never grows the batch";
}

TEST(SequenceBatchLifecycle, ErrorsNameTheArgumentAndChangeNothing) {
  sequence_batch<tiered_cache<>> batch;
  batch.add_sequence(config_with_budget(64));
  batch.add_sequence(config_with_budget(64));
  batch.remove_sequence(0);
  for (const std::int32_t bad : {-1, 0, 2}) {
    try {
      batch.remove_sequence(bad);
      FAIL() << bad;
    } catch (const error& e) {
      EXPECT_EQ(e.argument(), "s");
    }
  }
  EXPECT_EQ(batch.num_active(), 1);
  EXPECT_TRUE(batch.active(1));

  // A free slot must have zero cells in observe's indptr.
  const frame_meta f{0, 0, 1.0f, 0, 0.0f};
  batch[1].append(&f, 1);
  const std::vector<float> scores{0.5f, 0.5f};
  const std::vector<std::int64_t> indptr{0, 1, 2};
  try {
    batch.observe(scores, indptr);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "indptr[1]");
  }

  // A rejected configuration adds no slot and takes no free one.
  audiokv_config bad;
  bad.budget = -5;
  EXPECT_THROW(batch.add_sequence(bad), error);
  EXPECT_EQ(batch.size(), 2);
  EXPECT_FALSE(batch.active(0));
  EXPECT_EQ(batch.add_sequence(config_with_budget(64)), 0);
  EXPECT_EQ(batch.num_active(), 2);
}

}  // namespace
