// SPDX-License-Identifier: Apache-2.0
// Hole-filling compaction on the device against its CPU oracle (slot_map::plan for the moves,
// cpu::compact_all_heads / apply_paged_moves for the bytes), and page-granular eviction against
// make_page_granular, over many random inputs. Skips without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/cpu/compact.hpp>
#include <audiokv/cpu/paged.hpp>
#include <audiokv/cuda.cuh>
#include <audiokv/cuda/launch/hole_fill.cuh>
#include <audiokv/cuda/launch/page_granular.cuh>
#include <audiokv/pool/page_granular.hpp>
#include <audiokv/pool/slot_map.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/device_buffer.hpp"

namespace {

namespace cu = audiokv::cuda;

using audiokv::test::has_device;

template <class T>
using dbuf = audiokv::test::device_buffer<T>;

TEST(CudaHoleFill, MovesAndBytesEqualTheCpuOracle) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device: kernel not executed on this machine";
  std::mt19937 rng(17);
  const std::int32_t heads = 3, dim = 8;  // fp16-sized rows: 16 bytes -> the uint4 path
  for (int round = 0; round < 60; ++round) {
    const std::int32_t n = 1 + static_cast<std::int32_t>(rng() % 3000);
    const double p_evict = (rng() % 1000) / 1000.0;
    std::vector<std::uint8_t> keep(n);
    audiokv::eviction_plan plan;
    plan.n_kv_before = n;
    std::int32_t kept = 0;
    for (std::int32_t i = 0; i < n; ++i) {
      keep[i] = (rng() % 1000) / 1000.0 >= p_evict ? 1 : 0;
      plan.move_to.push_back(keep[i] ? kept++ : -1);
      if (!keep[i]) plan.evict.push_back(i);
    }
    plan.n_kv_after = kept;
    audiokv::slot_map map(n);
    map.append(n);  // physical == logical: the mask is the physical keep mask
    audiokv::hole_fill_plan oracle;
    map.plan(plan, oracle);

    std::vector<std::uint16_t> rows(static_cast<std::size_t>(n) * heads * dim);
    for (auto& v : rows) v = static_cast<std::uint16_t>(rng());
    std::vector<std::uint16_t> expected = rows;
    audiokv::cpu::compact_all_heads(audiokv::kv_view<std::uint16_t, audiokv::layout_nhd>(
                                        expected.data(), audiokv::layout_nhd{{n, heads, dim}}),
                                    oracle);

    dbuf<std::uint8_t> d_keep(n);
    d_keep.up(keep);
    dbuf<std::int32_t> d_move(n), d_src(n), d_dst(n), d_count(2);
    const std::size_t ws_bytes = cu::hole_fill_workspace_bytes(n);
    dbuf<unsigned char> ws(ws_bytes);
    ASSERT_EQ(cu::hole_fill_from_mask(d_keep.p, n, d_move.p, d_src.p, d_dst.p, d_count.p,
                                      d_count.p + 1, ws.p, ws_bytes, nullptr),
              cudaSuccess);
    dbuf<std::uint16_t> d_rows(rows.size());
    d_rows.up(rows);
    cu::row_layout layout;
    layout.entry_stride = static_cast<std::int64_t>(heads) * dim * 2;
    layout.head_stride = dim * 2;
    layout.row_bytes = dim * 2;
    layout.num_heads = heads;
    ASSERT_EQ(cu::hole_fill_rows(d_rows.p, layout, d_src.p, d_dst.p, d_count.p, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto counts = d_count.down(2);
    ASSERT_EQ(counts[0], oracle.num_moves()) << "round " << round;
    ASSERT_EQ(counts[1], kept);
    EXPECT_EQ(d_move.down(n), oracle.move_to);
    auto src = d_src.down(n), dst = d_dst.down(n);
    src.resize(counts[0]);
    dst.resize(counts[0]);
    EXPECT_EQ(src, oracle.src);
    EXPECT_EQ(dst, oracle.dst);
    EXPECT_EQ(d_rows.down(rows.size()), expected) << "round " << round;
  }
}

TEST(CudaHoleFill, PagedRowsEqualTheCpuInPlacePlan) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device: kernel not executed on this machine";
  std::mt19937 rng(23);
  const std::int32_t P = 16, heads = 2, dim = 64, num_pages = 40;  // bf16 rows: 128 B
  const std::int64_t row = static_cast<std::int64_t>(dim) * 2;
  const std::int64_t entry = heads * row, page = P * entry;
  for (int round = 0; round < 20; ++round) {
    // One sequence on a shuffled page list.
    std::vector<std::int32_t> all(num_pages);
    for (std::int32_t i = 0; i < num_pages; ++i) all[i] = i;
    std::shuffle(all.begin(), all.end(), rng);
    const std::int32_t np = 1 + static_cast<std::int32_t>(rng() % num_pages);
    const std::vector<std::int32_t> pages(all.begin(), all.begin() + np);
    const std::int32_t last = 1 + static_cast<std::int32_t>(rng() % P);
    const std::int32_t n = (np - 1) * P + last;
    std::vector<std::uint8_t> keep(n);
    audiokv::eviction_plan plan;
    plan.n_kv_before = n;
    std::int32_t kept = 0;
    for (std::int32_t i = 0; i < n; ++i) {
      keep[i] = rng() % 3 != 0 ? 1 : 0;
      plan.move_to.push_back(keep[i] ? kept++ : -1);
    }
    plan.n_kv_after = kept;
    audiokv::slot_map map(n);
    map.append(n);
    audiokv::hole_fill_plan h[1];
    map.plan(plan, h[0]);
    const std::vector<std::int32_t> indptr{0, np}, lastv{last};
    audiokv::cpu::paged_compaction out;
    audiokv::cpu::plan_paged_in_place(pages.data(), indptr.data(), lastv.data(), 1, P,
                                      audiokv::span<const audiokv::hole_fill_plan>(h, 1), out);
    std::vector<unsigned char> pool(static_cast<std::size_t>(num_pages) * page);
    for (auto& b : pool) b = static_cast<unsigned char>(rng());
    std::vector<unsigned char> expected = pool;
    audiokv::cpu::apply_paged_moves(expected.data(), page, entry, row, heads, row, out.moves);

    dbuf<std::uint8_t> d_keep(n);
    d_keep.up(keep);
    dbuf<std::int32_t> d_move(n), d_src(n), d_dst(n), d_count(1), d_pages(np);
    d_pages.up(pages);
    const std::size_t ws_bytes = cu::hole_fill_workspace_bytes(n);
    dbuf<unsigned char> ws(ws_bytes), d_pool(pool.size());
    d_pool.up(pool);
    ASSERT_EQ(cu::hole_fill_from_mask(d_keep.p, n, d_move.p, d_src.p, d_dst.p, d_count.p, nullptr,
                                      ws.p, ws_bytes, nullptr),
              cudaSuccess);
    cu::row_layout layout;
    layout.page_stride = page;
    layout.entry_stride = entry;
    layout.head_stride = row;
    layout.row_bytes = row;
    layout.num_heads = heads;
    ASSERT_EQ(cu::hole_fill_paged_rows(d_pool.p, layout, d_pages.p, P, d_src.p, d_dst.p, d_count.p,
                                       nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(d_count.down(1)[0], h[0].num_moves());
    EXPECT_EQ(d_pool.down(pool.size()), expected) << "round " << round;
  }
}

TEST(CudaPageGranular, KeepMaskEqualsTheCpuRewrite) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device: kernel not executed on this machine";
  std::mt19937 rng(31);
  for (int round = 0; round < 40; ++round) {
    const std::int32_t P = round % 2 == 0 ? 4 : 16;
    // More than one page (make_page_granular rejects P >= n when the plan evicts).
    const std::int32_t n = P + 1 + static_cast<std::int32_t>(rng() % 2000);
    const audiokv::page_score_rule rule =
        round % 3 == 0 ? audiokv::page_score_rule::max : audiokv::page_score_rule::mean;
    // A cell-granular plan evicting e random unprotected cells, with distinct random scores
    // (a protected cell it evicted would be a due cell, which only the host rewrite handles).
    audiokv::eviction_plan plan;
    plan.n_kv_before = n;
    std::vector<std::uint8_t> prot(n);
    std::int32_t kept = 0;
    for (std::int32_t c = 0; c < n; ++c) {
      plan.scores.push_back(static_cast<float>(rng() % 1000000) / 1000.0f);
      prot[c] = rng() % 40 == 0 ? 1 : 0;
      const bool out = rng() % 5 == 0 && prot[c] == 0;
      plan.move_to.push_back(out ? -1 : kept++);
      if (out) plan.evict.push_back(c);
    }
    plan.n_kv_after = kept;
    const auto e = static_cast<std::int32_t>(plan.evict.size());
    audiokv::page_eviction_workspace pws;
    audiokv::make_page_granular(
        plan, P, rule, [&](std::int32_t c) { return prot[c] != 0; }, pws);

    const std::int32_t pages = audiokv::core::pages_for(n, P);
    dbuf<float> d_scores(n), d_page_scores(pages);
    d_scores.up(plan.scores);
    dbuf<std::uint8_t> d_prot(n), d_cand(pages), d_evict(pages), d_keep(n);
    d_prot.up(prot);
    ASSERT_EQ(cu::page_scores(d_scores.p, d_prot.p, n, P, rule, d_page_scores.p, d_cand.p, nullptr),
              cudaSuccess);
    dbuf<std::int32_t> d_k(1);
    d_k.up({audiokv::core::pages_for(e, P)});
    const std::size_t ws_bytes = cu::select_workspace_bytes(1, pages);
    dbuf<unsigned char> ws(ws_bytes);
    ASSERT_EQ(cu::select_lowest(d_page_scores.p, d_cand.p, 1, pages, pages, d_k.p, d_evict.p,
                                nullptr, ws.p, ws_bytes, nullptr),
              cudaSuccess);
    ASSERT_EQ(cu::page_keep_mask(d_evict.p, n, P, d_keep.p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto keep = d_keep.down(n);
    for (std::int32_t c = 0; c < n; ++c)
      ASSERT_EQ(keep[c] != 0, plan.move_to[c] != -1) << "round " << round << " cell " << c;
  }
}

TEST(CudaHoleFill, BadArgumentsAreRejectedBeforeLaunch) {
  // Host-side checks only: no device needed.
  cu::row_layout layout;
  std::int32_t dummy = 0;
  EXPECT_EQ(cu::hole_fill_rows(&dummy, layout, &dummy, &dummy, &dummy, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cu::page_scores(nullptr, nullptr, 4, 2, audiokv::page_score_rule::mean, nullptr,
                            nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cu::page_keep_mask(nullptr, 4, 0, nullptr, nullptr), cudaErrorInvalidValue);
  // Page arithmetic beyond core::max_table_cells (INT32_MAX overflowed (p + 1) * page_size).
  float f = 0.0f;
  std::uint8_t u = 0;
  constexpr std::int32_t kMax = 0x7FFFFFFF;
  EXPECT_EQ(
      cu::page_scores(&f, nullptr, 300, kMax, audiokv::page_score_rule::mean, &f, &u, nullptr),
      cudaErrorInvalidValue);
  EXPECT_EQ(cu::page_keep_mask(&u, 300, kMax, &u, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cu::page_keep_mask(&u, 3, (1 << 30) + 1, &u, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cu::page_keep_mask(&u, (1 << 30) + 1, 1, &u, nullptr), cudaErrorInvalidValue);
  const cu::paged_shape huge{1, 2, 1 << 30};
  EXPECT_EQ(cu::paged_compact(huge, &dummy, &dummy, &dummy, &u, nullptr, 0, &dummy, &dummy, &dummy,
                              &dummy, &dummy, &dummy, nullptr, nullptr, layout, nullptr,
                              ~std::size_t{0}, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cu::hole_fill_from_mask(nullptr, 4, &dummy, &dummy, &dummy, &dummy, nullptr, nullptr, 0,
                                    nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
