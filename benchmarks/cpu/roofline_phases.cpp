// SPDX-License-Identifier: Apache-2.0
// The roofline anchor of the per-step CPU path, linked into audiokv_bench so that every ratio
// (to the STREAM bandwidth, to the Eigen attention step) comes from one run.
//
// - BM_StreamCopy / BM_StreamTriad: STREAM kernels over float arrays of cells x 8 elements (the
//   footprint class of the policy's per-cell data for 8 KV heads: in cache at these sizes, as in
//   the benchmarks below), and over 2^25 elements per array (main memory).
// - BM_Roofline*: observe(), observe_heads(), observe_group() and each eviction phase for 8
//   KV heads, each head with its own data, through the entry points of the policy's parts
//   (tiered_cache, the smoothing pipeline and its stages, protection_rules::mark,
//   apply_speech_rules, pool_manager::plan_promotions, the entropy accumulator, the radix select,
//   cell_store::build_plan); only the planner's private scoring pass (voice weight and priors)
//   has no entry point of its own and is measured inside plan().
//
// Every benchmark reports `floor_bytes`: the bytes per iteration (8 heads) that its byte model,
// stated beside it, says the work must read plus write at least, counting each byte once
// (no write-allocate traffic, as STREAM counts). SetBytesProcessed(floor bytes) makes
// `bytes_per_second` the achieved fraction's numerator; benchmarks/summarize_cpu.py divides it by
// the STREAM bandwidth of the same size.
//
// Argument: cells per KV head. Eviction states have exactly that many cells at the trigger
// (budget chosen so), reached by a stream of appends, observes and three earlier evictions, so
// positions have gaps and the base pool is full, as in steady state.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <audiokv/eigen.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

namespace {

constexpr std::int32_t kHeads = 8;
constexpr std::int32_t kGroup = 4;
constexpr std::int32_t kWarmEvictions = 3;
constexpr std::uint8_t kUnprotected = audiokv::policy::detail::protect_none;
constexpr std::uint8_t kAlways = audiokv::policy::detail::protect_always;

/// xorshift32: setup data without the cost of std::mt19937 at 32k cells x 8 heads x 100 steps.
struct xorshift {
  std::uint32_t s;
  float uniform() {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return static_cast<float>(s >> 8) * (1.0f / 16777216.0f);
  }
};

/// One probability row over `n` cells: uniform noise plus a bump (width ~30 cells) at `peak`,
/// normalised to 1, like a decoder's attention following its alignment.
void fill_probs(float* p, std::int32_t n, std::int32_t peak, xorshift& rng) {
  double sum = 0.0;
  for (std::int32_t j = 0; j < n; ++j) {
    const float d = static_cast<float>(j - peak) / 30.0f;
    p[j] = rng.uniform() + (d * d < 16.0f ? 8.0f * std::exp(-0.5f * d * d) : 0.0f);
    sum += p[j];
  }
  for (std::int32_t j = 0; j < n; ++j) p[j] = static_cast<float>(p[j] / sum);
}

/// Speech-like metadata of position p: 3 s voiced then 1 s of silence (10 ms frames), a phoneme
/// boundary every 250 ms.
float voice_of(std::int32_t p) { return p % 400 < 300 ? 0.9f : 0.05f; }
std::uint8_t flags_of(std::int32_t p) {
  return p % 25 == 0 ? audiokv::frame_flag_phoneme_boundary : audiokv::frame_flag_none;
}

std::int32_t arg_cells(const benchmark::State& state) {
  return static_cast<std::int32_t>(state.range(0));
}

void report(benchmark::State& state, double floor_bytes) {
  state.counters["floor_bytes"] = floor_bytes;
  state.SetBytesProcessed(static_cast<std::int64_t>(floor_bytes) * state.iterations());
}

/// Scratch of pool_manager::plan_promotions, in either of its forms: two index lists that it
/// sorts, or one index list, radix-select key bits and a zeroed mask.
struct promotion_scratch {
  explicit promotion_scratch(std::int32_t n) : order(n), order_b(n), key_bits(n), mask(n) {}
  std::vector<std::int32_t> order, order_b;
  std::vector<std::uint32_t> key_bits;
  std::vector<std::uint8_t> mask;
};

template <class Pools>
auto plan_promotions(const Pools& pools, const audiokv::policy::detail::cell_store& store,
                     const float* scores, const std::uint8_t* protection,
                     audiokv::pool_tier* tier_after, promotion_scratch& s, int)
    -> decltype(pools.plan_promotions(store, scores, protection, tier_after, s.order.data(),
                                      s.key_bits.data(), s.mask.data())) {
  return pools.plan_promotions(store, scores, protection, tier_after, s.order.data(),
                               s.key_bits.data(), s.mask.data());
}

template <class Pools>
void plan_promotions(const Pools& pools, const audiokv::policy::detail::cell_store& store,
                     const float* scores, const std::uint8_t* protection,
                     audiokv::pool_tier* tier_after, promotion_scratch& s, long) {
  pools.plan_promotions(store, scores, protection, tier_after, s.order.data(), s.order_b.data());
}

// ---------------------------------------------------------------------------------------------
// STREAM. Arrays of range(0) x 8 floats; counted bytes: copy 8 B (read 4, write 4) and triad
// 12 B (read 8, write 4) per element.

std::size_t stream_elements(const benchmark::State& state) {
  return static_cast<std::size_t>(state.range(0)) * kHeads;
}

__attribute__((noinline)) void stream_copy(const float* a, float* c, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) c[i] = a[i];
}

__attribute__((noinline)) void stream_triad(float* a, const float* b, const float* c, float s,
                                            std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

void BM_StreamCopy(benchmark::State& state) {
  const std::size_t n = stream_elements(state);
  std::vector<float> a(n, 1.0f), c(n, 0.0f);
  for (auto _ : state) {
    stream_copy(a.data(), c.data(), n);
    benchmark::ClobberMemory();
  }
  report(state, 8.0 * static_cast<double>(n));
}

void BM_StreamTriad(benchmark::State& state) {
  const std::size_t n = stream_elements(state);
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  for (auto _ : state) {
    stream_triad(a.data(), b.data(), c.data(), 3.0f, n);
    benchmark::ClobberMemory();
  }
  report(state, 12.0 * static_cast<double>(n));
}

// ---------------------------------------------------------------------------------------------
// observe() and observe_group(), below the trigger, default configuration (one speaker,
// evaluation_share 0), each head with its own probability rows.

std::vector<audiokv::tiered_cache<>> caches_below_trigger(std::int32_t cells) {
  audiokv::audiokv_config config;
  config.budget = cells + cells / 8 + 64;
  std::vector<audiokv::frame_meta> frames(cells);
  for (std::int32_t i = 0; i < cells; ++i) {
    frames[i].pos = i;
    frames[i].voice = voice_of(i);
    frames[i].flags = flags_of(i);
  }
  std::vector<audiokv::tiered_cache<>> caches;
  for (std::int32_t h = 0; h < kHeads; ++h) {
    caches.emplace_back(config);
    caches.back().append(frames.data(), cells);
  }
  return caches;
}

std::vector<float> head_rows(std::int32_t rows, std::int32_t cells) {
  std::vector<float> p(static_cast<std::size_t>(rows) * cells);
  xorshift rng{12345};
  for (std::int32_t r = 0; r < rows; ++r) fill_probs(p.data() + r * cells, cells, cells / 2, rng);
  return p;
}

/// Byte model, per cell and head: read the probability (4 B), read and write the importance
/// (4 + 4 B) = 12 B. The speaker mean needs no per-cell speaker id with one speaker (else +4 B),
/// and the evaluation flag is never read with evaluation_share = 0 (else +2 B); validation reads
/// the same probability.
void BM_RooflineObserve(benchmark::State& state) {
  const std::int32_t cells = arg_cells(state);
  auto caches = caches_below_trigger(cells);
  const auto probs = head_rows(kHeads, cells);
  for (auto _ : state) {
    for (std::int32_t h = 0; h < kHeads; ++h) {
      caches[h].observe(probs.data() + static_cast<std::size_t>(h) * cells, cells);
    }
    benchmark::ClobberMemory();
  }
  report(state, 12.0 * cells * kHeads);
}

/// tiered_cache::observe_heads() of the 8 heads (one layer observed together: their speaker
/// sums advance side by side). Byte model: observe()'s, 12 B per cell and head.
void BM_RooflineObserveHeads(benchmark::State& state) {
  const std::int32_t cells = arg_cells(state);
  auto caches = caches_below_trigger(cells);
  const auto probs = head_rows(kHeads, cells);
  std::vector<audiokv::tiered_cache<>*> heads;
  std::vector<audiokv::span<const float>> rows;
  for (std::int32_t h = 0; h < kHeads; ++h) {
    heads.push_back(&caches[h]);
    rows.emplace_back(probs.data() + static_cast<std::size_t>(h) * cells, cells);
  }
  for (auto _ : state) {
    audiokv::tiered_cache<>::observe_heads(heads, rows);
    benchmark::ClobberMemory();
  }
  report(state, 12.0 * cells * kHeads);
}

/// Byte model, per cell and head, group of G = 4 query heads: read G probabilities (4G = 16 B),
/// read and write the importance (8 B) = 24 B. The reduced row is a register value, not traffic.
void BM_RooflineObserveGroup4(benchmark::State& state) {
  const std::int32_t cells = arg_cells(state);
  auto caches = caches_below_trigger(cells);
  const auto probs = head_rows(kHeads * kGroup, cells);
  for (auto _ : state) {
    for (std::int32_t h = 0; h < kHeads; ++h) {
      caches[h].observe_group(probs.data() + static_cast<std::size_t>(h) * kGroup * cells, kGroup,
                              cells);
    }
    benchmark::ClobberMemory();
  }
  report(state, (4.0 * kGroup + 8.0) * cells * kHeads);
}

// ---------------------------------------------------------------------------------------------
// Eviction phases on a steady-state cache at the trigger.

/// One KV head at the trigger, with the inputs of each phase taken from a real plan of it.
struct head_at_trigger {
  std::unique_ptr<audiokv::tiered_cache<>> cache;
  /// The cache's protection rules, fed the same appends: they hold the boundaries within the
  /// horizon, evicted frames' included.
  std::unique_ptr<audiokv::policy::detail::protection_rules> rules;
  audiokv::policy::detail::cell_store
      store;                             // the cache's cells and tiers, for the parts' entry points
  audiokv::eviction_plan plan;           // cache->plan() of this state: scores, scratch
  std::vector<float> voice;              // [n] voice of each cell
  std::vector<std::int32_t> speaker;     // [n] speaker ids (all 0)
  std::vector<float> raw;                // [n] final scores before the speech rules
  std::vector<std::uint8_t> protection;  // [n] 0 unprotected, 1 boundary, 2 always
  std::int32_t keep = 0;                 // apply_speech_rules' keep: target - always-kept cells
  std::vector<std::int32_t> candidates;  // unprotected buffer cells after promotions, ascending
  std::int32_t evict_count = 0;          // the selection's k
  std::vector<std::int32_t> ready;       // buffer cells not always kept (promotion candidates)
  std::vector<std::int32_t> base;        // base-pool cells before promotions
  std::vector<audiokv::pool_tier> tier_before;  // [n] the cache's tiers
};

struct eviction_state {
  audiokv::audiokv_config config;
  std::int32_t cells = 0;
  std::vector<head_at_trigger> heads;
};

/// The budget whose trigger is exactly `cells`.
audiokv::audiokv_config config_with_trigger(std::int32_t cells) {
  audiokv::audiokv_config config;
  for (std::int32_t b = static_cast<std::int32_t>(cells / config.trigger) + 2; b > cells; --b) {
    config.budget = b;
    if (config.trigger_cells() == cells) return config;
  }
  config.budget = cells;
  return config;
}

std::unique_ptr<eviction_state> build_eviction_state(std::int32_t cells) {
  auto st = std::make_unique<eviction_state>();
  st->config = config_with_trigger(cells);
  st->cells = st->config.trigger_cells();
  const std::int32_t trigger = st->cells;
  const std::int32_t chunk = std::max<std::int32_t>(1, st->config.budget / 64);
  std::vector<audiokv::frame_meta> frames(chunk);
  std::vector<float> probs(st->config.reserved_capacity());
  for (std::int32_t h = 0; h < kHeads; ++h) {
    head_at_trigger head;
    head.cache = std::make_unique<audiokv::tiered_cache<>>(st->config);
    head.rules = std::make_unique<audiokv::policy::detail::protection_rules>(st->config);
    auto& cache = *head.cache;
    head.plan.reserve(cache.capacity());
    xorshift rng{static_cast<std::uint32_t>(977 + 131 * h)};
    std::int32_t next_pos = 0, evictions = 0;
    for (;;) {
      const std::int32_t count = std::min(chunk, trigger - cache.num_cells());
      for (std::int32_t i = 0; i < count; ++i) {
        const std::int32_t p = next_pos++;
        frames[i] = audiokv::frame_meta{p, 0, voice_of(p), flags_of(p), 0.0f};
      }
      cache.append(frames.data(), count);
      head.rules->record(frames.data(), count);
      const std::int32_t n = cache.num_cells();
      fill_probs(probs.data(), n, (n * 7) / 10, rng);  // the decoder trails the newest audio
      cache.observe(probs.data(), n);
      if (!cache.wants_eviction()) continue;
      if (evictions == kWarmEvictions) break;
      cache.plan(head.plan);
      cache.apply(head.plan);
      ++evictions;
    }
    const std::int32_t n = cache.num_cells();
    cache.plan(head.plan);
    const auto& scratch = head.plan.scratch;
    head.voice.resize(n);
    for (std::int32_t j = 0; j < n; ++j) head.voice[j] = voice_of(cache.positions()[j]);
    // The same cells in a cell_store: positions, voice and flags as appended, the cache's tiers.
    // The newest position is the last cell's: the recent window never evicts it.
    head.store = audiokv::policy::detail::cell_store(n, st->config.num_speakers);
    std::vector<audiokv::frame_meta> kept(n);
    for (std::int32_t j = 0; j < n; ++j) {
      const std::int32_t p = cache.positions()[j];
      kept[j] = audiokv::frame_meta{p, 0, voice_of(p), flags_of(p), 0.0f};
    }
    head.store.append(kept.data(), n,
                      [](const audiokv::frame_meta&) { return audiokv::pool_tier::buffer; });
    std::copy(cache.tiers(), cache.tiers() + n, head.store.tier());
    head.tier_before.assign(cache.tiers(), cache.tiers() + n);
    // The parts, run on the mirror, must reproduce the plan's own protection levels and tiers.
    std::vector<std::uint8_t> levels(n);
    promotion_scratch scratch_p(n);
    head.rules->mark(head.store, levels.data());
    std::vector<audiokv::pool_tier> tiers = head.tier_before;
    plan_promotions(audiokv::policy::detail::pool_manager(st->config), head.store,
                    head.plan.scores.data(), levels.data(), tiers.data(), scratch_p, 0);
    if (!std::equal(levels.begin(), levels.end(), scratch.protection.begin()) ||
        !std::equal(tiers.begin(), tiers.end(), scratch.tier_after.begin())) {
      std::fprintf(stderr,
                   "roofline_phases: the mirrored cell_store does not reproduce the plan\n");
      std::abort();
    }
    head.speaker.assign(n, 0);
    head.raw.assign(scratch.smoothed.begin(), scratch.smoothed.begin() + n);
    head.protection.assign(scratch.protection.begin(), scratch.protection.begin() + n);
    std::int32_t always = 0;
    for (std::int32_t j = 0; j < n; ++j) always += head.protection[j] == kAlways;
    const std::int32_t target = trigger - 1;
    head.keep = target - always;
    for (std::int32_t j = 0; j < n; ++j) {
      if (scratch.tier_after[j] == audiokv::pool_tier::buffer &&
          head.protection[j] == kUnprotected) {
        head.candidates.push_back(j);
      }
      if (cache.tiers()[j] == audiokv::pool_tier::buffer && head.protection[j] != kAlways) {
        head.ready.push_back(j);
      }
      if (cache.tiers()[j] == audiokv::pool_tier::base) head.base.push_back(j);
    }
    const auto candidates = static_cast<std::int32_t>(head.candidates.size());
    head.evict_count = std::min(
        candidates, std::max(audiokv::core::ratio_count(head.plan.ratio, candidates), n - target));
    st->heads.push_back(std::move(head));
  }
  return st;
}

/// One state per size, built once for all phase benchmarks of that size.
const eviction_state& eviction_state_for(std::int32_t cells) {
  static std::map<std::int32_t, std::unique_ptr<eviction_state>> states;
  auto& slot = states[cells];
  if (!slot) slot = build_eviction_state(cells);
  return *slot;
}

/// The smoothing pipeline (median 5 -> Holt trend -> within-block rank (block 0: a copy) ->
/// speaker normalisation) over the importance, as plan() runs it.
/// Byte model, per cell and head: read the importance (4 B), write the smoothed score (4 B) =
/// 8 B; one pass could carry the median window and the trend state in registers. (+4 B speaker
/// id with more than one speaker.)
void BM_RooflineSmoothing(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  const std::int32_t n = st.cells;
  const audiokv::default_pipeline pipeline{};
  std::vector<float> out(static_cast<std::size_t>(n) * kHeads), scratch(n);
  for (auto _ : state) {
    for (std::int32_t h = 0; h < kHeads; ++h) {
      const auto& head = st.heads[h];
      const audiokv::stage_context ctx{head.speaker.data(), head.cache->speaker_baselines(),
                                       st.config.num_speakers, head.cache->positions()};
      pipeline.apply(head.cache->importance(), out.data() + static_cast<std::size_t>(h) * n,
                     scratch.data(), n, ctx);
    }
    benchmark::ClobberMemory();
  }
  report(state, 8.0 * n * kHeads);
}

/// One stage of the pipeline alone, to locate the pipeline's cost. Byte model as the pipeline's:
/// read 4 B, write 4 B per cell and head.
template <class Stage>
void BM_RooflineStage(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  const std::int32_t n = st.cells;
  const Stage stage{};
  std::vector<float> out(static_cast<std::size_t>(n) * kHeads);
  for (auto _ : state) {
    for (std::int32_t h = 0; h < kHeads; ++h) {
      const auto& head = st.heads[h];
      const audiokv::stage_context ctx{head.speaker.data(), head.cache->speaker_baselines(),
                                       st.config.num_speakers, head.cache->positions()};
      stage.apply(head.cache->importance(), out.data() + static_cast<std::size_t>(h) * n, n, ctx);
    }
    benchmark::ClobberMemory();
  }
  report(state, 8.0 * n * kHeads);
}

/// The protection rules (protection_rules::mark: recent window, sinks, phoneme-boundary
/// neighbourhoods within the horizon).
/// Byte model, per cell and head: read position (4 B) and flags (1 B), write the level (1 B) =
/// 6 B.
void BM_RooflineProtection(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  const std::int32_t n = st.cells;
  std::vector<std::uint8_t> protection(static_cast<std::size_t>(n) * kHeads);
  for (auto _ : state) {
    for (std::int32_t h = 0; h < kHeads; ++h) {
      st.heads[h].rules->mark(st.heads[h].store,
                              protection.data() + static_cast<std::size_t>(h) * n);
    }
    benchmark::ClobberMemory();
  }
  report(state, 6.0 * n * kHeads);
}

/// The speech rules (apply_speech_rules with the default configuration: coverage floor and
/// estimated alignment frontier on, sinks off) over the plan's protection levels and scores.
/// Byte model, per cell and head: read position, voice, importance (frontier estimate) and score
/// (4 B each) and the protection level (1 B); write the rewritten score and the raw score the
/// entropy reads next (4 B each) = 25 B.
void BM_RooflineSpeechRules(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  const std::int32_t n = st.cells;
  std::vector<float> score(static_cast<std::size_t>(n) * kHeads), raw(n);
  std::vector<std::uint8_t> tier(n);
  std::vector<std::int32_t> order(n);
  for (auto _ : state) {
    state.PauseTiming();
    for (std::int32_t h = 0; h < kHeads; ++h) {
      std::copy(st.heads[h].raw.begin(), st.heads[h].raw.end(), score.begin() + h * n);
    }
    state.ResumeTiming();
    for (std::int32_t h = 0; h < kHeads; ++h) {
      const auto& head = st.heads[h];
      audiokv::apply_speech_rules(
          st.config.speech, st.config.frame_ms, head.cache->positions(), head.voice.data(),
          head.cache->importance(), head.protection.data(), kAlways, n, head.keep,
          head.cache->frontier(), score.data() + h * n, raw.data(), tier.data(), order.data());
    }
    benchmark::ClobberMemory();
  }
  report(state, 25.0 * n * kHeads);
}

double total_candidates(const eviction_state& st) {
  double c = 0.0;
  for (const auto& head : st.heads) c += static_cast<double>(head.candidates.size());
  return c;
}

/// The eviction ratio's entropy over the candidates' raw scores, as plan() accumulates it.
/// Byte model, per candidate: read its index and its raw score (4 + 4 B) = 8 B.
void BM_RooflineEntropy(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  float sink = 0.0f;
  for (auto _ : state) {
    for (const auto& head : st.heads) {
      audiokv::core::entropy_accumulator entropy;
      for (const std::int32_t j : head.candidates) entropy.add(head.raw[j]);
      sink += entropy.normalized_entropy();
    }
    benchmark::DoNotOptimize(sink);
  }
  report(state, 8.0 * total_candidates(st));
}

/// Selection: the radix select of the k lowest (score, slot) candidates into the evict mask.
/// Byte model, per candidate: read its index and final score (8 B); per selected cell: write its
/// mask byte (1 B).
void BM_RooflineSelect(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  const std::int32_t n = st.cells;
  std::vector<std::uint32_t> bits(n);
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(n) * kHeads);
  double selected = 0.0;
  for (const auto& head : st.heads) selected += head.evict_count;
  for (auto _ : state) {
    state.PauseTiming();
    std::fill(mask.begin(), mask.end(), std::uint8_t{0});
    state.ResumeTiming();
    for (std::int32_t h = 0; h < kHeads; ++h) {
      const auto& head = st.heads[h];
      audiokv::policy::detail::radix_select_lowest(
          head.plan.scores.data(), head.candidates.data(),
          static_cast<std::int32_t>(head.candidates.size()), head.evict_count, bits.data(),
          mask.data() + static_cast<std::size_t>(h) * n);
    }
    benchmark::ClobberMemory();
  }
  report(state, 8.0 * total_candidates(st) + selected);
}

/// Promotions (pool_manager::plan_promotions: the best promotion-ready buffer cells fill the
/// base pool's room, then replace weaker base cells), from the tiers before the plan.
/// Byte model: per cell, restore and read its tier (1 + 1 B) and read its protection level
/// (1 B); per ready or base cell, read its final score and position (8 B) and write its tier
/// after the plan (1 B). Which cells end in the base pool is a top-k of the ready and base cells
/// by (score, position), so no full order is needed.
void BM_RooflinePromotions(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  const std::int32_t n = st.cells;
  const audiokv::policy::detail::pool_manager pools(st.config);
  std::vector<audiokv::pool_tier> tier_after(n);
  promotion_scratch scratch(n);
  double ready_or_base = 0.0;
  for (const auto& head : st.heads) {
    ready_or_base += static_cast<double>(head.ready.size() + head.base.size());
  }
  for (auto _ : state) {
    for (const auto& head : st.heads) {
      std::copy(head.tier_before.begin(), head.tier_before.end(), tier_after.begin());
      plan_promotions(pools, head.store, head.plan.scores.data(), head.protection.data(),
                      tier_after.data(), scratch, 0);
      benchmark::DoNotOptimize(tier_after.data());
    }
  }
  report(state, 3.0 * n * kHeads + 9.0 * ready_or_base);
}

/// Plan building: cell_store::build_plan turns the evict mask into the move map and the evict
/// list (the plan's own evict mask, on a store with the same cell count).
/// Byte model, per cell: read the mask (1 B), write move_to (4 B); per evicted cell: write its
/// slot in the evict list (4 B).
void BM_RooflineBuildPlan(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  const std::int32_t n = st.cells;
  std::vector<audiokv::eviction_plan> plans(kHeads);
  double evicted = 0.0;
  for (std::int32_t h = 0; h < kHeads; ++h) {
    plans[h].reserve(n);
    evicted += static_cast<double>(st.heads[h].plan.evict.size());
  }
  for (auto _ : state) {
    state.PauseTiming();
    for (std::int32_t h = 0; h < kHeads; ++h) {
      std::uint8_t* mask = st.heads[h].store.clear_evict_mask(plans[h]);
      for (const std::int32_t slot : st.heads[h].plan.evict) mask[slot] = 1;
    }
    state.ResumeTiming();
    for (std::int32_t h = 0; h < kHeads; ++h) st.heads[h].store.build_plan(plans[h]);
    benchmark::ClobberMemory();
  }
  report(state, 5.0 * n * kHeads + 4.0 * evicted);
}

/// plan() per cell, one pass reading the inputs once: importance, position, voice, prior (4 B
/// each), flags and tier (1 B each), writing the plan's score and move_to (4 B each) = 26 B;
/// plus 4 B per evicted slot.
double plan_floor_bytes(const eviction_state& st) {
  double bytes = 0.0;
  for (const auto& head : st.heads) {
    bytes += 26.0 * st.cells + 4.0 * static_cast<double>(head.plan.evict.size());
  }
  return bytes;
}

/// apply() per cell: read move_to (4 B); per kept cell move its eight per-cell values
/// (importance, position, speaker, voice, prior: 4 B; evaluation flag, frame flags, tier: 1 B;
/// 23 B read + 23 B written).
double apply_floor_bytes(const eviction_state& st) {
  double bytes = 0.0;
  for (const auto& head : st.heads) bytes += 4.0 * st.cells + 46.0 * head.plan.n_kv_after;
  return bytes;
}

/// One plan per head, reserved for the cache's capacity (the benchmarked calls then allocate
/// nothing).
std::vector<audiokv::eviction_plan> reserved_plans(const eviction_state& st) {
  std::vector<audiokv::eviction_plan> plans(kHeads);
  for (auto& plan : plans) plan.reserve(st.config.reserved_capacity());
  return plans;
}

/// caches = fresh copies of the state's heads (an eviction changes its caches).
void copy_heads(const eviction_state& st, std::vector<audiokv::tiered_cache<>>& caches) {
  caches.clear();
  for (const auto& head : st.heads) caches.push_back(*head.cache);
}

/// tiered_cache::plan() for 8 heads (const: the same state every iteration).
void BM_RooflinePlan(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  std::vector<audiokv::eviction_plan> plans = reserved_plans(st);
  for (auto _ : state) {
    for (std::int32_t h = 0; h < kHeads; ++h) st.heads[h].cache->plan(plans[h]);
    benchmark::ClobberMemory();
  }
  report(state, plan_floor_bytes(st));
}

/// The eviction before K/V compaction: plan() and apply() for 8 heads, on fresh copies of the
/// state (copied outside the timed region).
/// Byte model: plan_floor_bytes + apply_floor_bytes.
void BM_RooflineEviction(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  std::vector<audiokv::eviction_plan> plans = reserved_plans(st);
  std::vector<audiokv::tiered_cache<>> caches;
  const double bytes = plan_floor_bytes(st) + apply_floor_bytes(st);
  for (auto _ : state) {
    state.PauseTiming();
    copy_heads(st, caches);
    state.ResumeTiming();
    for (std::int32_t h = 0; h < kHeads; ++h) {
      caches[h].plan(plans[h]);
      caches[h].apply(plans[h]);
    }
    benchmark::ClobberMemory();
  }
  report(state, bytes);
}

/// tiered_cache::plan_heads() of the 8 heads (one layer planned together: the trend
/// recurrences run side by side). Byte model as BM_RooflinePlan's.
void BM_RooflinePlanLayer(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  std::vector<audiokv::eviction_plan> plans = reserved_plans(st);
  std::vector<const audiokv::tiered_cache<>*> heads;
  for (const auto& head : st.heads) heads.push_back(head.cache.get());
  for (auto _ : state) {
    audiokv::tiered_cache<>::plan_heads(heads, plans);
    benchmark::ClobberMemory();
  }
  report(state, plan_floor_bytes(st));
}

/// The eviction before K/V compaction with the layer's heads planned together: plan_heads()
/// and apply() per head, on fresh copies of the state. Byte model as BM_RooflineEviction's.
void BM_RooflineEvictionLayer(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  std::vector<audiokv::eviction_plan> plans = reserved_plans(st);
  std::vector<audiokv::tiered_cache<>> caches;
  caches.reserve(kHeads);
  std::vector<const audiokv::tiered_cache<>*> heads(kHeads);
  const double bytes = plan_floor_bytes(st) + apply_floor_bytes(st);
  for (auto _ : state) {
    state.PauseTiming();
    copy_heads(st, caches);
    for (std::int32_t h = 0; h < kHeads; ++h) heads[h] = &caches[h];
    state.ResumeTiming();
    audiokv::tiered_cache<>::plan_heads(heads, plans);
    for (std::int32_t h = 0; h < kHeads; ++h) caches[h].apply(plans[h]);
    benchmark::ClobberMemory();
  }
  report(state, bytes);
}

/// apply() alone for 8 heads: fresh copies of the state and their plans are made outside the
/// timed region. Byte model: apply()'s part of BM_RooflineEviction's (4 B of move_to per cell,
/// 46 B per kept cell).
void BM_RooflineApply(benchmark::State& state) {
  const auto& st = eviction_state_for(arg_cells(state));
  std::vector<audiokv::eviction_plan> plans = reserved_plans(st);
  std::vector<audiokv::tiered_cache<>> caches;
  const double bytes = apply_floor_bytes(st);
  for (auto _ : state) {
    state.PauseTiming();
    copy_heads(st, caches);
    for (std::int32_t h = 0; h < kHeads; ++h) caches[h].plan(plans[h]);
    state.ResumeTiming();
    for (std::int32_t h = 0; h < kHeads; ++h) caches[h].apply(plans[h]);
    benchmark::ClobberMemory();
  }
  report(state, bytes);
}

void roofline_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {4096, 32768}) b->Arg(n);
  b->Unit(benchmark::kMicrosecond);
}

void stream_sizes(benchmark::internal::Benchmark* b) {
  // 4096 and 32768 cells x 8 heads (cache), and 2^22 x 8 = 2^25 floats per array (memory).
  for (std::int64_t n : {4096, 32768, 1 << 22}) b->Arg(n);
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_StreamCopy)->Apply(stream_sizes);
BENCHMARK(BM_StreamTriad)->Apply(stream_sizes);
BENCHMARK(BM_RooflineObserve)->Apply(roofline_sizes);
BENCHMARK(BM_RooflineObserveHeads)->Apply(roofline_sizes);
BENCHMARK(BM_RooflineObserveGroup4)->Apply(roofline_sizes);
BENCHMARK(BM_RooflineSmoothing)->Apply(roofline_sizes);
BENCHMARK_TEMPLATE(BM_RooflineStage, audiokv::median_stage<5>)->Apply(roofline_sizes);
BENCHMARK_TEMPLATE(BM_RooflineStage, audiokv::trend_stage)->Apply(roofline_sizes);
BENCHMARK_TEMPLATE(BM_RooflineStage, audiokv::speaker_norm_stage)->Apply(roofline_sizes);
BENCHMARK(BM_RooflineProtection)->Apply(roofline_sizes);
BENCHMARK(BM_RooflineSpeechRules)->Apply(roofline_sizes);
BENCHMARK(BM_RooflineEntropy)->Apply(roofline_sizes);
BENCHMARK(BM_RooflineSelect)->Apply(roofline_sizes);
BENCHMARK(BM_RooflinePromotions)->Apply(roofline_sizes);
BENCHMARK(BM_RooflineBuildPlan)->Apply(roofline_sizes);
BENCHMARK(BM_RooflinePlan)->Apply(roofline_sizes);
BENCHMARK(BM_RooflineEviction)->Apply(roofline_sizes);
BENCHMARK(BM_RooflineApply)->Apply(roofline_sizes);
BENCHMARK(BM_RooflinePlanLayer)->Apply(roofline_sizes);
BENCHMARK(BM_RooflineEvictionLayer)->Apply(roofline_sizes);

}  // namespace
