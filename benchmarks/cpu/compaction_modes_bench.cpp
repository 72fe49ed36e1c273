// SPDX-License-Identifier: Apache-2.0
// Eviction cost of the two compaction modes, stable (time order in memory) and hole-filling
// (pool/slot_map.hpp), beside an Eigen decode-attention step of the same shape, so the share of
// the attention step comes from one run. Shape: 8 KV heads, head_dim 128, one tiered_cache per
// head (budget = cells), K and V in bf16-sized rows, [heads, cells, dim].
//
// One iteration = one steady-state eviction cycle of all 8 heads: plan, compact K and V, apply
// (timed); then the evicted cells are refilled by appends and one observe (not timed). Both
// modes replay the same frames and scores, so they compact the same plans. Counters per cycle:
//   evicted        cells evicted per head (= decode steps between evictions at one frame/step)
//   rows_moved     row copies per head and buffer (K or V)
//   bytes_moved    bytes copied, all heads, K and V
//   compact_us     the K and V row moves of all heads (and the slot map's plan + apply)
//   attention_us   one Eigen decode-attention step (median of 3, measured at setup)
//   amortised_share  (eviction time / evicted) / attention_us: the eviction's cost per decode
//                    step as a fraction of the attention step
// BM_PagedModes: the same for a paged cache (pages of 16 cells): rows copied, spare pages
// needed and pages freed per eviction in each paged mode.
// BM_SlotGather: the per-step cost hole-filling adds (the slot map's gather of each head's
// probabilities into the cache's order), as a share of the attention step.
// Usage: compaction_modes_bench --benchmark_format=json (or --benchmark_out=F
// --benchmark_out_format=json).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <audiokv/cpu/paged.hpp>
#include <audiokv/eigen.hpp>
#include <audiokv/pool/page_granular.hpp>
#include <audiokv/pool/slot_map.hpp>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "attention_step.hpp"
#include "machine.hpp"
#include "synthetic_speech.hpp"

namespace {

constexpr std::int32_t kKvHeads = 8;
constexpr std::int32_t kHeadDim = 128;

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// Median of three Eigen decode-attention steps over `cells` float rows, in microseconds.
double attention_step_us(std::int32_t cells) {
  audiokv::bench::attention_step step(cells, kKvHeads, kHeadDim);
  std::vector<double> t;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = clock_type::now();
    benchmark::DoNotOptimize(step.run());
    t.push_back(seconds_since(t0) * 1e6);
  }
  std::sort(t.begin(), t.end());
  return t[1];
}

void fill_probs(std::vector<float>& p, std::int32_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  double sum = 0;
  for (std::int32_t i = 0; i < n; ++i) sum += (p[i] = u(rng) * u(rng));
  for (std::int32_t i = 0; i < n; ++i) p[i] = static_cast<float>(p[i] / sum);
}

/// state.range(0) = cells (budget), state.range(1) = 0 stable, 1 hole-filling.
void BM_EvictionCycle(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  const bool hole_filling = state.range(1) != 0;
  const double attention_us = attention_step_us(cells);
  audiokv::audiokv_config config;
  config.budget = cells;
  std::vector<audiokv::tiered_cache<>> caches;
  for (int h = 0; h < kKvHeads; ++h) caches.emplace_back(config);
  const std::int32_t capacity = caches[0].capacity();
  std::vector<audiokv::slot_map> maps(kKvHeads, audiokv::slot_map(capacity));
  const audiokv::layout_hnd layout{{capacity, kKvHeads, kHeadDim}};
  std::vector<std::uint16_t> k(static_cast<std::size_t>(layout.required_span_size()));
  std::vector<std::uint16_t> v(k.size());
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = v[i] = static_cast<std::uint16_t>(i * 31u);
  const audiokv::kv_view<std::uint16_t, audiokv::layout_hnd> kv_k(k.data(), layout),
      kv_v(v.data(), layout);
  audiokv::eviction_plan plan;
  plan.reserve(capacity);
  audiokv::hole_fill_plan moves;
  moves.reserve(capacity);
  std::mt19937 rng(11);
  std::vector<float> probs(capacity), physical(capacity);

  // Each head appends the same frames until its own trigger fires (heads evict different
  // counts, so they refill at different times), then observes once.
  std::vector<audiokv::synthetic::speech_stream> streams(kKvHeads,
                                                         audiokv::synthetic::speech_stream(7, 1));
  const auto refill = [&] {
    for (int h = 0; h < kKvHeads; ++h) {
      while (!caches[h].wants_eviction()) {
        const audiokv::frame_meta f = streams[h].next_frame();
        caches[h].append(&f, 1);
        maps[h].append(1);
      }
      const std::int32_t n = caches[h].num_cells();
      fill_probs(physical, n, rng);
      if (hole_filling) {
        maps[h].gather(audiokv::span<const float>(physical.data(), n),
                       audiokv::span<float>(probs.data(), n));
        caches[h].observe(probs.data(), n);
      } else {
        caches[h].observe(physical.data(), n);
      }
    }
  };
  double rows = 0, evicted = 0, compact_s = 0, total_s = 0;
  std::int64_t cycles = 0;
  // One eviction of all heads; returns its wall time and records its counters when asked.
  const auto evict_all = [&](bool record) {
    const auto t0 = clock_type::now();
    double t_compact = 0, t_counting = 0;
    std::int64_t cycle_rows = 0, cycle_evicted = 0;
    for (int h = 0; h < kKvHeads; ++h) {
      caches[h].plan(plan);
      const auto tc = clock_type::now();
      if (hole_filling) {
        maps[h].plan(plan, moves);
        audiokv::cpu::compact(kv_k, h, moves);
        audiokv::cpu::compact(kv_v, h, moves);
        maps[h].apply(plan, moves);
        cycle_rows += moves.num_moves();
      } else {
        audiokv::cpu::compact(kv_k, h, plan);
        audiokv::cpu::compact(kv_v, h, plan);
      }
      t_compact += seconds_since(tc);
      if (!hole_filling) {  // counted outside the timed work
        const auto tk = clock_type::now();
        for (std::int32_t i = 0; i < plan.n_kv_before; ++i)
          cycle_rows += plan.move_to[i] >= 0 && plan.move_to[i] != i;
        t_counting += seconds_since(tk);
      }
      caches[h].apply(plan);
      cycle_evicted += static_cast<std::int64_t>(plan.evict.size());
    }
    const double t_total = seconds_since(t0) - t_counting;
    if (!record) return;
    rows += static_cast<double>(cycle_rows) / kKvHeads;
    evicted += static_cast<double>(cycle_evicted) / kKvHeads;
    compact_s += t_compact;
    total_s += t_total;
    ++cycles;
  };
  // Warm-up: two cycles, so the measured ones start from scattered (steady-state) memory.
  for (int warm = 0; warm < 2; ++warm) {
    refill();
    evict_all(false);
  }
  for (auto _ : state) {
    state.PauseTiming();
    refill();
    state.ResumeTiming();
    evict_all(true);
  }
  const double c = static_cast<double>(std::max<std::int64_t>(cycles, 1));
  state.counters["evicted"] = evicted / c;
  state.counters["rows_moved"] = rows / c;
  state.counters["bytes_moved"] = rows / c * kKvHeads * 2.0 * kHeadDim * sizeof(std::uint16_t);
  state.counters["compact_us"] = compact_s / c * 1e6;
  state.counters["eviction_us"] = total_s / c * 1e6;
  state.counters["attention_us"] = attention_us;
  state.counters["amortised_share"] =
      (total_s / c * 1e6) / std::max(evicted / c, 1.0) / attention_us;
  state.counters["amortised_compact_share"] =
      (compact_s / c * 1e6) / std::max(evicted / c, 1.0) / attention_us;
}

/// Per-step gather of 8 heads' probabilities through their slot maps (hole-filling only).
void BM_SlotGather(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  const double attention_us = attention_step_us(cells);
  std::vector<audiokv::slot_map> maps(kKvHeads, audiokv::slot_map(cells));
  std::mt19937 rng(5);
  for (auto& m : maps) {
    m.append(cells);
    std::vector<bool> keep(cells);
    for (std::int32_t i = 0; i < cells; ++i) keep[i] = rng() % 10 != 0;
    audiokv::eviction_plan p;
    p.n_kv_before = cells;
    std::int32_t kept = 0;
    for (std::int32_t i = 0; i < cells; ++i) p.move_to.push_back(keep[i] ? kept++ : -1);
    p.n_kv_after = kept;
    audiokv::hole_fill_plan h;
    m.plan(p, h);
    m.apply(p, h);
    m.append(cells - kept);
  }
  std::vector<float> physical(cells, 1.0f), logical(cells);
  for (auto _ : state) {
    for (auto& m : maps) m.gather(physical, logical);
    benchmark::DoNotOptimize(logical.data());
  }
  state.counters["attention_us"] = attention_us;
}

/// Paged K/V of one (layer, head) cache in pages of 16 cells, driven by tiered_cache plans:
/// rows copied, spare pages needed and pages freed per eviction for each paged mode
/// (state.range(1)): 0 page-table rule (plan_paged_compaction, spares from the free list),
/// 1 stable inside the sequence's own pages, 2 hole-filling inside its own pages, 3
/// page-granular (make_page_granular, then the page-table rule with no spares). Timed: the
/// planning of the paged moves only (the cache's plan excluded).
void BM_PagedModes(benchmark::State& state) {
  constexpr std::int32_t P = 16;
  const auto cells = static_cast<std::int32_t>(state.range(0));
  const auto mode = state.range(1);
  audiokv::audiokv_config config;
  config.budget = cells;
  audiokv::tiered_cache<> cache(config);
  const std::int32_t capacity = cache.capacity();
  const std::int32_t total_pages = 2 * audiokv::core::pages_for(capacity, P) + 64;
  std::vector<std::int32_t> pages, free_pages;
  for (std::int32_t p = total_pages - 1; p >= 0; --p) free_pages.push_back(p);
  audiokv::slot_map map(capacity);
  audiokv::eviction_plan plan;
  plan.reserve(capacity);
  audiokv::hole_fill_plan holes[1];
  holes[0].reserve(capacity);
  audiokv::cpu::paged_compaction out;
  out.reserve(1, total_pages, P);
  audiokv::cpu::paged_compaction_workspace ws;
  ws.reserve(total_pages, P);
  audiokv::page_eviction_workspace pws;
  pws.reserve(capacity, P);
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(total_pages) * P);
  std::vector<float> probs(capacity);
  audiokv::synthetic::speech_stream stream(7, 1);
  std::mt19937 rng(13);
  double rows = 0, spares = 0, freed = 0, evicted = 0;
  std::int64_t cycles = 0;
  for (auto _ : state) {
    state.PauseTiming();
    while (!cache.wants_eviction()) {
      const audiokv::frame_meta f = stream.next_frame();
      cache.append(&f, 1);
      if (mode == 2) map.append(1);
      if (cache.num_cells() > static_cast<std::int32_t>(pages.size()) * P) {
        pages.push_back(free_pages.back());
        free_pages.pop_back();
      }
    }
    const std::int32_t n = cache.num_cells();
    fill_probs(probs, n, rng);
    cache.observe(probs.data(), n);
    cache.plan(plan);
    if (mode == 3)
      audiokv::make_page_granular(
          plan, P, audiokv::page_score_rule::mean,
          [&](std::int32_t c) { return cache.is_protected(c); }, pws);
    const std::int32_t indptr[2] = {0, static_cast<std::int32_t>(pages.size())};
    const std::int32_t last[1] = {n - (indptr[1] - 1) * P};
    for (std::int32_t c = 0; c < n; ++c) keep[c] = plan.move_to[c] >= 0 ? 1 : 0;
    state.ResumeTiming();
    if (mode == 0 || mode == 3) {
      const bool spare = mode == 0;
      audiokv::cpu::plan_paged_compaction(
          pages.data(), indptr, last, 1, P, keep.data(), spare ? free_pages.data() : nullptr,
          spare ? static_cast<std::int32_t>(free_pages.size()) : 0, out, ws);
    } else if (mode == 1) {
      audiokv::cpu::plan_paged_in_place(pages.data(), indptr, last, 1, P,
                                        audiokv::span<const audiokv::eviction_plan>(&plan, 1), out);
    } else {
      map.plan(plan, holes[0]);
      audiokv::cpu::plan_paged_in_place(pages.data(), indptr, last, 1, P,
                                        audiokv::span<const audiokv::hole_fill_plan>(holes, 1),
                                        out);
    }
    state.PauseTiming();
    if (!out.ok) state.SkipWithError("spare pages short");
    rows += static_cast<double>(out.moves.size());
    spares += out.spare_pages_used;
    freed += static_cast<double>(out.freed_pages.size());
    evicted += static_cast<double>(plan.evict.size());
    ++cycles;
    // The engine adopts the new table: spares it used leave the free list, freed pages join it.
    std::vector<std::uint8_t> in_use(total_pages, 0);
    pages.assign(out.new_indices.begin(), out.new_indices.end());
    for (const std::int32_t p : pages) in_use[p] = 1;
    free_pages.clear();
    for (std::int32_t p = total_pages - 1; p >= 0; --p)
      if (!in_use[p]) free_pages.push_back(p);
    if (mode == 2) map.apply(plan, holes[0]);
    cache.apply(plan);
    state.ResumeTiming();
  }
  const double c = static_cast<double>(std::max<std::int64_t>(cycles, 1));
  state.counters["evicted"] = evicted / c;
  state.counters["rows_moved"] = rows / c;
  state.counters["spare_pages"] = spares / c;
  state.counters["pages_freed"] = freed / c;
}

void sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {4096, 16384, 32768, 131072})
    for (std::int64_t mode : {0, 1}) b->Args({n, mode});
  b->ArgNames({"cells", "hole_filling"});
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_EvictionCycle)->Apply(sizes)->Iterations(4);
BENCHMARK(BM_PagedModes)
    ->ArgsProduct({{4096, 32768}, {0, 1, 2, 3}})
    ->ArgNames({"cells", "mode"})
    ->Iterations(20)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SlotGather)
    ->Arg(4096)
    ->Arg(16384)
    ->Arg(32768)
    ->Arg(131072)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) { return audiokv::bench::run_benchmarks(argc, argv); }
