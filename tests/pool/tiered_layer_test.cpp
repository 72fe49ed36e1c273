// SPDX-License-Identifier: Apache-2.0
// pool::tiered_layer: a compression plans each head to its entropy share, the same plans as
// caches driven by hand with entropy_head_budgets; equal shares before every head has observed;
// observe_all is the per-head observe; bad calls name the argument and change nothing.
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <audiokv/pool/entropy_head_budgets.hpp>
#include <audiokv/pool/tiered_layer.hpp>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;

constexpr std::int32_t kHeads = 3;
constexpr std::int32_t kCells = 300;

audiokv_config layer_config() {
  audiokv_config config;
  config.budget = 400;
  return config;
}

/// Head 0 reads 10 cells at a step, heads 1 and 2 read every cell.
std::vector<float> attention_of(std::int32_t head, std::int32_t step) {
  std::vector<float> p(static_cast<std::size_t>(kCells), 0.0f);
  const std::int32_t read = head == 0 ? 10 : kCells;
  for (std::int32_t j = 0; j < read; ++j) {
    p[static_cast<std::size_t>((j * 7 + step * 31) % kCells)] = 1.0f / static_cast<float>(read);
  }
  return p;
}

span<const float> view(const std::vector<float>& p) {
  return span<const float>(p.data(), p.size());
}

void fill(tiered_layer<>& layer) {
  const std::vector<frame_meta> frames = test::frames(0, kCells);
  for (std::int32_t h = 0; h < kHeads; ++h) layer.head(h).append(frames.data(), kCells);
}

TEST(TieredLayer, CompressionPlansEachHeadToItsEntropyShare) {
  tiered_layer<> layer(layer_config(), kHeads);
  fill(layer);
  // The same steps by hand: one cache per head and the layer's entropy.
  std::vector<tiered_cache<>> by_hand(kHeads, tiered_cache<>(layer_config()));
  entropy_head_budgets entropy(kHeads);
  const std::vector<frame_meta> frames = test::frames(0, kCells);
  for (auto& cache : by_hand) cache.append(frames.data(), kCells);
  for (std::int32_t step = 0; step < 4; ++step) {
    for (std::int32_t h = 0; h < kHeads; ++h) {
      const std::vector<float> p = attention_of(h, step);
      layer.observe(h, view(p));
      by_hand[h].observe(p.data(), kCells);
      entropy.observe(h, view(p));
    }
  }
  const std::int32_t target = 60;
  const std::vector<std::int32_t> share = layer.shares(target);
  EXPECT_EQ(share, entropy.split(std::int64_t{kHeads} * target, 1));
  EXPECT_EQ(std::accumulate(share.begin(), share.end(), 0), kHeads * target);
  EXPECT_GT(share[0], target) << "the sharp head gets more";
  EXPECT_EQ(share[1], share[2]);

  std::vector<eviction_plan> plans(kHeads);
  layer.compress_to(target, span<eviction_plan>(plans.data(), plans.size()));
  for (std::int32_t h = 0; h < kHeads; ++h) {
    eviction_plan expected;
    by_hand[h].plan_to(share[h], expected);
    EXPECT_EQ(plans[h].move_to, expected.move_to) << "head " << h;
    EXPECT_EQ(plans[h].n_kv_after, expected.n_kv_after) << "head " << h;
    layer.head(h).apply(plans[h]);
    EXPECT_EQ(layer.head(h).num_cells(), expected.n_kv_after);
  }
}

TEST(TieredLayer, EqualSharesUntilEveryHeadHasObserved) {
  tiered_layer<> layer(layer_config(), kHeads);
  fill(layer);
  EXPECT_EQ(layer.shares(50), std::vector<std::int32_t>(kHeads, 50));
  const std::vector<float> p = attention_of(0, 0);
  layer.observe(0, view(p));
  EXPECT_EQ(layer.shares(50), std::vector<std::int32_t>(kHeads, 50));
  // A vanishing exponent splits equally, observed or not.
  tiered_layer<> equal(layer_config(), kHeads, default_pipeline{}, 0.0);
  fill(equal);
  for (std::int32_t h = 0; h < kHeads; ++h) equal.observe(h, view(attention_of(h, 0)));
  EXPECT_EQ(equal.shares(50), std::vector<std::int32_t>(kHeads, 50));
}

TEST(TieredLayer, ObserveAllIsEveryHeadsObserve) {
  tiered_layer<> together(layer_config(), kHeads), one_by_one(layer_config(), kHeads);
  fill(together);
  fill(one_by_one);
  for (std::int32_t step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> rows;
    std::vector<span<const float>> spans;
    for (std::int32_t h = 0; h < kHeads; ++h) rows.push_back(attention_of(h, step));
    for (const auto& row : rows) spans.push_back(view(row));
    together.observe_all(span<const span<const float>>(spans.data(), spans.size()));
    for (std::int32_t h = 0; h < kHeads; ++h) one_by_one.observe(h, spans[h]);
  }
  for (std::int32_t h = 0; h < kHeads; ++h) {
    EXPECT_EQ(together.attention_entropy().steps(h), 3);
    for (std::int32_t c = 0; c < kCells; ++c)
      ASSERT_EQ(together.head(h).importance()[c], one_by_one.head(h).importance()[c]);
  }
  EXPECT_EQ(together.attention_entropy().mean_entropy(),
            one_by_one.attention_entropy().mean_entropy());
  together.reset();
  EXPECT_EQ(together.head(0).num_cells(), 0);
  EXPECT_FALSE(together.attention_entropy().all_observed());
}

void expect_names(const char* argument, void (*call)(tiered_layer<>&), tiered_layer<>& layer) {
  try {
    call(layer);
    ADD_FAILURE() << "accepted a bad " << argument;
  } catch (const audiokv::error& e) {
    EXPECT_NE(std::string(e.what()).find(argument), std::string::npos) << e.what();
  }
}

TEST(TieredLayer, BadCallsNameTheArgumentAndChangeNothing) {
  EXPECT_THROW(tiered_layer<>(layer_config(), 0), audiokv::error);
  audiokv_config bad = layer_config();
  bad.budget = -1;
  EXPECT_THROW(tiered_layer<>(bad, kHeads), audiokv::error);

  tiered_layer<> layer(layer_config(), kHeads);
  fill(layer);
  layer.observe(0, view(attention_of(0, 0)));
  expect_names(
      "head", [](tiered_layer<>& l) { l.observe(kHeads, view(attention_of(0, 0))); }, layer);
  expect_names(
      "num_cells",
      [](tiered_layer<>& l) {
        const std::vector<float> short_row(kCells - 1, 0.0f);
        l.observe(1, view(short_row));
      },
      layer);
  expect_names(
      "attention.size()",
      [](tiered_layer<>& l) {
        const std::vector<float> row = attention_of(0, 0);
        const std::vector<span<const float>> two{view(row), view(row)};
        l.observe_all(span<const span<const float>>(two.data(), two.size()));
      },
      layer);
  expect_names(
      "attention[2]",
      [](tiered_layer<>& l) {
        const std::vector<float> row = attention_of(0, 0);
        std::vector<float> negative = row;
        negative[5] = -1.0f;
        const std::vector<span<const float>> rows{view(row), view(row), view(negative)};
        l.observe_all(span<const span<const float>>(rows.data(), rows.size()));
      },
      layer);
  EXPECT_EQ(layer.attention_entropy().steps(0), 1);
  EXPECT_EQ(layer.attention_entropy().steps(1), 0);
  EXPECT_EQ(layer.head(1).stats().steps, 0);

  expect_names(
      "plans.size()",
      [](tiered_layer<>& l) {
        std::vector<eviction_plan> two(kHeads - 1);
        l.compress_to(50, span<eviction_plan>(two.data(), two.size()));
      },
      layer);
  expect_names(
      "target_per_head",
      [](tiered_layer<>& l) {
        std::vector<eviction_plan> all(kHeads);
        l.compress_to(0, span<eviction_plan>(all.data(), all.size()));
      },
      layer);
  expect_names(
      "head", [](tiered_layer<>& l) { (void)l.head(-1); }, layer);
  for (std::int32_t h = 0; h < kHeads; ++h) EXPECT_EQ(layer.head(h).num_cells(), kCells);
}

}  // namespace
