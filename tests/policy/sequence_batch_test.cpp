// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <audiokv/pool/sequence_batch.hpp>
#include <limits>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;

audiokv_config config_with_budget(std::int32_t budget) {
  audiokv_config c;
  c.budget = budget;
  c.num_speakers = 3;
  return c;
}

TEST(SequenceBatch, EqualsIndependentSequences) {
  const std::int32_t budgets[] = {100, 257, 64};
  sequence_batch<tiered_cache<>> batch;
  std::vector<tiered_cache<>> alone;
  std::vector<test::speech_stream> streams, streams_alone;
  for (int s = 0; s < 3; ++s) {
    batch.add_sequence(config_with_budget(budgets[s]));
    alone.emplace_back(config_with_budget(budgets[s]));
    streams.emplace_back(100 + s);
    streams_alone.emplace_back(100 + s);
  }
  std::vector<float> scores, row;
  std::vector<std::int64_t> indptr(4);
  eviction_plan plan;
  for (int step = 0; step < 3000; ++step) {
    scores.clear();
    for (int s = 0; s < 3; ++s) {
      // Sequences advance at different rates, so their lengths differ.
      if (step % (s + 1) == 0) {
        const frame_meta f = streams[s].next_frame();
        batch[s].append(&f, 1);
        const frame_meta g = streams_alone[s].next_frame();
        alone[s].append(&g, 1);
      }
      streams[s].attention(batch[s].positions(), batch[s].num_cells(), row);
      scores.insert(scores.end(), row.begin(), row.end());
      indptr[s + 1] = static_cast<std::int64_t>(scores.size());
      streams_alone[s].attention(alone[s].positions(), alone[s].num_cells(), row);
      alone[s].observe(row.data(), alone[s].num_cells());
      if (alone[s].wants_eviction()) {
        alone[s].plan(plan);
        alone[s].apply(plan);
      }
    }
    batch.observe(scores.data(), indptr.data());
    batch.plan_all();
    batch.apply_all();
    for (int s = 0; s < 3; ++s) {
      ASSERT_EQ(batch[s].num_cells(), alone[s].num_cells()) << "step " << step << " seq " << s;
    }
  }
  for (int s = 0; s < 3; ++s) {
    EXPECT_GT(batch[s].stats().evictions, 0);
    for (int j = 0; j < alone[s].num_cells(); ++j) {
      ASSERT_EQ(batch[s].positions()[j], alone[s].positions()[j]);
    }
  }
}

TEST(SequenceBatch, BadScoreInOneSequenceChangesNoSequence) {
  sequence_batch<tiered_cache<>> batch;
  for (int s = 0; s < 3; ++s) {
    batch.add_sequence(config_with_budget(100));
    const auto f = test::frames(0, 10 + s);
    batch[s].append(f.data(), 10 + s);
  }
  std::vector<float> scores(10 + 11 + 12, 0.05f);
  const std::vector<std::int64_t> indptr = {0, 10, 21, 33};
  scores[25] = std::numeric_limits<float>::quiet_NaN();
  try {
    batch.observe(scores.data(), indptr.data());
    FAIL() << "accepted NaN";
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "scores[25]");
  }
  for (int s = 0; s < 3; ++s) EXPECT_EQ(batch[s].stats().steps, 0);
  const std::vector<std::int64_t> short_indptr = {0, 10, 20, 33};
  scores[25] = 0.05f;
  EXPECT_THROW(batch.observe(scores.data(), short_indptr.data()), audiokv::error);
  batch.observe(scores.data(), indptr.data());
  for (int s = 0; s < 3; ++s) EXPECT_EQ(batch[s].stats().steps, 1);
}

}  // namespace
