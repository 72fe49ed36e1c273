// SPDX-License-Identifier: Apache-2.0
// Per-step observe() cost and per-eviction plan() cost of every registered policy, AudioKV
// included, at 4k-128k cells in one run so the ratios can be read directly. Attention rows are
// fresh random data drawn before timing (8 distinct rows per case, used in rotation), so the
// branch predictor cannot learn one row.
#include <benchmark/benchmark.h>

#include <audiokv/registry.hpp>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace audiokv;

const char* const policy_list[] = {
    "audiokv", "fifo",           "lru",   "streaming_llm", "h2o",
    "snapkv",  "pyramidkv",      "tova",  "knorm",         "observed_attention",
    "adakv",   "uniform_stride", "random"};
constexpr int num_rows = 8;

struct bench_case {
  std::unique_ptr<eviction_policy> policy;
  std::vector<std::vector<float>> rows;  // [num_rows][cells]
  std::mt19937 rng{12345};
};

std::vector<float> random_row(std::int32_t n, std::mt19937& rng) {
  std::vector<float> a(n);
  std::gamma_distribution<float> g(0.3f, 1.0f);
  double sum = 0.0;
  for (float& x : a) sum += (x = g(rng) + 1e-7f);
  for (float& x : a) x = static_cast<float>(x / sum);
  return a;
}

/// A policy holding `cells` cells (budget `budget`), having observed a few rows.
bench_case make_case(const char* name, std::int32_t budget, std::int32_t cells) {
  bench_case c;
  policy_options o;
  o.budget = budget;
  o.capacity = cells + 1;
  o.window = 32;
  o.kernel = 7;
  if (std::string(name) == "audiokv") {
    o.audiokv.budget = budget;
    o.audiokv.capacity = cells + 1;
  }
  c.policy = make_policy(name, o);
  std::vector<frame_meta> frames(cells);
  std::uniform_real_distribution<float> voice(0.0f, 1.0f);
  for (std::int32_t i = 0; i < cells; ++i) frames[i] = frame_meta{i, 0, voice(c.rng), 0, 0.0f};
  const std::int32_t chunk = 4096;
  std::uniform_real_distribution<float> norm(0.5f, 4.0f);
  for (std::int32_t first = 0; first < cells; first += chunk) {
    const std::int32_t count = first + chunk > cells ? cells - first : chunk;
    c.policy->append(frames.data() + first, count);
    if (auto* k = dynamic_cast<knorm*>(c.policy.get())) {
      std::vector<float> norms(count);
      for (float& x : norms) x = norm(c.rng);
      k->set_key_norms(first, norms.data(), count);
    }
  }
  for (int r = 0; r < num_rows; ++r) c.rows.push_back(random_row(cells, c.rng));
  for (int r = 0; r < 4; ++r) c.policy->observe(c.rows[r].data(), cells);
  return c;
}

void bm_observe(benchmark::State& state, const char* name) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  bench_case c = make_case(name, cells, cells);
  int r = 0;
  for (auto _ : state) {
    c.policy->observe(c.rows[r].data(), cells);
    r = (r + 1) % num_rows;
  }
  state.SetItemsProcessed(state.iterations() * cells);
  state.counters["cells"] = cells;
}

void bm_plan(benchmark::State& state, const char* name) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  // Baselines fire at num_cells > budget; AudioKV at 90% of its budget.
  const bool is_audiokv = std::string(name) == "audiokv";
  bench_case c = make_case(name, is_audiokv ? cells : cells - 1, cells);
  if (!c.policy->wants_eviction()) {
    state.SkipWithError("trigger did not fire");
    return;
  }
  eviction_plan plan;
  plan.reserve(cells + 1);
  int r = 0;
  for (auto _ : state) {
    state.PauseTiming();
    c.policy->observe(c.rows[r].data(), cells);  // new scores before every plan
    r = (r + 1) % num_rows;
    state.ResumeTiming();
    c.policy->plan(plan);
    benchmark::DoNotOptimize(plan.evict.data());
  }
  state.SetItemsProcessed(state.iterations() * cells);
  state.counters["evicted"] = static_cast<double>(plan.evict.size());
}

const bool registered = [] {
  for (const char* name : policy_list) {
    benchmark::RegisterBenchmark((std::string("observe/") + name).c_str(), bm_observe, name)
        ->RangeMultiplier(4)
        ->Range(4096, 131072)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("plan/") + name).c_str(), bm_plan, name)
        ->RangeMultiplier(4)
        ->Range(4096, 131072)
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
