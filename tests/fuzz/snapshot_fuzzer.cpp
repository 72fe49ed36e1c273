// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: bytes -> tiered_cache::restore. Input: one control byte, then the candidate
// snapshot. Bit 0 of the control byte recomputes the snapshot's checksum first, so mutated
// values reach the range checks instead of stopping at the checksum. Each input starts from the
// same cache (a fixed stream's state, restored from its own snapshot). Checks:
//   - a rejection is audiokv::error naming "snapshot" and leaves the cache byte-identical
//     (its own snapshot before and after);
//   - an accepted snapshot gives a cache whose positions ascend, whose cells fit capacity(),
//     whose own snapshot equals the input except for the generation, and which plans and
//     applies an eviction (or rejects an impossible target with audiokv::error).
// Any violated invariant aborts, so libFuzzer saves the input as a crash reproducer.
// Seeds (corpus/snapshot_fuzzer/): valid snapshots of that stream at several lengths.
#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace snapshot_fuzz {

using namespace audiokv;
using bytes = std::vector<std::byte>;

[[noreturn]] inline void fail_at(int line, const char* what) {
  std::fprintf(stderr, "snapshot_fuzzer.cpp:%d: invariant violated: %s\n", line, what);
  std::abort();
}
#define SNAPSHOT_CHECK(cond)               \
  do {                                     \
    if (!(cond)) fail_at(__LINE__, #cond); \
  } while (0)

inline audiokv_config fuzz_config() {
  audiokv_config c;
  c.budget = 64;
  c.capacity = 80;
  c.num_speakers = 2;
  c.min_retention_ms = 50.0f;
  c.speech.sinks.enabled = true;
  return c;
}

/// The fixed stream: `steps` frames with sinks, boundaries, segment starts, two speakers and
/// deterministic attention; plan and apply whenever the trigger asks.
inline void drive(tiered_cache<>& cache, std::int32_t steps) {
  eviction_plan plan;
  plan.reserve(cache.capacity());
  std::vector<float> attention;
  std::uint32_t state = 2463534242u;
  for (std::int32_t step = 0; step < steps; ++step) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    frame_meta f{step * 2, static_cast<std::int32_t>((step / 7) % 2),
                 static_cast<float>(state % 5) / 4.0f, frame_flag_none, 0.0f};
    if (step < 2) f.flags |= frame_flag_sink;
    if (state % 11 == 0) f.flags |= frame_flag_phoneme_boundary;
    if (state % 29 == 0) f.flags |= frame_flag_segment_start;
    cache.append(&f, 1);
    attention.assign(cache.num_cells(), 0.0f);
    for (std::int32_t j = 0; j < cache.num_cells(); ++j) {
      attention[j] = static_cast<float>((state >> (j % 24)) % 17 + 1) / 64.0f;
    }
    cache.observe(attention.data(), cache.num_cells());
    if (step % 9 == 0) cache.set_alignment_position(f.pos - 10);
    if (cache.wants_eviction()) {
      cache.plan(plan);
      cache.apply(plan);
    }
  }
}

inline bytes snapshot_of(const tiered_cache<>& cache) {
  bytes out(cache.snapshot_size());
  cache.snapshot(out);
  return out;
}

inline void fix_checksum(bytes& b) {
  std::uint64_t h = 14695981039346656037ull;
  for (std::size_t i = 0; i + 8 < b.size(); ++i) {
    h ^= static_cast<std::uint64_t>(b[i]);
    h *= 1099511628211ull;
  }
  for (std::size_t i = 0; i < 8; ++i) b[b.size() - 8 + i] = static_cast<std::byte>(h >> (8 * i));
}

/// Equal except for the generation (bytes 53..60 of the documented format) and the checksum.
inline bool same_state(const bytes& a, const bytes& b) {
  if (a.size() != b.size() || a.size() < 69) return false;
  for (std::size_t i = 0; i + 8 < a.size(); ++i) {
    if (i >= 53 && i < 61) continue;
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace snapshot_fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace snapshot_fuzz;
  static tiered_cache<> cache(fuzz_config());
  static const bytes base = [] {
    drive(cache, 150);
    return snapshot_of(cache);
  }();
  if (size == 0) return 0;
  cache.restore(base);
  bytes in(size - 1);
  if (size > 1) std::memcpy(in.data(), data + 1, size - 1);
  if ((data[0] & 1) != 0 && in.size() >= 8) fix_checksum(in);
  const bytes before = snapshot_of(cache);
  try {
    cache.restore(in);
  } catch (const error& e) {
    SNAPSHOT_CHECK(e.argument() == "snapshot");
    SNAPSHOT_CHECK(snapshot_of(cache) == before);
    return 0;
  }
  SNAPSHOT_CHECK(cache.num_cells() >= 0 && cache.num_cells() <= cache.capacity());
  for (std::int32_t j = 1; j < cache.num_cells(); ++j) {
    SNAPSHOT_CHECK(cache.positions()[j - 1] < cache.positions()[j]);
  }
  SNAPSHOT_CHECK(same_state(snapshot_of(cache), in));
  eviction_plan plan;
  plan.reserve(cache.capacity());
  // Down to half, or to the cells no plan may evict when they are more.
  const std::int32_t target = cache.num_cells() / 2;
  cache.plan_to(target, plan);
  SNAPSHOT_CHECK(plan.n_kv_after == std::max(target, cache.protected_cells()) ||
                 plan.n_kv_after == cache.num_cells());
  cache.apply(plan);
  SNAPSHOT_CHECK(cache.num_cells() == plan.n_kv_after);
  return 0;
}
