// SPDX-License-Identifier: Apache-2.0
// The memory features in one engine loop: one KV head whose K/V rows live in a
// cpu::head_kv_store with shared rows for repeated silence frames and int8 rows for the
// buffer pool, under an AudioKV cache with rate-based prefetch that starts small and
// grows ahead of the stream. Speech frames get fresh K/V; each pause repeats one silence row.
#include <audiokv/audiokv.hpp>
#include <audiokv/cpu/head_kv_store.hpp>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  constexpr std::int32_t kHeadDim = 64, kSteps = 6000;
  audiokv::audiokv_config config;
  config.budget = 1000;
  config.capacity = 128;  // a small start: prefetch() grows it ahead of need
  config.frame_ms = 20.0f;
  config.prefetch.enabled = true;
  audiokv::tiered_cache<> cache(config);

  audiokv::cpu::head_kv_store_config kv;
  kv.cell_capacity = cache.capacity();
  kv.head_dim = kHeadDim;
  kv.share_rows = true;  // exact repeats share one row
  kv.int8_buffer = true;
  kv.full_rows = cache.base_pool_cells() + cache.emergency_pool_cells();
  audiokv::cpu::head_kv_store store(kv);
  audiokv::eviction_plan plan;
  plan.reserve(cache.capacity());

  std::vector<float> k(kHeadDim), v(kHeadDim), q(kHeadDim), out(kHeadDim);
  std::vector<float> probs(cache.capacity());
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  double held = 0.0, dense = 0.0;
  std::int64_t shared = 0, reserved = 0;
  for (std::int32_t step = 0; step < kSteps; ++step) {
    // Speech for 0.6 s, then a 0.4 s pause whose frames are identical (a silence embedding).
    const bool pause = step % 50 >= 30;
    if (!pause || step % 50 == 30) {
      for (std::int32_t d = 0; d < kHeadDim; ++d) k[d] = normal(rng), v[d] = normal(rng);
    }
    for (std::int32_t d = 0; d < kHeadDim; ++d) q[d] = normal(rng);
    const audiokv::frame_meta frame{step, 0, pause ? 0.0f : 1.0f, audiokv::frame_flag_none, 0.0f};

    // The step: append, attend, observe, evict. None of it allocates.
    cache.append(&frame, 1);
    shared += store.append(k.data(), v.data());
    store.attend(q.data(), out.data(), probs.data());
    cache.observe(probs.data(), store.num_cells());
    if (cache.wants_eviction()) {
      cache.plan(plan);
      cache.apply(plan);
      store.apply(plan, cache.tiers());
    }
    held += static_cast<double>(store.kv_bytes() + store.table_bytes());
    dense += static_cast<double>(store.dense_kv_bytes());

    // After the step, off the critical path: reserve ahead of the next steps.
    if (cache.prefetch() > 0) {
      store.reserve(cache.capacity());
      plan.reserve(cache.capacity());
      probs.resize(cache.capacity());
      ++reserved;
    }
  }
  std::printf("cells %d of budget %d, capacity %d after %lld reservations\n", cache.num_cells(),
              config.budget, cache.capacity(), static_cast<long long>(reserved));
  std::printf("rows: %d float + %d int8 for %d cells; %lld frames shared a row\n",
              store.num_rows(audiokv::row_precision::full),
              store.num_rows(audiokv::row_precision::int8), store.num_cells(),
              static_cast<long long>(shared));
  std::printf("K/V held %.0f KiB on average vs %.0f KiB as dense float rows (%.1f%% saved)\n",
              held / kSteps / 1024.0, dense / kSteps / 1024.0, 100.0 * (1.0 - held / dense));
  std::printf("memory_step ok\n");
  return 0;
}
