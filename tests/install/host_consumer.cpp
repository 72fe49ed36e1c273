// SPDX-License-Identifier: Apache-2.0
// A downstream program of the host API alone (no Eigen): one AudioKV cache, one eviction driven
// by uniform attention.
#include <audiokv/audiokv.hpp>
#include <cstdio>
#include <vector>

int main() {
  audiokv::audiokv_config config;
  config.budget = 64;
  audiokv::tiered_cache<> cache(config);
  std::vector<audiokv::frame_meta> frames(60);
  for (int i = 0; i < 60; ++i) frames[i].pos = i;
  cache.append(frames.data(), 60);
  // Two query heads of one group, each attending 1/60 to every cell.
  const std::vector<float> probs(2 * 60, 1.0f / 60.0f);
  cache.observe_group(probs.data(), 2, 60);
  audiokv::eviction_plan plan;
  cache.plan(plan);
  cache.apply(plan);
  if (cache.num_cells() >= cache.trigger_cells()) return 1;
  std::printf("audiokv consumer ok: %d cells kept of 60, version %d\n", cache.num_cells(),
              audiokv::version_number);
  return 0;
}
