// SPDX-License-Identifier: Apache-2.0
// A downstream program: one AudioKV cache, one Eigen attention step, one eviction.
#include <audiokv/eigen.hpp>
#include <cstdio>
#include <vector>

int main() {
  audiokv::audiokv_config config;
  config.budget = 64;
  audiokv::tiered_cache<> cache(config);
  std::vector<audiokv::frame_meta> frames(60);
  for (int i = 0; i < 60; ++i) frames[i].pos = i;
  cache.append(frames.data(), 60);
  const audiokv::cpu::attention_shape shape{2, 1, 8, 60};
  std::vector<float> q(16, 0.1f), k(60 * 8), v(60 * 8), out(16), probs(120);
  for (int i = 0; i < 60 * 8; ++i) k[i] = v[i] = 0.01f * static_cast<float>(i % 13);
  const audiokv::layout_hnd layout{{60, 1, 8}};
  audiokv::cpu::decode_attention(
      q.data(), audiokv::kv_view<const float, audiokv::layout_hnd>(k.data(), layout),
      audiokv::kv_view<const float, audiokv::layout_hnd>(v.data(), layout), shape, out.data(),
      probs.data());
  cache.observe_group(probs.data(), 2, 60);
  audiokv::eviction_plan plan;
  cache.plan(plan);
  cache.apply(plan);
  if (cache.num_cells() >= cache.trigger_cells()) return 1;
  std::printf("audiokv consumer ok: %d cells kept of 60, version %d\n", cache.num_cells(),
              audiokv::version_number);
  return 0;
}
