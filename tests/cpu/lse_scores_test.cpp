// SPDX-License-Identifier: Apache-2.0
// LSE scoring on the CPU (cpu/lse_scores.hpp, core/lse.hpp) against a full softmax in double:
// contiguous and paged K (scattered pages, NaN holes), GQA, both LSE bases, both group
// reductions; the fold into policies (observe_lse) and every argument check.
#include <gtest/gtest.h>

#include <audiokv/cpu/lse_scores.hpp>
#include <audiokv/registry.hpp>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/lse_case.hpp"

namespace {

using audiokv::lse_scoring;
using audiokv::core::gqa_reduce;
using audiokv::core::lse_base;
using audiokv::test::lse_case;
using audiokv::test::lse_layout;
using audiokv::test::make_lse_case;

constexpr double kTol = 1e-6;

struct param {
  lse_layout layout;
  lse_base base;
  gqa_reduce mode;
  std::int32_t page_size;
};

std::string name_of(const testing::TestParamInfo<param>& info) {
  const param& p = info.param;
  std::string s = p.layout == lse_layout::contiguous  ? "contiguous"
                  : p.layout == lse_layout::paged_nhd ? "paged_nhd"
                                                      : "paged_hnd";
  s += p.base == lse_base::two ? "_base2" : "_base_e";
  s += p.mode == gqa_reduce::max ? "_max" : "_mean";
  return s + "_P" + std::to_string(p.page_size);
}

class LseScores : public testing::TestWithParam<param> {};

// Probabilities per query head and group scores per KV head equal the double softmax to 1e-6;
// every row sums to 1; cells beyond a sequence's count are left untouched.
TEST_P(LseScores, MatchFullSoftmaxWithGqa) {
  const param p = GetParam();
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const lse_case c = make_lse_case(seed, p.layout, p.base, /*batch=*/3, /*hq=*/8, /*hkv=*/2,
                                     /*dim=*/64, /*capacity=*/37, p.page_size);
    const lse_scoring s = c.scoring(p.mode);
    const float sentinel = -7.0f;
    std::vector<float> scores(static_cast<std::size_t>(c.batch) * c.hkv * c.capacity, sentinel);
    std::vector<float> probs(static_cast<std::size_t>(c.batch) * c.hq * c.capacity, sentinel);
    std::vector<float> mass(static_cast<std::size_t>(c.batch) * c.hq, sentinel);
    audiokv::cpu::lse_scores(s, c.k.data(), static_cast<std::int64_t>(c.k.size()), scores.data(),
                             probs.data(), mass.data());
    const std::int32_t group = c.hq / c.hkv;
    for (std::int32_t b = 0; b < c.batch; ++b) {
      for (std::int32_t r = 0; r < c.hq; ++r) {
        double sum = 0.0;
        for (std::int32_t j = 0; j < c.capacity; ++j) {
          const float got = probs[(static_cast<std::size_t>(b) * c.hq + r) * c.capacity + j];
          if (j >= c.lens[b]) {
            EXPECT_EQ(got, sentinel);
            continue;
          }
          ASSERT_NEAR(got, c.ref(b, r, j), kTol) << "b " << b << " head " << r << " cell " << j;
          sum += got;
        }
        if (c.lens[b] > 0) {
          EXPECT_NEAR(sum, 1.0, 1e-5);
          EXPECT_NEAR(mass[static_cast<std::size_t>(b) * c.hq + r], 1.0, 1e-5);
        }
      }
      for (std::int32_t h = 0; h < c.hkv; ++h) {
        for (std::int32_t j = 0; j < c.capacity; ++j) {
          const float got = scores[(static_cast<std::size_t>(b) * c.hkv + h) * c.capacity + j];
          if (j >= c.lens[b]) {
            EXPECT_EQ(got, sentinel);
            continue;
          }
          double want = 0.0;  // probabilities are >= 0: the identity of both reductions
          for (std::int32_t g = 0; g < group; ++g) {
            const double x = c.ref(b, h * group + g, j);
            want = p.mode == gqa_reduce::max ? std::max(want, x) : want + x / group;
          }
          ASSERT_NEAR(got, want, kTol) << "b " << b << " kv head " << h << " cell " << j;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, LseScores,
    testing::Values(param{lse_layout::contiguous, lse_base::natural, gqa_reduce::mean, 1},
                    param{lse_layout::contiguous, lse_base::two, gqa_reduce::mean, 1},
                    param{lse_layout::contiguous, lse_base::two, gqa_reduce::max, 1},
                    param{lse_layout::paged_nhd, lse_base::two, gqa_reduce::mean, 4},
                    param{lse_layout::paged_nhd, lse_base::natural, gqa_reduce::max, 5},
                    param{lse_layout::paged_nhd, lse_base::two, gqa_reduce::mean, 1},
                    param{lse_layout::paged_hnd, lse_base::two, gqa_reduce::mean, 16},
                    param{lse_layout::paged_hnd, lse_base::natural, gqa_reduce::mean, 3}),
    name_of);

// The two bases are not interchangeable: a base-2 LSE read as natural gives rows that do not sum
// to 1 (which is what observe_lse's mass check catches).
TEST(LseScoresBase, WrongBaseBreaksTheRowMass) {
  lse_case c = make_lse_case(9, lse_layout::contiguous, lse_base::two, 1, 4, 2, 64, 20, 1);
  lse_scoring s = c.scoring();
  s.base = lse_base::natural;
  std::vector<float> mass(4);
  audiokv::cpu::lse_scores(s, c.k.data(), static_cast<std::int64_t>(c.k.size()), nullptr, nullptr,
                           mass.data());
  for (float m : mass) EXPECT_GT(std::fabs(m - 1.0f), 0.05f);
}

// group_fold / group_finish over a group reproduce reduce_group bit for bit.
TEST(LseScoresGroup, FoldEqualsReduceGroup) {
  audiokv::test::xorshift64 rng(3);
  for (gqa_reduce mode : {gqa_reduce::mean, gqa_reduce::max}) {
    for (std::int32_t group : {1, 2, 3, 7}) {
      std::vector<float> a(static_cast<std::size_t>(group) * 5);
      for (float& x : a) x = rng.unit();
      for (std::int64_t j = 0; j < 5; ++j) {
        float acc = 0.0f;
        for (std::int32_t g = 0; g < group; ++g)
          acc = audiokv::core::group_fold(acc, a[static_cast<std::size_t>(g * 5 + j)], g, mode);
        EXPECT_EQ(audiokv::core::group_finish(acc, group, mode),
                  audiokv::core::reduce_group(a.data(), group, 5, j, mode));
      }
    }
  }
}

std::unique_ptr<audiokv::eviction_policy> h2o(std::int32_t cells) {
  audiokv::policy_options o;
  o.budget = 8;
  o.capacity = 64;
  o.recent_size = 2;
  auto p = audiokv::make_policy("h2o", o);
  std::vector<audiokv::frame_meta> frames(static_cast<std::size_t>(cells));
  for (std::int32_t j = 0; j < cells; ++j) frames[j].pos = j;
  p->append(frames.data(), cells);
  return p;
}

// observe_lse feeds each (sequence, KV head) policy exactly what observe_group of the reference
// probabilities would: after several steps, both keep the same cells.
TEST(ObserveLse, FoldsIntoPoliciesLikeObserveGroup) {
  const lse_case c = make_lse_case(21, lse_layout::paged_nhd, lse_base::two, 1, 6, 3, 64, 30, 4);
  const lse_scoring s = c.scoring();
  std::vector<std::unique_ptr<audiokv::eviction_policy>> mine, ref;
  std::vector<audiokv::eviction_policy*> heads;
  for (std::int32_t h = 0; h < c.hkv; ++h) {
    mine.push_back(h2o(c.lens[0]));
    ref.push_back(h2o(c.lens[0]));
    heads.push_back(mine.back().get());
  }
  std::vector<float> ws(audiokv::cpu::observe_lse_workspace_floats(s));
  const std::int32_t group = c.hq / c.hkv;
  std::vector<float> probs(static_cast<std::size_t>(group) * c.capacity);
  for (int step = 0; step < 3; ++step) {
    audiokv::cpu::observe_lse(s, c.k.data(), static_cast<std::int64_t>(c.k.size()), heads.data(),
                              1e-4f, ws.data(), ws.size());
    for (std::int32_t h = 0; h < c.hkv; ++h) {
      for (std::int32_t g = 0; g < group; ++g)
        for (std::int32_t j = 0; j < c.capacity; ++j)
          probs[static_cast<std::size_t>(g) * c.capacity + j] =
              static_cast<float>(c.ref(0, h * group + g, j));
      auto* t = dynamic_cast<audiokv::baseline_policy*>(ref[h].get());
      ASSERT_NE(t, nullptr);
      t->observe_group(probs.data(), group, c.capacity, gqa_reduce::mean);
    }
  }
  for (std::int32_t h = 0; h < c.hkv; ++h) {
    audiokv::eviction_plan a, b;
    mine[h]->plan_to(8, a);
    ref[h]->plan_to(8, b);
    EXPECT_EQ(a.evict, b.evict) << "kv head " << h;
  }
}

// A failed observe_lse changes no policy: the mass check refuses an LSE of the wrong base and a
// policy that holds the wrong number of cells, before any policy observes.
TEST(ObserveLse, RefusesAWrongBaseAndLeavesEveryPolicyUnchanged) {
  const lse_case c = make_lse_case(5, lse_layout::contiguous, lse_base::two, 2, 4, 2, 64, 12, 1);
  lse_scoring s = c.scoring();
  std::vector<std::unique_ptr<audiokv::eviction_policy>> mine, twin;
  std::vector<audiokv::eviction_policy*> heads;
  for (std::int32_t b = 0; b < c.batch; ++b)
    for (std::int32_t h = 0; h < c.hkv; ++h) {
      mine.push_back(h2o(c.lens[b]));
      twin.push_back(h2o(c.lens[b]));
      heads.push_back(mine.back().get());
    }
  std::vector<float> ws(audiokv::cpu::observe_lse_workspace_floats(s));
  s.base = lse_base::natural;
  try {
    audiokv::cpu::observe_lse(s, c.k.data(), static_cast<std::int64_t>(c.k.size()), heads.data(),
                              1e-3f, ws.data(), ws.size());
    FAIL() << "a base-2 LSE declared natural must be refused";
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "lse[0]");
  }
  s.base = lse_base::two;
  // Same observation on both sets: equal plans show the failed call left no trace.
  std::vector<audiokv::eviction_policy*> twins;
  for (auto& p : twin) twins.push_back(p.get());
  audiokv::cpu::observe_lse(s, c.k.data(), static_cast<std::int64_t>(c.k.size()), heads.data(),
                            1e-4f, ws.data(), ws.size());
  audiokv::cpu::observe_lse(s, c.k.data(), static_cast<std::int64_t>(c.k.size()), twins.data(),
                            1e-4f, ws.data(), ws.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    audiokv::eviction_plan a, b;
    mine[i]->plan_to(4, a);
    twin[i]->plan_to(4, b);
    EXPECT_EQ(a.evict, b.evict);
  }
  // A policy holding other cells than the sequence is refused before anything observes.
  auto extra = h2o(c.lens[1] + 1);
  heads[3] = extra.get();
  try {
    audiokv::cpu::observe_lse(s, c.k.data(), static_cast<std::int64_t>(c.k.size()), heads.data(),
                              1e-4f, ws.data(), ws.size());
    FAIL() << "a policy with the wrong cell count must be refused";
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), "policies[3].num_cells()");
  }
}

// Every argument is checked before anything is written; the error names it.
TEST(LseScoresValidation, NamesEachBadArgument) {
  const lse_case base_case =
      make_lse_case(2, lse_layout::paged_nhd, lse_base::two, 2, 4, 2, 64, 10, 4);
  auto expect_bad = [&](const char* argument, auto mutate) {
    lse_case c = base_case;
    lse_scoring s = c.scoring();
    std::int64_t k_elements = static_cast<std::int64_t>(c.k.size());
    const float* k = c.k.data();
    mutate(c, s, k_elements, k);
    std::vector<float> scores(static_cast<std::size_t>(c.batch) * c.hkv * c.capacity, -3.0f);
    try {
      audiokv::cpu::lse_scores(s, k, k_elements, scores.data());
      ADD_FAILURE() << "expected an error naming " << argument;
    } catch (const audiokv::error& e) {
      EXPECT_EQ(e.argument(), argument) << e.what();
    }
    for (float x : scores) ASSERT_EQ(x, -3.0f) << "nothing is written on error";
  };
  using K = const float*;
  expect_bad("base", [](lse_case&, lse_scoring& s, std::int64_t&, K&) { s.base = {}; });
  expect_bad("scale", [](lse_case&, lse_scoring& s, std::int64_t&, K&) { s.scale = 0.0f; });
  expect_bad("scale", [](lse_case&, lse_scoring& s, std::int64_t&, K&) { s.scale = NAN; });
  expect_bad("mode", [](lse_case&, lse_scoring& s, std::int64_t&, K&) {
    s.mode = static_cast<gqa_reduce>(9);
  });
  expect_bad("batch", [](lse_case&, lse_scoring& s, std::int64_t&, K&) { s.batch = -1; });
  expect_bad("shape.num_q_heads",
             [](lse_case&, lse_scoring& s, std::int64_t&, K&) { s.shape.num_q_heads = 3; });
  expect_bad("q", [](lse_case&, lse_scoring& s, std::int64_t&, K&) { s.q = nullptr; });
  expect_bad("lse", [](lse_case&, lse_scoring& s, std::int64_t&, K&) { s.lse = nullptr; });
  expect_bad("lse[1]", [](lse_case& c, lse_scoring& s, std::int64_t&, K&) {
    c.lse[1] = INFINITY;
    s.lse = c.lse.data();
  });
  expect_bad("q[5]", [](lse_case& c, lse_scoring& s, std::int64_t&, K&) {
    c.q[5] = NAN;
    s.q = c.q.data();
  });
  expect_bad("row_stride", [](lse_case&, lse_scoring& s, std::int64_t&, K&) { s.row_stride = 9; });
  expect_bad("kv.entry_stride",
             [](lse_case&, lse_scoring& s, std::int64_t&, K&) { s.kv.entry_stride = 0; });
  expect_bad("kv.page_size",
             [](lse_case&, lse_scoring& s, std::int64_t&, K&) { s.kv.page_size = 0; });
  expect_bad("kv.last_page_len",
             [](lse_case&, lse_scoring& s, std::int64_t&, K&) { s.kv.last_page_len = nullptr; });
  expect_bad("kv.seq_lens",
             [](lse_case& c, lse_scoring& s, std::int64_t&, K&) { s.kv.seq_lens = c.lens.data(); });
  expect_bad("last_page_len[0]", [](lse_case& c, lse_scoring& s, std::int64_t&, K&) {
    c.last_page_len[0] = 5;
    s.kv.last_page_len = c.last_page_len.data();
  });
  expect_bad("indptr[1]", [](lse_case& c, lse_scoring& s, std::int64_t&, K&) {
    c.indptr[1] = -1;
    s.kv.indptr = c.indptr.data();
  });
  expect_bad("kv.indices[0]", [](lse_case& c, lse_scoring& s, std::int64_t&, K&) {
    c.indices[0] = 1000;
    s.kv.indices = c.indices.data();
  });
  expect_bad("kv.indices[0]", [](lse_case& c, lse_scoring& s, std::int64_t&, K&) {
    c.indices[0] = -2;
    s.kv.indices = c.indices.data();
  });
  expect_bad("kv.indptr[1]",
             [](lse_case&, lse_scoring& s, std::int64_t&, K&) { s.shape.num_cells = 5; });
  expect_bad("kv.indices[0]", [](lse_case&, lse_scoring&, std::int64_t& n, K&) { n = 10; });
  expect_bad("k", [](lse_case&, lse_scoring&, std::int64_t&, K& k) { k = nullptr; });
}

TEST(LseScoresValidation, ContiguousCountsAndOutputs) {
  lse_case c = make_lse_case(4, lse_layout::contiguous, lse_base::natural, 2, 4, 4, 64, 10, 1);
  lse_scoring s = c.scoring();
  const auto n = static_cast<std::int64_t>(c.k.size());
  std::vector<float> out(static_cast<std::size_t>(c.batch) * c.hkv * c.capacity);
  auto argument_of = [&](const lse_scoring& call, std::int64_t k_elements, float* scores) {
    try {
      audiokv::cpu::lse_scores(call, c.k.data(), k_elements, scores);
    } catch (const audiokv::error& e) {
      return e.argument();
    }
    return std::string("no error");
  };
  EXPECT_EQ(argument_of(s, n, nullptr), "scores");
  c.lens[1] = c.capacity;  // its last row ends the tensor
  EXPECT_EQ(argument_of(s, n, out.data()), "no error");
  EXPECT_EQ(argument_of(s, n - 1, out.data()), "kv.seq_lens[1]");
  c.lens[1] = -1;
  EXPECT_EQ(argument_of(s, n, out.data()), "kv.seq_lens[1]");
  c.lens[1] = 11;
  EXPECT_EQ(argument_of(s, n, out.data()), "kv.seq_lens[1]");
  c.lens[1] = 3;
  lse_scoring t = s;
  t.kv.seq_lens = nullptr;
  EXPECT_EQ(argument_of(t, n, out.data()), "kv.seq_lens");
  t = s;
  t.kv.seq_stride = 0;
  EXPECT_EQ(argument_of(t, n, out.data()), "kv.seq_stride");
  t = s;
  t.kv.head_stride = 0;
  EXPECT_EQ(argument_of(t, n, out.data()), "kv.head_stride");
  EXPECT_EQ(argument_of(s, n, out.data()), "no error");
}

}  // namespace
