// SPDX-License-Identifier: Apache-2.0
// No allocation inside a decode step in any compaction mode or plan granularity, with every
// buffer reserved up front (counting global operator new; its own binary): the slot map's
// plan/apply/gather and the hole-filling row moves, the paged planners into reserved results,
// page-granular and per-layer plan rewriting. Also measures a cache's host bytes per cell.
#include <gtest/gtest.h>
#include <malloc.h>

#include <audiokv/audiokv.hpp>
#include <audiokv/cpu/compact.hpp>
#include <audiokv/cpu/paged.hpp>
#include <audiokv/pool/layer_plan.hpp>
#include <audiokv/pool/page_granular.hpp>
#include <audiokv/pool/slot_map.hpp>
#include <audiokv/types/frame_table.hpp>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "common/counting_allocator.hpp"
#include "common/stream.hpp"

namespace {

using namespace audiokv;

TEST(MemoryModesAllocation, HoleFillingStepsNeverAllocate) {
  audiokv_config config;
  config.budget = 300;
  tiered_cache<> cache(config);
  const std::int32_t cap = cache.capacity();
  slot_map map(cap);
  eviction_plan plan;
  plan.reserve(cap);
  hole_fill_plan moves;
  moves.reserve(cap);
  std::vector<std::uint16_t> k(static_cast<std::size_t>(cap) * 2 * 16), v(k.size());
  const kv_view<std::uint16_t, layout_nhd> kv_k(k.data(), layout_nhd{{cap, 2, 16}}),
      kv_v(v.data(), layout_nhd{{cap, 2, 16}});
  std::vector<float> physical(cap), logical(cap);
  test::speech_stream stream(4, 1);
  std::vector<frame_meta> frames(4000);
  for (auto& f : frames) f = stream.next_frame();
  std::int64_t evictions = 0;
  const std::int64_t allocations = test::count_allocations([&] {
    for (const frame_meta& f : frames) {
      cache.append(&f, 1);
      map.append(1);
      const std::int32_t n = cache.num_cells();
      for (std::int32_t s = 0; s < n; ++s) physical[s] = 1.0f / static_cast<float>(n + s);
      map.gather(span<const float>(physical.data(), n), span<float>(logical.data(), n));
      cache.observe(logical.data(), n);
      if (!cache.wants_eviction()) continue;
      cache.plan(plan);
      map.plan(plan, moves);
      cpu::compact_all_heads(kv_k, moves);
      cpu::compact_all_heads(kv_v, moves);
      cache.apply(plan);
      map.apply(plan, moves);
      ++evictions;
    }
  });
  EXPECT_GT(evictions, 5);
  EXPECT_EQ(allocations, 0);
}

TEST(MemoryModesAllocation, PagedPlannersAndRewritersNeverAllocate) {
  constexpr std::int32_t P = 4, kBatch = 3, kPagesPerSeq = 8;
  std::vector<std::int32_t> indices, indptr{0}, last;
  for (std::int32_t b = 0; b < kBatch; ++b) {
    for (std::int32_t p = 0; p < kPagesPerSeq; ++p) indices.push_back(b * kPagesPerSeq + p);
    indptr.push_back(static_cast<std::int32_t>(indices.size()));
    last.push_back(P - b);
  }
  std::vector<std::uint8_t> keep(indices.size() * P);
  for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = i % 3 != 0 ? 1 : 0;
  const std::vector<std::int32_t> spares{100, 101, 102, 103, 104, 105, 106, 107, 108, 109};
  cpu::paged_compaction out;
  out.reserve(kBatch, static_cast<std::int32_t>(indices.size()), P);
  cpu::paged_compaction_workspace ws;
  ws.reserve(kPagesPerSeq, P);
  std::vector<slot_map> maps(kBatch, slot_map(kPagesPerSeq * P));
  std::vector<eviction_plan> logical(kBatch);
  std::vector<hole_fill_plan> holes(kBatch);
  for (std::int32_t b = 0; b < kBatch; ++b) {
    const std::int32_t n = (kPagesPerSeq - 1) * P + last[b];
    maps[b].append(n);
    logical[b].n_kv_before = n;
    std::int32_t kept = 0;
    for (std::int32_t c = 0; c < n; ++c) logical[b].move_to.push_back(c % 3 != 0 ? kept++ : -1);
    logical[b].n_kv_after = kept;
    holes[b].reserve(n);
  }
  // Layer and page rewriting of plans that were reserved.
  std::vector<eviction_plan> heads(2);
  for (auto& h : heads) {
    h.reserve(64);
    for (std::int32_t c = 0; c < 40; ++c) {
      h.move_to.push_back(c < 30 ? c : -1);
      h.scores.push_back(static_cast<float>((c * 7) % 11));
      if (c >= 30) h.evict.push_back(c);
    }
    h.n_kv_before = 40;
    h.n_kv_after = 30;
  }
  layer_plan_workspace lws;
  lws.reserve(64);
  page_eviction_workspace pws;
  pws.reserve(64, P);
  const auto none = [](std::int32_t, std::int32_t) { return false; };
  const std::int64_t allocations = test::count_allocations([&] {
    for (int r = 0; r < 3; ++r) {
      cpu::plan_paged_compaction(indices.data(), indptr.data(), last.data(), kBatch, P, keep.data(),
                                 spares.data(), static_cast<std::int32_t>(spares.size()), out, ws);
      for (std::int32_t b = 0; b < kBatch; ++b) maps[b].plan(logical[b], holes[b]);
      cpu::plan_paged_in_place(indices.data(), indptr.data(), last.data(), kBatch, P,
                               span<const hole_fill_plan>(holes.data(), kBatch), out);
      cpu::plan_paged_in_place(indices.data(), indptr.data(), last.data(), kBatch, P,
                               span<const eviction_plan>(logical.data(), kBatch), out);
      share_layer_plan(span<eviction_plan>(heads.data(), 2), head_reduce::max, none, lws);
      make_page_granular(
          heads[0], P, page_score_rule::mean, [](std::int32_t) { return false; }, pws);
      make_page_granular(
          heads[1], P, page_score_rule::max, [](std::int32_t c) { return c % 5 == 0; }, pws,
          page_protection::cells);
    }
  });
  EXPECT_TRUE(out.ok);
  EXPECT_EQ(allocations, 0);
}

TEST(MemoryModesAllocation, SharedFrameStepsNeverAllocate) {
  // Eight heads of one sequence share a frame table whose ring (512 positions) the stream
  // passes many times, with room below it for all their cells (the union never exceeds 8 x
  // capacity); per-head attention differs, so they keep different cells.
  audiokv_config config;
  config.budget = 300;
  config.num_speakers = 3;
  constexpr std::int32_t kHeads = 8;
  std::vector<tiered_cache<>> heads(kHeads, tiered_cache<>(config));
  auto table = std::make_shared<frame_table>(512, kHeads * heads[0].capacity());
  for (auto& h : heads) h.share_frames(table);
  eviction_plan plan;
  plan.reserve(heads[0].capacity());
  test::speech_stream stream(4, 3);
  std::vector<frame_meta> frames(4000);
  for (auto& f : frames) f = stream.next_frame();
  std::vector<float> probs(static_cast<std::size_t>(heads[0].capacity()));
  std::int64_t evictions = 0;
  const std::int64_t allocations = test::count_allocations([&] {
    for (const frame_meta& f : frames) {
      for (std::int32_t h = 0; h < kHeads; ++h) {
        tiered_cache<>& cache = heads[h];
        cache.append(&f, 1);
        const std::int32_t n = cache.num_cells();
        for (std::int32_t s = 0; s < n; ++s) {
          probs[s] = 1.0f / static_cast<float>(n + ((s * (h + 3)) % 17));
        }
        cache.observe(probs.data(), n);
        if (!cache.wants_eviction()) continue;
        cache.plan(plan);
        cache.apply(plan);
        ++evictions;
      }
    }
  });
  EXPECT_GT(evictions, 5 * kHeads);
  EXPECT_EQ(allocations, 0);
  std::printf("8 heads, capacity %d: peak %d shared rows\n", heads[0].capacity(),
              table->peak_rows());
}

/// Heap bytes in use (glibc: arena chunks plus mmapped chunks).
std::size_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

/// Host bytes held per cell of capacity by one tiered_cache<> and its reserved plan (heap bytes
/// in use before and after building many of them), reported for the record.
TEST(MemoryModesAllocation, HostBytesPerCell) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "mallinfo2 does not see AddressSanitizer's heap";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "mallinfo2 does not see AddressSanitizer's heap";
#endif
#endif
  audiokv_config config;
  config.budget = 4096;
  constexpr int kCaches = 16;
  const std::size_t before = heap_in_use();
  std::vector<tiered_cache<>> caches;
  caches.reserve(kCaches);
  for (int i = 0; i < kCaches; ++i) caches.emplace_back(config);
  const std::size_t with_caches = heap_in_use();
  std::vector<eviction_plan> plans(kCaches);
  for (auto& p : plans) p.reserve(caches[0].capacity());
  const std::size_t with_plans = heap_in_use();
  const double cells = static_cast<double>(caches[0].capacity()) * kCaches;
  const double cache_bytes = static_cast<double>(with_caches - before) / cells;
  const double plan_bytes = static_cast<double>(with_plans - with_caches) / cells;
  std::printf("tiered_cache<>: %.1f B per cell of capacity (%d cells); its reserved plan: %.1f B\n",
              cache_bytes, caches[0].capacity(), plan_bytes);
  EXPECT_GT(cache_bytes, 0.0);
  plans.clear();
  caches.clear();

  // One sequence of 32 layers x 8 KV heads whose caches share one frame table: a ring of
  // 2 x capacity positions, and room for 4 x capacity positions older than the ring (the
  // cells some head keeps for long; the union of the heads' cells is 2.1 x capacity for the
  // four heads of the frame table test, 3.1 x for the eight above).
  constexpr int kLayerHeads = 32 * 8;
  const std::size_t start = heap_in_use();
  std::vector<tiered_cache<>> shared;
  shared.reserve(kLayerHeads);
  for (int i = 0; i < kLayerHeads; ++i) shared.emplace_back(config);
  const std::int32_t capacity = shared[0].capacity();
  auto table = std::make_shared<frame_table>(2 * capacity, 4 * capacity);
  const std::size_t with_table = heap_in_use();
  for (auto& c : shared) c.share_frames(table);
  const std::size_t attached = heap_in_use();
  const double shared_cells = static_cast<double>(capacity) * kLayerHeads;
  // Attaching frees each cache's per-cell metadata arrays and adds its row index.
  const double per_cache = static_cast<double>(attached - start) / shared_cells -
                           static_cast<double>(table->bytes()) / shared_cells;
  const double total = static_cast<double>(attached - start) / shared_cells;
  std::printf(
      "32 x 8 caches sharing one frame table: %.1f B per cell of capacity in each cache, %.1f B "
      "with the table (%zu bytes, a ring of %d positions)\n",
      per_cache, total, table->bytes(), table->window());
  EXPECT_GT(with_table, start);
  EXPECT_LT(total, cache_bytes);
}

}  // namespace
