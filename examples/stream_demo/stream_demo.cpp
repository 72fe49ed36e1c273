// SPDX-License-Identifier: Apache-2.0
// Streams a long synthetic speech-like score sequence (voiced segments, silences, 3 speakers,
// phoneme boundaries, segment starts, noise bursts) through one AudioKV cache and reports
// budget use, evictions and protection counts.
// Usage: stream_demo [--frames N] [--budget B] [--trace FILE]   (FILE: "frame,cells" CSV, one
// row per 100 frames, for the memory-over-time plot of benchmarks/quality/plot_memory.py)
#include <audiokv/audiokv.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "synthetic_speech.hpp"

int main(int argc, char** argv) {
  long long num_frames = 360000;  // one hour of 10 ms frames
  audiokv::audiokv_config config;
  config.budget = 2000;
  config.num_speakers = 3;
  std::ofstream trace;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--frames") == 0) num_frames = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--budget") == 0) config.budget = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--trace") == 0) trace.open(argv[i + 1]);
  }
  if (trace.is_open()) trace << "frame,cells,budget,trigger\n";
  try {
    audiokv::tiered_cache<> cache(config);
    audiokv::synthetic::speech_stream stream(2026, config.num_speakers);
    audiokv::eviction_plan plan;
    plan.reserve(cache.capacity());
    std::vector<float> attention;
    double occupancy_sum = 0.0;
    long long samples = 0, protected_evicted = 0;
    int peak = 0;
    std::printf("AudioKV stream demo: %lld frames of 10 ms, budget %d cells, trigger at %d\n",
                num_frames, config.budget, cache.trigger_cells());
    for (long long step = 0; step < num_frames; ++step) {
      const audiokv::frame_meta frame = stream.next_frame();
      cache.append(&frame, 1);
      stream.attention(cache.positions(), cache.num_cells(), attention);
      cache.observe(attention.data(), cache.num_cells());
      if (cache.wants_eviction()) {
        cache.plan(plan);
        for (std::int32_t slot : plan.evict) {
          protected_evicted +=
              cache.is_protected(slot) && cache.tiers()[slot] != audiokv::pool_tier::emergency;
        }
        cache.apply(plan);
      }
      peak = cache.num_cells() > peak ? cache.num_cells() : peak;
      if (trace.is_open() && step % 100 == 0) {
        trace << step << ',' << cache.num_cells() << ',' << config.budget << ','
              << cache.trigger_cells() << '\n';
      }
      if (step >= 3LL * config.budget) occupancy_sum += cache.num_cells(), ++samples;
      if ((step + 1) % 60000 == 0 || step + 1 == num_frames) {
        std::printf("  %7.1f s of audio: %5d cells (base %d, buffer %d, emergency %d)\n",
                    (step + 1) * 0.01, cache.num_cells(), cache.pool_size(audiokv::pool_tier::base),
                    cache.pool_size(audiokv::pool_tier::buffer),
                    cache.pool_size(audiokv::pool_tier::emergency));
      }
    }
    const auto& s = cache.stats();
    const double mean = samples > 0 ? occupancy_sum / samples : 0.0;
    std::printf(
        "mean occupancy after warm-up: %.1f cells = %.2f%% of the trigger level, "
        "%.2f%% of the budget; peak %d\n",
        mean, 100.0 * mean / cache.trigger_cells(), 100.0 * mean / config.budget, peak);
    std::printf("evictions: %lld (%lld cells), promotions: %lld, demotions: %lld\n",
                static_cast<long long>(s.evictions), static_cast<long long>(s.cells_evicted),
                static_cast<long long>(s.promotions), static_cast<long long>(s.demotions));
    std::printf(
        "emergency overflow evictions: %lld, drift resets: %lld, "
        "boundary protections released: %lld\n",
        static_cast<long long>(s.emergency_evictions), static_cast<long long>(s.drift_resets),
        static_cast<long long>(s.protections_released));
    std::printf("protected cells evicted: %lld\n", protected_evicted);
    return protected_evicted == 0 ? 0 : 1;
  } catch (const audiokv::error& e) {
    std::fprintf(stderr, "stream_demo: %s\n", e.what());
    return 2;
  }
}
