// SPDX-License-Identifier: Apache-2.0
// Merge on evict: attention_mass::merge_evicted folds evicted K/V rows into their keepers.
#include <gtest/gtest.h>

#include <audiokv/error.hpp>
#include <audiokv/policy/speech/attention_mass.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

using audiokv::attention_mass;
using audiokv::eviction_plan;

eviction_plan make_plan(std::vector<std::int32_t> move_to) {
  eviction_plan plan;
  plan.n_kv_before = static_cast<std::int32_t>(move_to.size());
  plan.n_kv_after = 0;
  for (std::int32_t t : move_to) plan.n_kv_after += t >= 0 ? 1 : 0;
  plan.move_to = std::move(move_to);
  return plan;
}

// Rows r_c = [c, 10 c, 99] with dim 2 and stride 3: the third float is not part of the row.
std::vector<float> make_rows(std::int32_t n) {
  std::vector<float> rows;
  for (std::int32_t c = 0; c < n; ++c) rows.insert(rows.end(), {1.0f * c, 10.0f * c, 99.0f});
  return rows;
}

// Positions 0..5, keep 0, 3, 5: cell 1 joins 0, cells 2 and 4 join 3 (4 ties with 5: the older).
TEST(MergeOnEvict, KeeperRowIsTheMeanOfItsGroup) {
  attention_mass mass(6);
  mass.append(6);
  const eviction_plan plan = make_plan({0, -1, -1, 1, -1, 2});
  const std::vector<std::int32_t> pos = {0, 1, 2, 3, 4, 5};
  std::vector<float> rows = make_rows(6);
  mass.merge_evicted(plan, pos.data(), rows.data(), 2, 3);
  EXPECT_FLOAT_EQ(rows[0 * 3 + 0], 0.5f);  // (0 + 1) / 2
  EXPECT_FLOAT_EQ(rows[0 * 3 + 1], 5.0f);
  EXPECT_FLOAT_EQ(rows[3 * 3 + 0], 3.0f);  // (2 + 3 + 4) / 3
  EXPECT_FLOAT_EQ(rows[3 * 3 + 1], 30.0f);
  EXPECT_EQ(rows[5 * 3 + 0], 5.0f);  // stands for nobody: untouched
  EXPECT_EQ(rows[5 * 3 + 1], 50.0f);
  for (std::int32_t c = 0; c < 6; ++c) EXPECT_EQ(rows[c * 3 + 2], 99.0f) << "stride gap " << c;
}

// A second round weighs each keeper by the cells it already stands for, so the survivor is the
// plain mean of all six original rows: [2.5, 25].
TEST(MergeOnEvict, SecondRoundWeighsByCellsStoodFor) {
  attention_mass mass(6);
  mass.append(6);
  eviction_plan plan = make_plan({0, -1, -1, 1, -1, 2});
  std::vector<std::int32_t> pos = {0, 1, 2, 3, 4, 5};
  std::vector<float> rows = make_rows(6);
  mass.merge_evicted(plan, pos.data(), rows.data(), 2, 3);
  std::vector<float> kept = {rows[0],  rows[1],  rows[2],  rows[9], rows[10],
                             rows[11], rows[15], rows[16], rows[17]};
  mass.apply(plan, pos.data());
  plan = make_plan({-1, 0, -1});
  pos = {0, 3, 5};
  mass.merge_evicted(plan, pos.data(), kept.data(), 2, 3);
  EXPECT_FLOAT_EQ(kept[3], 2.5f);
  EXPECT_FLOAT_EQ(kept[4], 25.0f);
}

// Cells whose keys are equal within each group: softmax over all cells equals softmax over the
// merged cells with log(weight) added to each logit, so the attention output is unchanged.
TEST(MergeOnEvict, EqualKeysGiveTheFullAttentionOutput) {
  const std::int32_t n = 7, dim = 2;
  const std::vector<float> key_of_group = {0.3f, -1.2f, 0.8f};
  const std::vector<std::int32_t> group = {0, 0, 1, 1, 1, 2, 2};
  std::vector<float> k, v;
  for (std::int32_t c = 0; c < n; ++c) {
    const float x = key_of_group[static_cast<std::size_t>(group[c])];
    k.insert(k.end(), {x, 0.5f * x});
    v.insert(v.end(), {std::sin(1.0f + c), std::cos(2.0f * c)});
  }
  const float q[dim] = {1.5f, -0.7f};
  auto attend = [&](const std::vector<float>& keys, const std::vector<float>& values,
                    std::int32_t cells, const float* bias, double* out) {
    std::vector<double> logit(static_cast<std::size_t>(cells));
    double peak = -1e300, total = 0.0;
    for (std::int32_t c = 0; c < cells; ++c) {
      logit[c] = q[0] * keys[c * dim] + q[1] * keys[c * dim + 1] + (bias ? bias[c] : 0.0f);
      peak = std::max(peak, logit[c]);
    }
    out[0] = out[1] = 0.0;
    for (std::int32_t c = 0; c < cells; ++c) {
      const double p = std::exp(logit[c] - peak);
      total += p;
      out[0] += p * values[c * dim];
      out[1] += p * values[c * dim + 1];
    }
    out[0] /= total;
    out[1] /= total;
  };
  double full[2];
  attend(k, v, n, nullptr, full);

  attention_mass mass(n);
  mass.append(n);
  const eviction_plan plan = make_plan({0, -1, -1, 1, -1, -1, 2});  // keepers 0, 3, 6
  const std::vector<std::int32_t> pos = {0, 1, 2, 3, 4, 5, 6};
  mass.merge_evicted(plan, pos.data(), k.data(), dim, dim);
  mass.merge_evicted(plan, pos.data(), v.data(), dim, dim);
  std::vector<float> kk, vv;
  for (std::int32_t c = 0; c < n; ++c) {
    if (plan.move_to[c] < 0) continue;
    kk.insert(kk.end(), {k[c * dim], k[c * dim + 1]});
    vv.insert(vv.end(), {v[c * dim], v[c * dim + 1]});
  }
  mass.apply(plan, pos.data());
  ASSERT_EQ(mass.size(), 3);
  EXPECT_EQ(mass.weights()[0], 2.0);
  EXPECT_EQ(mass.weights()[1], 3.0);
  EXPECT_EQ(mass.weights()[2], 2.0);
  double merged[2];
  attend(kk, vv, 3, mass.logit_bias(), merged);
  EXPECT_NEAR(merged[0], full[0], 1e-6);
  EXPECT_NEAR(merged[1], full[1], 1e-6);
}

TEST(MergeOnEvict, BadArgumentsThrowAndWriteNothing) {
  attention_mass mass(4);
  mass.append(4);
  const std::vector<std::int32_t> pos = {0, 1, 2, 3};
  std::vector<float> rows = make_rows(4);
  const std::vector<float> before = rows;
  const eviction_plan wrong_size = make_plan({0, -1, 1});
  EXPECT_THROW(mass.merge_evicted(wrong_size, pos.data(), rows.data(), 2, 3), audiokv::error);
  const eviction_plan plan = make_plan({0, -1, 1, 2});
  try {
    mass.merge_evicted(plan, pos.data(), rows.data(), 2, 1);
    FAIL() << "no error";
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "stride");
  }
  EXPECT_THROW(mass.merge_evicted(plan, pos.data(), rows.data(), 0, 3), audiokv::error);
  EXPECT_EQ(rows, before);
}

}  // namespace
