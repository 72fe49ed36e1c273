// SPDX-License-Identifier: Apache-2.0
// The per-step observe cost of the AudioKV policy beside an Eigen decode-attention step on the
// same shapes (8 KV heads, head_dim 128, one query head per KV head), so the ratios come from one
// run: observe() of one probability row and observe_group() of a GQA group of 4 rows, for all 8
// KV heads; and cpu::eviction_step (the device step's CPU reference) on 8 rows with GQA groups
// of 4, in steady state (one appended cell per step, evicting at its trigger), which reads every
// probability of the step once (importance EMA, with the check of each value folded in).
// Counter ns_per_cell: per cell and per KV head.
#include <benchmark/benchmark.h>

#include <audiokv/cpu/eviction_step.hpp>
#include <audiokv/eigen.hpp>

#include <random>
#include <vector>
#include "attention_step.hpp"
#include "machine.hpp"

namespace {

constexpr std::int32_t kKvHeads = 8;
constexpr std::int32_t kHeadDim = 128;
constexpr std::int32_t kGroup = 4;

/// `rows` rows of `n` probabilities, each row normalised to 1.
std::vector<float> random_rows(std::int32_t rows, std::int32_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> p(static_cast<std::size_t>(rows) * n);
  for (std::int32_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (std::int32_t j = 0; j < n; ++j) sum += (p[r * n + j] = u(rng));
    for (std::int32_t j = 0; j < n; ++j) p[r * n + j] = static_cast<float>(p[r * n + j] / sum);
  }
  return p;
}

std::vector<audiokv::tiered_cache<>> filled_caches(std::int32_t cells) {
  audiokv::audiokv_config config;
  config.budget = cells + cells / 8 + 64;  // cells sit below the trigger: observe only
  std::vector<audiokv::tiered_cache<>> caches;
  std::vector<audiokv::frame_meta> frames(cells);
  for (std::int32_t i = 0; i < cells; ++i) frames[i].pos = i;
  for (int h = 0; h < kKvHeads; ++h) {
    caches.emplace_back(config);
    caches.back().append(frames.data(), cells);
  }
  return caches;
}

void per_cell(benchmark::State& state, std::int32_t cells) {
  state.counters["ns_per_cell"] = benchmark::Counter(
      static_cast<double>(cells) * kKvHeads,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

/// Decode attention of one step: q.K^T, softmax, .V for 8 KV heads ([heads, cells, dim] layout).
void BM_ObsEigenAttention(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  audiokv::bench::attention_step step(cells, kKvHeads, kHeadDim);
  for (auto _ : state) benchmark::DoNotOptimize(step.run());
  per_cell(state, cells);
}

/// observe() of one row for 8 KV heads: validation, EMA, evaluation flag, speaker baselines.
void BM_ObsObserve(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  auto caches = filled_caches(cells);
  const auto probs = random_rows(1, cells, 2);
  for (auto _ : state) {
    for (auto& cache : caches) cache.observe(probs.data(), cells);
    benchmark::ClobberMemory();
  }
  per_cell(state, cells);
}

/// observe_group() of a GQA group of 4 rows (mean) for 8 KV heads.
void BM_ObsObserveGroup4(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  auto caches = filled_caches(cells);
  const auto probs = random_rows(kGroup, cells, 3);
  for (auto _ : state) {
    for (auto& cache : caches) cache.observe_group(probs.data(), kGroup, cells);
    benchmark::ClobberMemory();
  }
  per_cell(state, cells);
}

/// cpu::eviction_step of 8 rows (GQA groups of 4, stable compaction without K/V), after a
/// prefill to the trigger: every iteration is one decode step (append, importance of every
/// cell, and the eviction whenever a row reaches its trigger).
void BM_ObsCpuEvictionStep(benchmark::State& state) {
  const auto capacity = static_cast<std::int32_t>(state.range(0));
  audiokv::eviction_step_config c;
  c.num_kv_heads = kKvHeads;
  c.group = kGroup;
  c.capacity = capacity;
  c.head_dim = kHeadDim;
  c.compaction = audiokv::step_compaction::stable;
  audiokv::cpu::eviction_step<> step(c);
  const auto probs = random_rows(c.prob_rows(), capacity, 4);
  for (std::int32_t i = 0; i < c.trigger_cells(); ++i)
    step.step(probs.data(), capacity, nullptr, nullptr);
  for (auto _ : state) {
    step.step(probs.data(), capacity, nullptr, nullptr);
    benchmark::ClobberMemory();
  }
  per_cell(state, step.live(0));
}

void cell_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {4096, 32768}) b->Arg(n);
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_ObsEigenAttention)->Apply(cell_sizes);
BENCHMARK(BM_ObsObserve)->Apply(cell_sizes);
BENCHMARK(BM_ObsObserveGroup4)->Apply(cell_sizes);
BENCHMARK(BM_ObsCpuEvictionStep)->Arg(4096)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) { return audiokv::bench::run_benchmarks(argc, argv); }
