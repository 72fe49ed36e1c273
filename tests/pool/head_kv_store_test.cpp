// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <audiokv/cpu/head_kv_store.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/stream.hpp"

namespace {

using namespace audiokv;
using cpu::head_kv_store;
using cpu::head_kv_store_config;

constexpr std::int32_t kDim = 16;

/// Dense rows [n, kDim] where runs of equal rows imitate repeated silence frames.
struct dense_rows {
  std::vector<float> k, v;
  std::int32_t n = 0;
  const float* k_row(std::int32_t i) const { return &k[static_cast<std::size_t>(i) * kDim]; }
  const float* v_row(std::int32_t i) const { return &v[static_cast<std::size_t>(i) * kDim]; }
};

dense_rows rows_with_runs(std::int32_t n, std::uint32_t seed, float repeat_probability) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> coin(0.0f, 1.0f);
  dense_rows r;
  r.n = n;
  r.k.resize(static_cast<std::size_t>(n) * kDim);
  r.v.resize(r.k.size());
  for (std::int32_t i = 0; i < n; ++i) {
    const bool repeat = i > 0 && coin(rng) < repeat_probability;
    for (std::int32_t d = 0; d < kDim; ++d) {
      const std::size_t at = static_cast<std::size_t>(i) * kDim + d;
      r.k[at] = repeat ? r.k[at - kDim] : normal(rng);
      r.v[at] = repeat ? r.v[at - kDim] : normal(rng);
    }
  }
  return r;
}

/// Dense attention in double over the cells `keep` (indices into rows): the oracle.
void dense_attention(const dense_rows& rows, const std::vector<std::int32_t>& keep, const float* q,
                     std::vector<double>& out, std::vector<double>& probs) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(kDim));
  probs.assign(keep.size(), 0.0);
  double max_logit = -1e300;
  for (std::size_t c = 0; c < keep.size(); ++c) {
    double dot = 0.0;
    for (std::int32_t d = 0; d < kDim; ++d) dot += double{q[d]} * rows.k_row(keep[c])[d];
    probs[c] = dot * scale;
    max_logit = std::max(max_logit, probs[c]);
  }
  double sum = 0.0;
  for (double& p : probs) sum += p = std::exp(p - max_logit);
  out.assign(kDim, 0.0);
  for (std::size_t c = 0; c < keep.size(); ++c) {
    probs[c] /= sum;
    for (std::int32_t d = 0; d < kDim; ++d) out[d] += probs[c] * rows.v_row(keep[c])[d];
  }
}

head_kv_store_config store_config(std::int32_t capacity, bool share, bool int8) {
  head_kv_store_config c;
  c.cell_capacity = capacity;
  c.head_dim = kDim;
  c.share_rows = share;
  c.int8_buffer = int8;
  return c;
}

std::vector<float> random_query(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> q(kDim);
  for (float& x : q) x = normal(rng);
  return q;
}

TEST(HeadKvStore, ExactSharingStoresEachRunOnceAndAttentionEqualsTheDenseCache) {
  const dense_rows rows = rows_with_runs(200, 1, 0.6f);
  head_kv_store shared(store_config(200, true, false));
  head_kv_store unshared(store_config(200, false, false));
  std::int32_t runs = 0;
  for (std::int32_t i = 0; i < rows.n; ++i) {
    runs += !shared.append(rows.k_row(i), rows.v_row(i));
    EXPECT_FALSE(unshared.append(rows.k_row(i), rows.v_row(i)));
  }
  EXPECT_LT(runs, 120);  // about 40% of the frames start a run
  EXPECT_EQ(shared.num_rows(row_precision::full), runs);
  EXPECT_EQ(shared.num_cells(), 200);
  EXPECT_EQ(shared.kv_bytes() * 200, unshared.kv_bytes() * runs);

  std::vector<std::int32_t> all(200);
  for (std::int32_t i = 0; i < 200; ++i) all[i] = i;
  for (std::uint32_t seed = 0; seed < 5; ++seed) {
    const std::vector<float> q = random_query(seed);
    std::vector<double> out_ref, probs_ref;
    dense_attention(rows, all, q.data(), out_ref, probs_ref);
    std::vector<float> out_s(kDim), out_u(kDim), probs_s(200), probs_u(200);
    shared.attend(q.data(), out_s.data(), probs_s.data());
    unshared.attend(q.data(), out_u.data(), probs_u.data());
    for (std::int32_t d = 0; d < kDim; ++d) {
      EXPECT_NEAR(out_s[d], out_ref[d], 1e-5) << "seed " << seed << " dim " << d;
      EXPECT_NEAR(out_s[d], out_u[d], 1e-5);
    }
    for (std::int32_t c = 0; c < 200; ++c) {
      EXPECT_NEAR(probs_s[c], probs_ref[c], 1e-6 + 1e-5 * probs_ref[c]) << "cell " << c;
    }
  }
}

TEST(HeadKvStore, ToleranceComparesWithTheRunsFirstFrameSoDriftEndsTheRun) {
  head_kv_store_config c = store_config(16, true, false);
  c.share_tolerance = 0.1f;
  head_kv_store store(c);
  std::vector<float> k(kDim, 1.0f), v(kDim, -2.0f);
  EXPECT_FALSE(store.append(k.data(), v.data()));
  // Each frame drifts 4% further from the first: frames 1, 2 share (<= 10%), frame 3 (12%)
  // starts a new row although it is within 4% of its predecessor.
  for (int i = 1; i <= 3; ++i) {
    for (float& x : k) x = 1.0f + 0.04f * static_cast<float>(i);
    EXPECT_EQ(store.append(k.data(), v.data()), i < 3) << "frame " << i;
  }
  EXPECT_EQ(store.num_rows(row_precision::full), 2);
  std::vector<float> k_read(kDim), v_read(kDim);
  store.read_cell(2, k_read.data(), v_read.data());
  EXPECT_EQ(k_read[0], 1.0f);  // the row keeps its first frame
  // V must match as well.
  for (float& x : v) x = 2.0f;
  EXPECT_FALSE(store.append(k.data(), v.data()));
}

TEST(HeadKvStore, EvictionKeepsSurvivingRowsByteExactAndFreesEmptyRuns) {
  const dense_rows rows = rows_with_runs(64, 2, 0.5f);
  head_kv_store store(store_config(64, true, false));
  for (std::int32_t i = 0; i < rows.n; ++i) store.append(rows.k_row(i), rows.v_row(i));
  std::mt19937 rng(3);
  std::vector<std::int32_t> survivors(64);
  for (std::int32_t i = 0; i < 64; ++i) survivors[i] = i;
  std::vector<float> k_read(kDim), v_read(kDim);
  while (survivors.size() > 4) {
    std::vector<std::int32_t> move_to(survivors.size());
    std::vector<std::int32_t> next;
    for (std::size_t i = 0; i < survivors.size(); ++i) {
      const bool keep = rng() % 3 != 0;
      move_to[i] = keep ? static_cast<std::int32_t>(next.size()) : -1;
      if (keep) next.push_back(survivors[i]);
    }
    store.apply(move_to.data(), static_cast<std::int32_t>(move_to.size()), nullptr);
    survivors = next;
    ASSERT_EQ(store.num_cells(), static_cast<std::int32_t>(survivors.size()));
    std::int32_t live_runs = 0;
    for (std::size_t c = 0; c < survivors.size(); ++c) {
      store.read_cell(static_cast<std::int32_t>(c), k_read.data(), v_read.data());
      ASSERT_EQ(std::memcmp(k_read.data(), rows.k_row(survivors[c]), sizeof(float) * kDim), 0);
      ASSERT_EQ(std::memcmp(v_read.data(), rows.v_row(survivors[c]), sizeof(float) * kDim), 0);
      live_runs +=
          c == 0 || store.table().cell_rows()[c].row != store.table().cell_rows()[c - 1].row;
    }
    EXPECT_EQ(store.num_rows(row_precision::full), live_runs);
    std::int32_t cells = 0;
    for (std::int32_t r = 0; r < live_runs; ++r)
      cells += store.table().multiplicity(row_precision::full)[r];
    EXPECT_EQ(cells, store.num_cells());
  }
}

TEST(HeadKvStore, Int8BufferRowsStayWithinHalfAScaleAndPromotionDequantises) {
  const dense_rows rows = rows_with_runs(10, 4, 0.0f);
  head_kv_store_config c = store_config(10, false, true);
  c.full_rows = 4;
  head_kv_store store(c);
  for (std::int32_t i = 0; i < rows.n; ++i) store.append(rows.k_row(i), rows.v_row(i));
  EXPECT_EQ(store.num_rows(row_precision::int8), 10);
  EXPECT_EQ(store.kv_bytes(), 2 * 10 * (kDim + 4));
  std::vector<float> k_read(kDim), v_read(kDim), k_int8(kDim), v_int8(kDim);
  for (std::int32_t i = 0; i < rows.n; ++i) {
    store.read_cell(i, k_read.data(), v_read.data());
    float max_abs = 0.0f;
    for (std::int32_t d = 0; d < kDim; ++d) max_abs = std::max(max_abs, std::abs(rows.k_row(i)[d]));
    for (std::int32_t d = 0; d < kDim; ++d)
      EXPECT_LE(std::abs(k_read[d] - rows.k_row(i)[d]), core::int8_scale(max_abs) * 0.5f + 1e-7f);
  }
  // Cells 2 and 5 reach the base pool, cell 7 is evicted.
  store.read_cell(5, k_int8.data(), v_int8.data());
  std::vector<std::int32_t> move_to{0, 1, 2, 3, 4, 5, 6, -1, 7, 8};
  std::vector<pool_tier> tiers(9, pool_tier::buffer);
  tiers[2] = tiers[5] = pool_tier::base;
  store.apply(move_to.data(), 10, tiers.data());
  EXPECT_EQ(store.num_rows(row_precision::full), 2);
  EXPECT_EQ(store.num_rows(row_precision::int8), 7);
  EXPECT_EQ(store.table().cell_rows()[5].precision, row_precision::full);
  store.read_cell(5, k_read.data(), v_read.data());
  EXPECT_EQ(std::memcmp(k_read.data(), k_int8.data(), sizeof(float) * kDim), 0);
  EXPECT_EQ(std::memcmp(v_read.data(), v_int8.data(), sizeof(float) * kDim), 0);
  // Cell 8 (old 9) still reads its own int8 row after the compaction.
  store.read_cell(8, k_read.data(), v_read.data());
  EXPECT_NEAR(k_read[0], rows.k_row(9)[0], 0.05f);
  // Back to the buffer: the full row is quantised again; the int8 values do not drift.
  std::vector<std::int32_t> identity{0, 1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<pool_tier> buffer(9, pool_tier::buffer);
  store.apply(identity.data(), 9, buffer.data());
  EXPECT_EQ(store.num_rows(row_precision::full), 0);
  store.read_cell(5, k_read.data(), v_read.data());
  for (std::int32_t d = 0; d < kDim; ++d) EXPECT_NEAR(k_read[d], k_int8[d], 1e-6f);
}

TEST(HeadKvStore, Int8AttentionErrorIsSmall) {
  const dense_rows rows = rows_with_runs(300, 5, 0.0f);
  head_kv_store exact(store_config(300, false, false));
  head_kv_store int8(store_config(300, false, true));
  for (std::int32_t i = 0; i < rows.n; ++i) {
    exact.append(rows.k_row(i), rows.v_row(i));
    int8.append(rows.k_row(i), rows.v_row(i));
  }
  std::vector<float> out_e(kDim), out_q(kDim);
  const std::vector<float> q = random_query(9);
  exact.attend(q.data(), out_e.data(), nullptr);
  int8.attend(q.data(), out_q.data(), nullptr);
  double err = 0.0, norm = 0.0;
  for (std::int32_t d = 0; d < kDim; ++d) {
    err += (out_q[d] - out_e[d]) * (out_q[d] - out_e[d]);
    norm += out_e[d] * out_e[d];
  }
  EXPECT_GT(err, 0.0);
  EXPECT_LT(std::sqrt(err / norm), 0.05);
}

TEST(HeadKvStore, FollowsTieredCachePlansOverAStream) {
  audiokv_config pc;
  pc.budget = 120;
  pc.capacity = 140;
  pc.frame_ms = 20.0f;
  tiered_cache<> policy(pc);
  head_kv_store_config c = store_config(140, true, true);
  c.full_rows = policy.base_pool_cells() + policy.emergency_pool_cells();
  c.share_tolerance = 0.0f;
  head_kv_store store(c);
  const dense_rows rows = rows_with_runs(1500, 6, 0.4f);
  std::vector<float> probs(140), out(kDim);
  eviction_plan plan;
  plan.reserve(140);
  for (std::int32_t t = 0; t < rows.n; ++t) {
    const auto frame = test::frames(t, 1);
    policy.append(frame.data(), 1);
    store.append(rows.k_row(t), rows.v_row(t));
    const std::vector<float> q = random_query(static_cast<std::uint32_t>(t));
    store.attend(q.data(), out.data(), probs.data());
    policy.observe(probs.data(), store.num_cells());
    if (!policy.wants_eviction()) continue;
    policy.plan(plan);
    policy.apply(plan);
    store.apply(plan, policy.tiers());
    ASSERT_EQ(store.num_cells(), policy.num_cells());
    // A row is full precision exactly when one of its cells is outside the buffer pool.
    std::vector<std::uint8_t> needs_full(store.num_rows(row_precision::full), 0);
    std::int32_t full_cells = 0;
    for (std::int32_t j = 0; j < policy.num_cells(); ++j) {
      const row_ref ref = store.table().cell_rows()[j];
      const bool outside_buffer = policy.tiers()[j] != pool_tier::buffer;
      full_cells += outside_buffer;
      if (ref.precision == row_precision::int8) {
        ASSERT_FALSE(outside_buffer) << "cell " << j << " of pool " << int(policy.tiers()[j]);
      } else if (outside_buffer) {
        needs_full[ref.row] = 1;
      }
    }
    for (const std::uint8_t needed : needs_full) ASSERT_TRUE(needed);
    EXPECT_LE(store.num_rows(row_precision::full), full_cells);
  }
  EXPECT_LT(store.kv_bytes(), store.dense_kv_bytes());
}

TEST(HeadKvStore, BadArgumentsThrowAndChangeNothing) {
  head_kv_store_config c = store_config(4, true, false);
  c.share_tolerance = 2.0f;
  EXPECT_THROW(head_kv_store{c}, error);
  c = store_config(4, false, false);
  c.full_rows = 2;
  try {
    head_kv_store s(c);
    FAIL() << "full_rows below capacity without int8_buffer was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "config.full_rows");
  }
  head_kv_store store(store_config(2, true, false));
  std::vector<float> k(kDim, 1.0f), v(kDim, 1.0f);
  k[3] = std::nanf("");
  try {
    store.append(k.data(), v.data());
    FAIL() << "a NaN key was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "k[3]");
  }
  EXPECT_EQ(store.num_cells(), 0);
  EXPECT_THROW(store.append(nullptr, v.data()), error);
  k[3] = 1.0f;
  store.append(k.data(), v.data());
  store.append(k.data(), v.data());
  EXPECT_THROW(store.append(k.data(), v.data()), error);  // full
  const std::vector<std::int32_t> bad{0, 0};
  EXPECT_THROW(store.apply(bad.data(), 2, nullptr), error);
  EXPECT_EQ(store.num_cells(), 2);
  std::vector<float> out(kDim);
  EXPECT_THROW(store.attend(nullptr, out.data(), nullptr), error);
}

TEST(HeadKvStore, ReserveKeepsEveryRowAndMakesRoom) {
  const dense_rows rows = rows_with_runs(12, 7, 0.5f);
  head_kv_store_config c = store_config(6, true, true);
  c.full_rows = 2;
  head_kv_store store(c);
  for (std::int32_t i = 0; i < 6; ++i) store.append(rows.k_row(i), rows.v_row(i));
  EXPECT_THROW(store.append(rows.k_row(6), rows.v_row(6)), error);
  std::vector<float> before(6 * 2 * kDim), k_read(kDim), v_read(kDim);
  for (std::int32_t i = 0; i < 6; ++i)
    store.read_cell(i, &before[static_cast<std::size_t>(i) * 2 * kDim],
                    &before[static_cast<std::size_t>(i) * 2 * kDim + kDim]);
  EXPECT_THROW(store.reserve(-1), error);
  EXPECT_THROW(store.reserve(12, -1), error);
  EXPECT_EQ(store.config().cell_capacity, 6);
  store.reserve(12, 8);
  EXPECT_EQ(store.config().cell_capacity, 12);
  EXPECT_EQ(store.config().full_arena_rows(), 8);
  for (std::int32_t i = 0; i < 6; ++i) {
    store.read_cell(i, k_read.data(), v_read.data());
    ASSERT_EQ(std::memcmp(k_read.data(), &before[static_cast<std::size_t>(i) * 2 * kDim],
                          sizeof(float) * kDim),
              0);
  }
  for (std::int32_t i = 6; i < 12; ++i) store.append(rows.k_row(i), rows.v_row(i));
  // Eight cells may now be promoted to full-precision rows.
  std::vector<std::int32_t> identity(12);
  for (std::int32_t i = 0; i < 12; ++i) identity[i] = i;
  std::vector<pool_tier> tiers(12, pool_tier::buffer);
  for (std::int32_t i = 0; i < 8; ++i) tiers[i] = pool_tier::base;
  store.apply(identity.data(), 12, tiers.data());
  EXPECT_GE(store.num_rows(row_precision::full), 1);
  EXPECT_EQ(store.num_cells(), 12);
}

}  // namespace
