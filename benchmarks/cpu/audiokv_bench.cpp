// SPDX-License-Identifier: Apache-2.0
// Per-step and per-eviction cost of the AudioKV policy beside an Eigen decode-attention step on
// the same shapes (8 KV heads, head_dim 128, one query head per KV head), so overhead ratios come
// from one run. Counters: cells_per_s; ns_per_cell where it is the target unit.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <audiokv/eigen.hpp>
#include <audiokv/policy/detail/radix_select.hpp>

#include <random>
#include <vector>
#include "attention_step.hpp"
#include "machine.hpp"

namespace {

constexpr std::int32_t kKvHeads = 8;
constexpr std::int32_t kHeadDim = 128;

std::vector<float> random_probs(std::int32_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> p(n);
  double sum = 0;
  for (auto& v : p) sum += (v = u(rng));
  for (auto& v : p) v = static_cast<float>(v / sum);
  return p;
}

audiokv::audiokv_config config_for(std::int32_t cells) {
  audiokv::audiokv_config c;
  c.budget = cells + cells / 8 + 64;  // cells sit below the trigger: observe only
  return c;
}

std::vector<audiokv::tiered_cache<>> filled_caches(std::int32_t cells,
                                                   const audiokv::audiokv_config& config) {
  std::vector<audiokv::tiered_cache<>> caches;
  std::vector<audiokv::frame_meta> frames(cells);
  for (std::int32_t i = 0; i < cells; ++i) frames[i].pos = i;
  for (int h = 0; h < kKvHeads; ++h) {
    caches.emplace_back(config);
    caches.back().append(frames.data(), cells);
  }
  return caches;
}

/// Decode attention of one step: q.K^T, softmax, .V for 8 KV heads ([heads, cells, dim] layout).
void BM_EigenDecodeAttention(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  audiokv::bench::attention_step step(cells, kKvHeads, kHeadDim);
  for (auto _ : state) benchmark::DoNotOptimize(step.run());
  state.counters["cells_per_s"] = benchmark::Counter(static_cast<double>(cells) * kKvHeads,
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

/// One decode step's observe() for 8 KV heads: EMA, speaker baselines, drift check.
void BM_AudiokvObserve(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  auto caches = filled_caches(cells, config_for(cells));
  const auto probs = random_probs(cells, 2);
  for (auto _ : state) {
    for (auto& cache : caches) cache.observe(probs.data(), cells);
    benchmark::ClobberMemory();
  }
  state.counters["cells_per_s"] = benchmark::Counter(static_cast<double>(cells) * kKvHeads,
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

/// A full eviction for 8 KV heads: smoothing, protection, ratio, promotion, selection and plan,
/// then K and V compaction (bf16-sized rows). The caches are rebuilt outside the timed region.
void BM_AudiokvEviction(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  audiokv::audiokv_config config;
  config.budget = cells;
  const std::int32_t filled = config.trigger_cells();
  std::vector<std::uint16_t> k(static_cast<std::size_t>(kKvHeads) * cells * kHeadDim), v(k.size());
  audiokv::eviction_plan plan;
  plan.reserve(cells);
  unsigned seed = 3;
  for (auto _ : state) {
    state.PauseTiming();
    auto caches = filled_caches(filled, config);
    const auto probs = random_probs(filled, seed++);
    for (auto& cache : caches) cache.observe(probs.data(), filled);
    state.ResumeTiming();
    for (std::int32_t h = 0; h < kKvHeads; ++h) {
      caches[h].plan(plan);
      const audiokv::layout_hnd layout{{cells, kKvHeads, kHeadDim}};
      audiokv::cpu::compact(audiokv::kv_view<std::uint16_t, audiokv::layout_hnd>(k.data(), layout),
                            h, plan);
      audiokv::cpu::compact(audiokv::kv_view<std::uint16_t, audiokv::layout_hnd>(v.data(), layout),
                            h, plan);
      caches[h].apply(plan);
    }
  }
  state.counters["cells_per_s"] = benchmark::Counter(static_cast<double>(filled) * kKvHeads,
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

/// The W = 5 median over fresh data; target <= 1 ns per cell.
void BM_Median5(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  auto in = random_probs(cells, 4);
  std::vector<float> out(cells);
  const audiokv::median_stage<5> median;
  for (auto _ : state) {
    median.apply(in.data(), out.data(), cells, {});
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["ns_per_cell"] =
      benchmark::Counter(static_cast<double>(cells), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

/// Selection of the 10% lowest (score, slot) cells as the policy does it: the radix select of
/// detail/radix_select.hpp over ascending candidate slots. Fresh scores every iteration.
void BM_SelectLowest(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  std::vector<std::int32_t> slots(cells);
  for (std::int32_t i = 0; i < cells; ++i) slots[i] = i;
  std::vector<std::uint32_t> bits(cells);
  std::vector<std::uint8_t> mask(cells);
  std::vector<float> scores;
  unsigned seed = 5;
  for (auto _ : state) {
    state.PauseTiming();
    scores = random_probs(cells, seed++);
    std::fill(mask.begin(), mask.end(), 0);
    state.ResumeTiming();
    audiokv::policy::detail::radix_select_lowest(scores.data(), slots.data(), cells, cells / 10,
                                                 bits.data(), mask.data());
    benchmark::DoNotOptimize(mask.data());
  }
}

/// std::nth_element on the floats alone (fresh data every iteration): the reference the
/// selection must not trail.
void BM_NthElementFloats(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  std::vector<float> work;
  const std::int32_t k = cells / 10;
  unsigned seed = 5;
  for (auto _ : state) {
    state.PauseTiming();
    work = random_probs(cells, seed++);
    state.ResumeTiming();
    std::nth_element(work.begin(), work.begin() + k, work.end());
    benchmark::DoNotOptimize(work.data());
  }
}

void cell_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {1024, 4096, 32768, 131072}) b->Arg(n);
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_EigenDecodeAttention)->Apply(cell_sizes);
BENCHMARK(BM_AudiokvObserve)->Apply(cell_sizes);
BENCHMARK(BM_AudiokvEviction)->Apply(cell_sizes)->Iterations(5);
BENCHMARK(BM_Median5)->Apply(cell_sizes);
BENCHMARK(BM_SelectLowest)->Apply(cell_sizes);
BENCHMARK(BM_NthElementFloats)->Apply(cell_sizes);

}  // namespace

int main(int argc, char** argv) { return audiokv::bench::run_benchmarks(argc, argv); }
