// SPDX-License-Identifier: Apache-2.0
// The minimal engine integration: one layer, GQA (8 query heads over 2 KV heads), K/V in
// [kv_heads, cells, head_dim], one AudioKV cache per KV head. Copy the loop body into an engine.
#include <audiokv/eigen.hpp>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  constexpr std::int32_t kQHeads = 8, kKvHeads = 2, kHeadDim = 64, kCapacity = 512;
  audiokv::audiokv_config config;
  config.budget = kCapacity;  // cells per KV head
  config.frame_ms = 40.0f;    // one audio token = 40 ms (Qwen2-Audio)

  // Setup (once): caches, K/V storage, plans and scratch, all sized for the capacity.
  std::vector<audiokv::tiered_cache<>> caches;
  for (int h = 0; h < kKvHeads; ++h) caches.emplace_back(config);
  std::vector<float> k(kKvHeads * kCapacity * kHeadDim), v(k.size());
  std::vector<std::int32_t> n_kv(kKvHeads, 0);  // cells in use per KV head
  std::vector<float> q(kQHeads * kHeadDim), out(q.size()), probs(kQHeads * kCapacity);
  audiokv::eviction_plan plan;
  plan.reserve(kCapacity);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const std::int32_t group = kQHeads / kKvHeads;
  std::int64_t evicted = 0;

  for (std::int32_t step = 0; step < 4000; ++step) {
    // 1. The engine writes this step's K/V row for each KV head and tells the cache about it.
    audiokv::frame_meta frame;
    frame.pos = step;
    frame.voice = (step / 50) % 4 == 3 ? 0.0f : 1.0f;  // host VAD
    if (step == 0) frame.flags = audiokv::frame_flag_sink;
    for (std::int32_t h = 0; h < kKvHeads; ++h) {
      float* k_row = &k[(static_cast<std::size_t>(h) * kCapacity + n_kv[h]) * kHeadDim];
      float* v_row = &v[(static_cast<std::size_t>(h) * kCapacity + n_kv[h]) * kHeadDim];
      for (std::int32_t d = 0; d < kHeadDim; ++d) k_row[d] = normal(rng), v_row[d] = normal(rng);
      caches[h].append(&frame, 1);
      ++n_kv[h];
    }
    for (auto& x : q) x = normal(rng);
    // 2. Attention per KV head over its own cells; the probabilities feed the cache.
    for (std::int32_t h = 0; h < kKvHeads; ++h) {
      const audiokv::layout_hnd layout{{n_kv[h], 1, kHeadDim}};
      const float* k_head = &k[static_cast<std::size_t>(h) * kCapacity * kHeadDim];
      const float* v_head = &v[static_cast<std::size_t>(h) * kCapacity * kHeadDim];
      audiokv::cpu::decode_attention(
          &q[static_cast<std::size_t>(h) * group * kHeadDim],
          audiokv::kv_view<const float, audiokv::layout_hnd>(k_head, layout),
          audiokv::kv_view<const float, audiokv::layout_hnd>(v_head, layout),
          audiokv::cpu::attention_shape{group, 1, kHeadDim, n_kv[h]},
          &out[static_cast<std::size_t>(h) * group * kHeadDim], probs.data());
      caches[h].observe_group(probs.data(), group, n_kv[h]);
      // 3. When the trigger fires: plan, move the engine's K/V rows, then commit the plan.
      if (caches[h].wants_eviction()) {
        caches[h].plan(plan);
        const audiokv::layout_hnd full{{kCapacity, 1, kHeadDim}};
        audiokv::cpu::compact(audiokv::kv_view<float, audiokv::layout_hnd>(
                                  &k[static_cast<std::size_t>(h) * kCapacity * kHeadDim], full),
                              0, plan);
        audiokv::cpu::compact(audiokv::kv_view<float, audiokv::layout_hnd>(
                                  &v[static_cast<std::size_t>(h) * kCapacity * kHeadDim], full),
                              0, plan);
        caches[h].apply(plan);
        n_kv[h] = plan.n_kv_after;
        evicted += static_cast<std::int64_t>(plan.evict.size());
      }
    }
  }
  for (std::int32_t h = 0; h < kKvHeads; ++h) {
    if (caches[h].positions()[0] != 0) return 1;  // the sink survived
    std::printf("kv head %d: %d cells of budget %d, %lld evictions, %lld promotions\n", h, n_kv[h],
                config.budget, static_cast<long long>(caches[h].stats().evictions),
                static_cast<long long>(caches[h].stats().promotions));
  }
  std::printf("decode_step ok: 4000 steps, %lld cells evicted\n", static_cast<long long>(evicted));
  return 0;
}
