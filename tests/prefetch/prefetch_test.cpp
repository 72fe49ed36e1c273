// SPDX-License-Identifier: Apache-2.0
// Prefetch through tiered_cache: a bursty stream (speech runs and pauses; the frames of a
// pause arrive in one burst at the next decode step, 0..40 frames per step) driven as an engine
// drives it: per step append, observe, and plan + apply when wants_eviction(); after the step,
// prefetch(). A counting global operator new shows that the steps never allocate and that
// prefetch() is the only place that does; controls show that the same stream overflows a
// static capacity; reserve() preserves everything and prefetch never changes a decision.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/counting_allocator.hpp"
#include "common/stream.hpp"
#include "common/xorshift.hpp"

namespace {

using namespace audiokv;
using test::count_allocations;

/// Speech in runs of 5-40 decode steps; inside a run each step brings 0-14 voiced frames (a step
/// may emit a token without new audio); between runs a pause of 10-26 silent frames, which
/// arrives together with the 14 voiced frames of the next run's first step: bursts of 24-40
/// frames. Allocation-free and deterministic (xorshift64*).
class bursty_stream {
 public:
  static constexpr std::int32_t max_step_frames = 40;

  explicit bursty_stream(std::uint64_t seed) : rng_(seed) {}

  /// Writes this step's frames and their content weights; returns their count (0..40).
  std::int32_t next_step(frame_meta* frames, float* weights) {
    std::int32_t count = 0;
    if (--run_left_ <= 0) {
      run_left_ = rng_.range(5, 40);
      const std::int32_t silence = rng_.range(10, 26);
      for (std::int32_t i = 0; i < silence; ++i) {
        frames[count] = frame_meta{pos_++, 0, 0.0f, frame_flag_none, 0.0f};
        weights[count++] = 0.05f * rng_.unit();
      }
      onset_ = true;
    }
    const std::int32_t voiced = onset_ ? 14 : rng_.range(0, 14);
    for (std::int32_t i = 0; i < voiced; ++i) {
      frame_meta f{pos_++, 0, 1.0f, frame_flag_none, 0.0f};
      if (onset_) f.flags |= frame_flag_segment_start;
      if (rng_.unit() < 0.02f) f.flags |= frame_flag_phoneme_boundary;
      onset_ = false;
      frames[count] = f;
      weights[count++] = 0.5f + rng_.unit();
    }
    return count;
  }

  /// attention[j] over cached cells with positions pos[j] and content weights weight[j].
  void attention(const std::int32_t* pos, const float* weight, std::int32_t n, float* out) {
    double sum = 0.0;
    for (std::int32_t j = 0; j < n; ++j) {
      const float age = static_cast<float>(pos_ - pos[j]);
      out[j] = weight[j] * (0.2f + 1.0f / (1.0f + 0.01f * age)) * (0.5f + rng_.unit());
      sum += out[j];
    }
    for (std::int32_t j = 0; j < n; ++j) out[j] = static_cast<float>(out[j] / sum);
  }

 private:
  test::xorshift64 rng_;
  std::int32_t pos_ = 0;
  std::int32_t run_left_ = 0;
  bool onset_ = false;
};

/// FNV-1a over every field of a plan (float fields by their bits).
std::uint64_t digest(const eviction_plan& p) {
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](const void* data, std::size_t bytes) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const auto* v : {&p.evict, &p.move_to, &p.promote, &p.demote}) {
    const std::size_t size = v->size();
    mix(&size, sizeof size);
    mix(v->data(), size * sizeof(std::int32_t));
  }
  mix(&p.n_kv_before, sizeof p.n_kv_before);
  mix(&p.n_kv_after, sizeof p.n_kv_after);
  mix(&p.ratio, sizeof p.ratio);
  mix(&p.normalized_entropy, sizeof p.normalized_entropy);
  mix(&p.protections_released, sizeof p.protections_released);
  mix(&p.generation, sizeof p.generation);
  return h;
}

constexpr std::int32_t kBudget = 256;
constexpr std::int32_t kSteps = 4000;
constexpr std::uint64_t kSeed = 20260413;

audiokv_config stream_config(bool prefetch, std::int32_t capacity) {
  audiokv_config config;
  config.budget = kBudget;
  config.capacity = capacity;
  config.frame_ms = 20.0f;
  config.prefetch.enabled = prefetch;
  return config;
}

/// What one run of the stream did.
struct run_result {
  std::int64_t step_allocations = 0;       // inside steps (append/observe/plan/apply, misses)
  std::int64_t late_step_allocations = 0;  // the same, after the warm-up
  std::int64_t misses = 0;                 // steps whose frames did not fit: grown inside the step
  std::int64_t late_misses = 0;            // the same, after the warm-up
  std::int64_t prefetch_allocations = 0;   // inside prefetch()
  std::int64_t idle_prefetch_allocations = 0;  // inside prefetch() calls that returned 0
  std::int64_t growths = 0;                    // prefetch() calls that returned > 0
  std::int32_t max_step_frames = 0;
  std::int32_t max_cells_after_append = 0;
  std::vector<std::uint64_t> plans;  // digest of each applied plan, in order
};

/// Steps before the forecast has seen the stream's bursts (its first ~10 pauses).
constexpr std::int32_t kWarmUp = 500;

/// The engine loop: the K/V side is a per-slot weight array compacted with every plan. Arrays
/// the engine owns grow after a prefetch() that grew the cache, outside the counted step. With
/// `grow_on_miss`, a step whose frames do not fit grows everything inside the step (counted, a
/// miss of the forecast); without it the append throws.
run_result run_stream(tiered_cache<>& cache, std::int32_t steps, bool call_prefetch,
                      bool grow_on_miss = true) {
  run_result r;
  bursty_stream stream(kSeed);
  std::vector<frame_meta> step_frames(bursty_stream::max_step_frames);
  std::vector<float> step_weights(bursty_stream::max_step_frames);
  std::vector<float> weight(cache.capacity()), attention(cache.capacity());
  eviction_plan plan;
  plan.reserve(cache.capacity());
  r.plans.reserve(steps);
  for (std::int32_t step = 0; step < steps; ++step) {
    bool evicted = false, missed = false;
    std::int32_t count = 0;
    const std::int64_t allocations = count_allocations([&] {
      count = stream.next_step(step_frames.data(), step_weights.data());
      const std::int32_t first = cache.num_cells();
      if (grow_on_miss && first + count > cache.capacity()) {
        missed = true;
        cache.reserve(first + count);
        weight.resize(cache.capacity());
        attention.resize(cache.capacity());
        plan.reserve(cache.capacity());
      }
      cache.append(step_frames.data(), count);
      for (std::int32_t i = 0; i < count; ++i) weight[first + i] = step_weights[i];
      r.max_cells_after_append = std::max(r.max_cells_after_append, cache.num_cells());
      stream.attention(cache.positions(), weight.data(), cache.num_cells(), attention.data());
      cache.observe(attention.data(), cache.num_cells());
      if (cache.wants_eviction()) {
        cache.plan(plan);
        for (std::int32_t i = 0; i < plan.n_kv_before; ++i) {
          if (plan.move_to[i] >= 0) weight[plan.move_to[i]] = weight[i];
        }
        cache.apply(plan);
        evicted = true;
      }
    });
    const bool late = step >= kWarmUp;
    r.step_allocations += allocations;
    r.late_step_allocations += late ? allocations : 0;
    r.misses += missed;
    r.late_misses += late && missed;
    r.max_step_frames = std::max(r.max_step_frames, count);
    if (evicted) r.plans.push_back(digest(plan));
    if (!call_prefetch) continue;
    std::int32_t grown = 0;
    const std::int64_t in_prefetch = count_allocations([&] { grown = cache.prefetch(); });
    r.prefetch_allocations += in_prefetch;
    if (grown == 0) {
      r.idle_prefetch_allocations += in_prefetch;
      continue;
    }
    ++r.growths;
    weight.resize(cache.capacity());
    attention.resize(cache.capacity());
    plan.reserve(cache.capacity());
  }
  return r;
}

/// Runs `f` and returns the argument() of the audiokv::error it throws ("" if none).
std::string error_argument(const std::function<void()>& f) {
  try {
    f();
  } catch (const audiokv::error& e) {
    return e.argument();
  }
  return "";
}

// ---- the counting allocator is live ----

std::vector<int>* volatile g_escape = nullptr;

TEST(Prefetch, CountingAllocatorCounts) {
  const std::int64_t n = count_allocations([] { g_escape = new std::vector<int>(100); });
  delete g_escape;
  EXPECT_EQ(n, 2);  // the vector object and its buffer
}

// ---- the stream with prefetch on, from a small capacity ----

TEST(Prefetch, BurstyStreamNeverAllocatesInsideSteps) {
  tiered_cache<> cache(stream_config(true, 64));
  const run_result r = run_stream(cache, kSteps, /*call_prefetch=*/true);
  const prefetch_config& pc = cache.config().prefetch;
  std::printf(
      "prefetch: %d steps, max %d frames/step, max %d cells after append; capacity 64 -> %d in "
      "%lld reservations; %lld allocations in prefetch(), %lld in steps (%lld after warm-up); "
      "%lld misses (%lld after warm-up); %lld evictions\n",
      kSteps, r.max_step_frames, r.max_cells_after_append, cache.capacity(),
      static_cast<long long>(cache.stats().reservations),
      static_cast<long long>(r.prefetch_allocations), static_cast<long long>(r.step_allocations),
      static_cast<long long>(r.late_step_allocations), static_cast<long long>(r.misses),
      static_cast<long long>(r.late_misses), static_cast<long long>(cache.stats().evictions));

  EXPECT_EQ(r.late_step_allocations, 0) << "a decode step allocated after the warm-up";
  EXPECT_EQ(r.late_misses, 0);
  EXPECT_EQ(r.step_allocations, 0) << "the default forecast missed during the warm-up";
  EXPECT_GT(r.prefetch_allocations, 0) << "prefetch() never grew the cache";
  EXPECT_EQ(r.idle_prefetch_allocations, 0) << "prefetch() allocated without growing";
  EXPECT_EQ(r.growths + r.misses, cache.stats().reservations);
  // The stream reaches its largest bursts and the trigger; the cache grew past its initial
  // capacity and past the budget (a burst on a cache just under the trigger exceeds it).
  EXPECT_EQ(r.max_step_frames, bursty_stream::max_step_frames);
  EXPECT_GT(cache.stats().evictions, 100);
  EXPECT_GT(r.max_cells_after_append, kBudget);
  EXPECT_GT(cache.capacity(), kBudget);
  // ... but never beyond what the largest burst asks for: cells after a step <= trigger - 1,
  // and the allowance <= 40 (1 + margin).
  const std::int32_t bound = core::round_up_cells(
      cache.trigger_cells() - 1 +
          core::ceil_to_cells(bursty_stream::max_step_frames * (1.0 + pc.margin)),
      pc.granularity);
  EXPECT_LE(cache.capacity(), bound);
  EXPECT_EQ(cache.capacity() % pc.granularity, 0);
  EXPECT_LE(cache.stats().reservations, 8) << "granularity should keep reserve() calls rare";
}

// ---- controls: without prefetch the same stream overflows ----

TEST(Prefetch, ControlWithoutPrefetchHitsTheCapacityError) {
  // Prefetch off: the smallest static capacity it accepts is the budget, and the stream's
  // bursts on a cache just under the trigger overflow it.
  tiered_cache<> off(stream_config(false, 0));
  ASSERT_EQ(off.capacity(), kBudget);
  EXPECT_EQ(error_argument([&] { run_stream(off, kSteps, true, /*grow_on_miss=*/false); }),
            "count");
  EXPECT_EQ(off.stats().reservations, 0);
  EXPECT_EQ(off.capacity(), kBudget);

  // Prefetch on from capacity 64 but prefetch() never called: the warm-up overflows it.
  tiered_cache<> never(stream_config(true, 64));
  EXPECT_EQ(error_argument([&] { run_stream(never, kSteps, false, false); }), "count");
  EXPECT_EQ(never.capacity(), 64);
}

TEST(Prefetch, OffDoesNothing) {
  tiered_cache<> cache(stream_config(false, 1024));
  const run_result r = run_stream(cache, 500, true);  // prefetch() called every step
  EXPECT_EQ(r.prefetch_allocations, 0);
  EXPECT_EQ(r.growths, 0);
  EXPECT_EQ(r.misses, 0);
  EXPECT_EQ(cache.capacity(), 1024);
  EXPECT_EQ(cache.pending_frames(), 0);
  EXPECT_EQ(cache.forecast().steps(), 0);
}

// ---- prefetch never changes a decision ----

TEST(Prefetch, PlansEqualThoseOfALargeStaticCapacity) {
  tiered_cache<> grown(stream_config(true, 64));
  tiered_cache<> fixed(stream_config(false, 4096));
  // Horizon 1, no margin, granularity 1, fast decay: a reservation after nearly every rise of
  // the estimate, and misses (grown inside the step) at many bursts.
  audiokv_config tight_config = stream_config(true, 40);
  tight_config.prefetch.horizon_steps = 1;
  tight_config.prefetch.margin = 0.0f;
  tight_config.prefetch.granularity = 1;
  tight_config.prefetch.decay = 0.5f;
  tiered_cache<> tight(tight_config);
  const run_result a = run_stream(grown, kSteps, true);
  const run_result b = run_stream(fixed, kSteps, true);
  const run_result c = run_stream(tight, kSteps, true);
  ASSERT_GT(b.plans.size(), 100u);
  EXPECT_EQ(b.misses, 0);
  EXPECT_GT(tight.stats().reservations, 20);
  EXPECT_GT(c.misses, 0);
  EXPECT_EQ(a.plans, b.plans);
  EXPECT_EQ(c.plans, b.plans);
  EXPECT_EQ(fixed.capacity(), 4096);
  for (const tiered_cache<>* cache : {&grown, &tight}) {
    ASSERT_EQ(cache->num_cells(), fixed.num_cells());
    const std::size_t n = static_cast<std::size_t>(fixed.num_cells());
    EXPECT_EQ(std::memcmp(cache->positions(), fixed.positions(), n * sizeof(std::int32_t)), 0);
    EXPECT_EQ(std::memcmp(cache->importance(), fixed.importance(), n * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(cache->tiers(), fixed.tiers(), n * sizeof(pool_tier)), 0);
    EXPECT_EQ(cache->stats().cells_evicted, fixed.stats().cells_evicted);
    EXPECT_EQ(cache->stats().promotions, fixed.stats().promotions);
  }
}

// ---- reserve() ----

TEST(Prefetch, CellStoreReservePreservesEveryArray) {
  policy::detail::cell_store store(8, 3);
  std::vector<frame_meta> f(8);
  for (std::int32_t i = 0; i < 8; ++i) {
    f[i] = frame_meta{3 * i + 1, i % 3, 0.125f * i, static_cast<std::uint8_t>(i & 7), 0.5f - i};
  }
  store.append(f.data(), 8, [](const frame_meta& m) {
    return (m.flags & frame_flag_segment_start) ? pool_tier::emergency : pool_tier::buffer;
  });
  store.tier()[5] = pool_tier::base;
  const std::uint64_t generation = store.generation();
  const auto copy = [&] {
    return std::vector<std::vector<double>>{
        {store.pos(), store.pos() + 8},
        {store.speaker(), store.speaker() + 8},
        {store.voice(), store.voice() + 8},
        {store.flags(), store.flags() + 8},
        {store.prior(), store.prior() + 8},
        {reinterpret_cast<const std::uint8_t*>(store.tier()),
         reinterpret_cast<const std::uint8_t*>(store.tier()) + 8}};
  };
  const auto before = copy();
  store.reserve(100);
  EXPECT_EQ(store.capacity(), 100);
  EXPECT_EQ(store.size(), 8);
  EXPECT_EQ(store.generation(), generation);
  EXPECT_EQ(store.newest_pos(), 22);
  EXPECT_EQ(copy(), before);
  store.reserve(50);  // shrinking is a no-op
  store.reserve(-1);
  EXPECT_EQ(store.capacity(), 100);
  EXPECT_EQ(copy(), before);
  // The new slots are usable.
  std::vector<frame_meta> more(92);
  for (std::int32_t i = 0; i < 92; ++i) more[i] = frame_meta{100 + i, 0, 1.0f, 0, 0.0f};
  store.validate_append("test", more.data(), 92);
  store.append(more.data(), 92, [](const frame_meta&) { return pool_tier::buffer; });
  EXPECT_EQ(store.size(), 100);
}

/// Everything tiered_cache exposes about its cells.
struct snapshot {
  std::vector<std::int32_t> pos;
  std::vector<float> importance;
  std::vector<pool_tier> tiers;
  std::vector<float> baselines;
  std::int64_t steps, evictions, cells_evicted, promotions, demotions;
  bool operator==(const snapshot& o) const {
    return pos == o.pos && importance == o.importance && tiers == o.tiers &&
           baselines == o.baselines && steps == o.steps && evictions == o.evictions &&
           cells_evicted == o.cells_evicted && promotions == o.promotions &&
           demotions == o.demotions;
  }
};

snapshot take(const tiered_cache<>& c) {
  const auto n = c.num_cells();
  const audiokv_stats& s = c.stats();
  return {
      std::vector<std::int32_t>(c.positions(), c.positions() + n),
      std::vector<float>(c.importance(), c.importance() + n),
      std::vector<pool_tier>(c.tiers(), c.tiers() + n),
      std::vector<float>(c.speaker_baselines(), c.speaker_baselines() + c.config().num_speakers),
      s.steps,
      s.evictions,
      s.cells_evicted,
      s.promotions,
      s.demotions};
}

TEST(Prefetch, TieredCacheReservePreservesStateAndOutstandingPlans) {
  tiered_cache<> cache(stream_config(false, 512));
  run_stream(cache, 600, false);
  ASSERT_GT(cache.stats().evictions, 10);
  tiered_cache<> same = cache;  // never reserved: the reference

  eviction_plan before;
  cache.plan_to(cache.num_cells() - 20, before);  // outstanding across the reserve
  const snapshot s = take(cache);
  cache.reserve(2000);
  EXPECT_EQ(cache.capacity(), 2000);
  EXPECT_EQ(cache.stats().reservations, 1);
  EXPECT_TRUE(take(cache) == s);
  eviction_plan after;
  cache.plan_to(cache.num_cells() - 20, after);
  EXPECT_EQ(digest(after), digest(before));

  cache.apply(before);      // not stale: reserve() keeps the generation
  eviction_plan same_plan;  // the copy is another cache: it applies its own, equal plan
  same.plan_to(same.num_cells() - 20, same_plan);
  EXPECT_EQ(digest(same_plan), digest(before));
  same.apply(same_plan);
  EXPECT_TRUE(take(cache) == take(same));
  // Both continue identically.
  std::vector<float> attention(2000, 0.0f);
  for (std::int32_t step = 0; step < 200; ++step) {
    const frame_meta f{100000 + step, 0, step % 3 == 0 ? 0.0f : 1.0f, frame_flag_none, 0.0f};
    for (tiered_cache<>* c : {&cache, &same}) {
      c->append(&f, 1);
      for (std::int32_t j = 0; j < c->num_cells(); ++j) {
        attention[j] = 1.0f / static_cast<float>(1 + (j * 7 + step) % 13);
      }
      c->observe(attention.data(), c->num_cells());
    }
    if (same.wants_eviction()) {
      same.plan(before);
      cache.plan(after);
      ASSERT_EQ(digest(after), digest(before)) << "step " << step;
      same.apply(before);
      cache.apply(after);
    }
  }
  EXPECT_TRUE(take(cache) == take(same));
}

TEST(Prefetch, ReserveRejectsNegativeAndNeverShrinks) {
  tiered_cache<> cache(stream_config(false, 300));
  run_stream(cache, 100, false);
  const snapshot s = take(cache);
  EXPECT_EQ(error_argument([&] { cache.reserve(-1); }), "new_capacity");
  EXPECT_EQ(cache.capacity(), 300);
  EXPECT_TRUE(take(cache) == s);
  cache.reserve(0);
  cache.reserve(cache.num_cells());
  cache.reserve(299);
  cache.reserve(300);
  EXPECT_EQ(cache.capacity(), 300);
  EXPECT_EQ(cache.stats().reservations, 0);
  EXPECT_TRUE(take(cache) == s);
}

// ---- prefetch() and capacity_forecast ----

TEST(Prefetch, PrefetchFeedsTheFramesOfOneStep) {
  audiokv_config config = stream_config(true, 16);
  config.prefetch.beta = 0.5f;
  config.prefetch.decay = 0.5f;
  config.prefetch.horizon_steps = 2;
  config.prefetch.margin = 0.0f;
  config.prefetch.granularity = 16;
  tiered_cache<> cache(config);
  const std::vector<frame_meta> a = test::frames(0, 3), b = test::frames(3, 4);
  cache.append(a.data(), 3);
  cache.append(b.data(), 4);
  EXPECT_EQ(cache.pending_frames(), 7);
  // A failed append changes nothing, the count included.
  EXPECT_EQ(error_argument([&] { cache.append(a.data(), 3); }), "frames[0].pos");
  EXPECT_EQ(cache.pending_frames(), 7);
  // One step of 7 frames: rate 3.5, peak 7; forecast for 7 cells over 2 steps, trigger 231:
  // min(7 + 7, max(7, 230)) + 7 = 21 > 16 -> reserve ceil(21 / 16) * 16 = 32.
  EXPECT_EQ(cache.prefetch(), 16);
  EXPECT_EQ(cache.capacity(), 32);
  EXPECT_EQ(cache.pending_frames(), 0);
  EXPECT_EQ(cache.forecast().steps(), 1);
  EXPECT_FLOAT_EQ(cache.forecast().rate(), 3.5f);
  EXPECT_FLOAT_EQ(cache.forecast().peak(), 7.0f);
  // An empty step: rate 1.75, peak 3.5 -> 7 + 7 = 14 <= 32: nothing to do.
  EXPECT_EQ(cache.prefetch(), 0);
  EXPECT_EQ(cache.capacity(), 32);
  EXPECT_EQ(cache.forecast().steps(), 2);
}

TEST(Prefetch, ForecastOnHandValues) {
  prefetch_config pc;
  pc.beta = 0.5f;
  pc.decay = 0.5f;
  pc.horizon_steps = 2;
  pc.margin = 0.0f;
  pc.granularity = 16;
  capacity_forecast f(pc);
  EXPECT_EQ(f.forecast(100), 100);  // nothing observed yet
  f.observe_step(10);               // rate 5, peak 10
  EXPECT_FLOAT_EQ(f.rate(), 5.0f);
  EXPECT_FLOAT_EQ(f.peak(), 10.0f);
  EXPECT_EQ(f.forecast(100), 120);  // 100 + 2 * 10
  EXPECT_EQ(f.cells_to_reserve(100), 128);
  EXPECT_FALSE(f.needs_reserve(100, 120));
  EXPECT_TRUE(f.needs_reserve(100, 119));
  EXPECT_EQ(f.forecast(100, 105), 115);  // min(110, 105) + 10
  EXPECT_EQ(f.cells_to_reserve(100, 105), 128);
  f.observe_step(0);  // rate 2.5, peak 5
  EXPECT_EQ(f.forecast(100), 110);
  pc.margin = 0.5f;
  capacity_forecast g(pc);
  g.observe_step(10);
  EXPECT_EQ(g.forecast(100), 130);  // 100 + 2 * 15
  pc.min_burst_frames = 20;         // the floor: e = max(5, 10, 20) * 1.5 = 30
  capacity_forecast h(pc);
  EXPECT_EQ(h.forecast(100), 160);  // before any step
  h.observe_step(10);
  EXPECT_EQ(h.forecast(100), 160);
  EXPECT_EQ(h.forecast(100, 105), 135);  // min(130, 105) + 30
}

TEST(Prefetch, ForecastRejectsBadArgumentsAndStaysUnchanged) {
  capacity_forecast f;
  f.observe_step(12);
  EXPECT_EQ(error_argument([&] { f.observe_step(-1); }), "frames_appended");
  EXPECT_EQ(f.steps(), 1);
  EXPECT_FLOAT_EQ(f.peak(), 12.0f);
  EXPECT_EQ(error_argument([&] { f.forecast(-1); }), "num_cells");
  EXPECT_EQ(error_argument([&] { f.cells_to_reserve(-1); }), "num_cells");
  f.observe_step(std::numeric_limits<std::int32_t>::max());
  EXPECT_EQ(f.forecast(std::numeric_limits<std::int32_t>::max()),
            std::numeric_limits<std::int32_t>::max());
  EXPECT_EQ(f.cells_to_reserve(1000), std::numeric_limits<std::int32_t>::max());
}

TEST(Prefetch, EveryPrefetchFieldIsValidated) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<std::function<void(prefetch_config&)>, std::string>> cases = {
      {[](prefetch_config& p) { p.beta = 0.0f; }, "prefetch.beta"},
      {[](prefetch_config& p) { p.beta = 1.5f; }, "prefetch.beta"},
      {[nan](prefetch_config& p) { p.beta = nan; }, "prefetch.beta"},
      {[](prefetch_config& p) { p.decay = -0.1f; }, "prefetch.decay"},
      {[](prefetch_config& p) { p.decay = 1.01f; }, "prefetch.decay"},
      {[](prefetch_config& p) { p.horizon_steps = 0; }, "prefetch.horizon_steps"},
      {[](prefetch_config& p) { p.margin = -0.5f; }, "prefetch.margin"},
      {[](prefetch_config& p) { p.margin = std::numeric_limits<float>::infinity(); },
       "prefetch.margin"},
      {[](prefetch_config& p) { p.min_burst_frames = -1; }, "prefetch.min_burst_frames"},
      {[](prefetch_config& p) { p.granularity = 0; }, "prefetch.granularity"},
  };
  for (const auto& c : cases) {
    const std::string& argument = c.second;
    prefetch_config pc;
    c.first(pc);
    EXPECT_EQ(error_argument([&] { capacity_forecast f(pc); }), argument);
    // Through the cache's configuration, with the switch off as well as on.
    for (const bool enabled : {false, true}) {
      audiokv_config config = stream_config(enabled, 0);
      const bool keep = config.prefetch.enabled;
      config.prefetch = pc;
      config.prefetch.enabled = keep;
      EXPECT_EQ(error_argument([&] { tiered_cache<> cache(config); }), argument);
    }
  }
}

TEST(Prefetch, CapacityBelowBudgetOnlyWithPrefetch) {
  EXPECT_EQ(error_argument([] { tiered_cache<> c(stream_config(false, 100)); }), "config.capacity");
  EXPECT_EQ(error_argument([] { tiered_cache<> c(stream_config(true, -1)); }), "config.capacity");
  tiered_cache<> small(stream_config(true, 1));
  EXPECT_EQ(small.capacity(), 1);
  tiered_cache<> zero(stream_config(true, 0));
  EXPECT_EQ(zero.capacity(), kBudget);  // 0 still means the budget
}

}  // namespace
