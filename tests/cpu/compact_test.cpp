// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/audiokv.hpp>
#include <cstring>
#include <random>
#include <vector>

namespace {

using namespace audiokv;

eviction_plan plan_from_keep(const std::vector<bool>& keep) {
  eviction_plan p;
  p.n_kv_before = static_cast<std::int32_t>(keep.size());
  std::int32_t kept = 0;
  for (std::int32_t i = 0; i < p.n_kv_before; ++i) {
    p.move_to.push_back(keep[i] ? kept++ : -1);
    if (!keep[i]) p.evict.push_back(i);
  }
  p.n_kv_after = kept;
  return p;
}

std::vector<bool> random_keep(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<bool> keep(n);
  for (int i = 0; i < n; ++i) keep[i] = rng() % 3 != 0;
  return keep;
}

template <class Layout>
void check_layout(Layout layout, std::int64_t span, bool per_head) {
  const auto& e = layout.extents;
  std::vector<std::uint16_t> data(span), original;
  std::mt19937 rng(9);
  for (auto& v : data) v = static_cast<std::uint16_t>(rng());  // arbitrary bit patterns (fp16/bf16)
  original = data;
  const auto keep = random_keep(e.num_cells, 5);
  const auto plan = plan_from_keep(keep);
  kv_view<std::uint16_t, Layout> view(data.data(), layout);
  kv_view<std::uint16_t, Layout> before(original.data(), layout);
  if (per_head) {
    for (std::int32_t h = 0; h < e.num_heads; ++h) cpu::compact(view, h, plan);
  } else {
    cpu::compact_all_heads(view, plan);
  }
  for (std::int32_t i = 0; i < e.num_cells; ++i) {
    if (plan.move_to[i] < 0) continue;
    for (std::int32_t h = 0; h < e.num_heads; ++h) {
      for (std::int32_t d = 0; d < e.head_dim; ++d) {
        ASSERT_EQ(view(plan.move_to[i], h, d), before(i, h, d)) << i << " " << h << " " << d;
      }
    }
  }
}

TEST(CpuCompact, KeptRowsAreByteIdenticalInEveryLayout) {
  const kv_extents e{37, 3, 8};
  check_layout(layout_nhd{e}, 37 * 3 * 8, false);
  check_layout(layout_nhd{e}, 37 * 3 * 8, true);
  check_layout(layout_hnd{e}, 37 * 3 * 8, true);
  // Padded rows: cell stride 40 instead of 24.
  check_layout(layout_strided{e, 40, 8, 1}, 37 * 40, true);
  // Transposed V: dim-major per head.
  check_layout(layout_strided{e, 1, 37 * 8, 37}, 37 * 3 * 8, true);
}

TEST(CpuCompact, OnlyTheNamedHeadMoves) {
  const kv_extents e{6, 2, 2};
  std::vector<float> data(24);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  const auto original = data;
  const auto plan = plan_from_keep({false, true, false, true, true, true});
  cpu::compact(kv_view<float, layout_hnd>(data.data(), layout_hnd{e}), 1, plan);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(data[i], original[i]);  // head 0 untouched
  EXPECT_EQ(data[12], original[12 + 2]);                         // head 1: cell 1 -> 0
}

}  // namespace
