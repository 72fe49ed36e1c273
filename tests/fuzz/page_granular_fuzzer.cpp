// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: bytes -> page-granular rewrites (make_page_granular) of cell-granular plans,
// in two sources picked by the first byte:
//   - synthetic: random plans over up to 600 cells with a random protected set, evictions that
//     include protected cells (due cells), random finite scores (ties, huge, negative, none),
//     promotions and demotions, hostile page sizes (0, negative, INT32_MAX, at or above the
//     cell count) and tampered plans (NaN or infinite scores, foreign promote/demote slots,
//     wrong sizes);
//   - cache: a tiered_cache with a small budget and a large share of segment starts, sinks,
//     critical frames and phoneme boundaries, so its emergency pool overflows often; its plans
//     (plan, plan_to) are rewritten into pages with is_protected and applied.
// After every rewrite it checks:
//   - a failure is audiokv::error exactly when an argument is invalid (page_size < 1, or >= the
//     cell count while the plan evicts; sizes; non-finite scores; promote/demote outside the
//     plan), and the plan is then unchanged; otherwise no exception;
//   - the plan is valid: stable move_to, evict = the ascending -1 slots, n_kv_after, promote and
//     demote = the cell plan's minus evicted slots, identity and counters untouched;
//   - protected cells the cell plan keeps (locked) are never evicted; protected cells it evicts
//     (due: the emergency pool's overflow, released boundaries) always are, so the emergency
//     cells evicted are exactly the cell plan's;
//   - the budget: at least the cell plan's count is evicted, or every candidate page was taken;
//     never a page more than needed (fewer than e + P cells);
//   - pages: outside due cells, a page gives all its free cells or none, never the last page,
//     never a page with a locked cell under page_protection::page; candidates go lowest
//     (score, page) first, whole pages before partial ones;
//   - cache: the rewritten plan applies, leaving n_kv_after cells.
// Any violated invariant aborts, so libFuzzer saves the input as a crash reproducer.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <audiokv/pool/page_granular.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace {

using namespace audiokv;

constexpr std::int32_t kMaxSyntheticCells = 600;
constexpr int kMaxRounds = 64;
constexpr int kMaxCacheSteps = 500;

[[noreturn]] void fail_at(int line, const char* what, long long a = 0, long long b = 0) {
  std::fprintf(stderr, "page_granular_fuzzer.cpp:%d: invariant violated: %s (%lld, %lld)\n", line,
               what, a, b);
  std::abort();
}
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) fail_at(__LINE__, #cond, ##__VA_ARGS__); \
  } while (0)

/// Exact equality of two plans, scores compared bit for bit (NaN included).
bool same_plan(const eviction_plan& a, const eviction_plan& b) {
  return a.evict == b.evict && a.move_to == b.move_to && a.promote == b.promote &&
         a.demote == b.demote && a.n_kv_before == b.n_kv_before && a.n_kv_after == b.n_kv_after &&
         a.protections_released == b.protections_released && a.generation == b.generation &&
         a.cache_id == b.cache_id && a.scores.size() == b.scores.size() &&
         (a.scores.empty() ||
          std::memcmp(a.scores.data(), b.scores.data(), sizeof(float) * a.scores.size()) == 0) &&
         std::memcmp(&a.ratio, &b.ratio, sizeof a.ratio) == 0;
}

/// True when make_page_granular must reject (plan, page_size).
bool invalid_call(const eviction_plan& p, std::int32_t page_size) {
  const std::int32_t n = p.n_kv_before;
  if (page_size < 1) return true;
  if (n < 0 || static_cast<std::int64_t>(p.move_to.size()) != n) return true;
  if (!p.scores.empty() && static_cast<std::int64_t>(p.scores.size()) != n) return true;
  for (const float s : p.scores)
    if (!std::isfinite(s)) return true;
  for (const auto* list : {&p.promote, &p.demote})
    for (const std::int32_t s : *list)
      if (s < 0 || s >= n) return true;
  std::int32_t evicted = 0;
  for (const std::int32_t to : p.move_to) evicted += to == -1 ? 1 : 0;
  return evicted > 0 && page_size >= n;
}

/// The cell plan's kept promote/demote list, in order.
std::vector<std::int32_t> kept_of(const std::vector<std::int32_t>& list,
                                  const std::vector<std::int32_t>& move_to) {
  std::vector<std::int32_t> out;
  for (const std::int32_t s : list)
    if (move_to[s] != -1) out.push_back(s);
  return out;
}

/// Rewrites `plan` (a valid or tampered cell plan) and checks every invariant; returns true
/// when the rewrite succeeded. `prot[c]` is is_protected(c) (the callable reads it).
bool rewrite_and_check(eviction_plan& plan, std::int32_t page_size, page_score_rule rule,
                       page_protection protection, const std::vector<std::uint8_t>& prot,
                       page_eviction_workspace& ws) {
  const eviction_plan cell = plan;
  const bool must_fail = invalid_call(cell, page_size);
  std::int32_t ret = 0;
  try {
    ret = make_page_granular(
        plan, page_size, rule,
        [&](std::int32_t c) {
          CHECK(c >= 0 && c < static_cast<std::int32_t>(prot.size()), c, prot.size());
          return prot[c] != 0;
        },
        ws, protection);
  } catch (const error& e) {
    CHECK(must_fail, page_size, cell.n_kv_before);
    CHECK(!e.argument().empty());
    CHECK(same_plan(plan, cell));
    return false;
  } catch (...) {
    CHECK(false && "an exception other than audiokv::error");
  }
  CHECK(!must_fail, page_size, cell.n_kv_before);

  const std::int32_t n = cell.n_kv_before;
  std::int32_t e = 0;
  for (const std::int32_t to : cell.move_to) e += to == -1 ? 1 : 0;
  if (e == 0) {
    CHECK(ret == 0, ret);
    CHECK(same_plan(plan, cell));
    return true;
  }
  // A valid, stable plan with the cell plan's identity and counters.
  CHECK(plan.n_kv_before == n && static_cast<std::int32_t>(plan.move_to.size()) == n);
  std::int32_t kept = 0;
  std::vector<std::int32_t> evict;
  for (std::int32_t c = 0; c < n; ++c) {
    const std::int32_t to = plan.move_to[c];
    CHECK(to == -1 || to == kept, c, to);
    if (to == -1)
      evict.push_back(c);
    else
      ++kept;
  }
  CHECK(plan.evict == evict);
  CHECK(plan.n_kv_after == kept, plan.n_kv_after, kept);
  CHECK(plan.promote == kept_of(cell.promote, plan.move_to));
  CHECK(plan.demote == kept_of(cell.demote, plan.move_to));
  CHECK(plan.generation == cell.generation && plan.cache_id == cell.cache_id);
  CHECK(plan.protections_released == cell.protections_released);
  CHECK(plan.scores == cell.scores);
  // Locked cells stay, due cells go.
  std::int32_t due = 0;
  for (std::int32_t c = 0; c < n; ++c) {
    if (!prot[c]) continue;
    const bool cell_evicts = cell.move_to[c] == -1;
    CHECK((plan.move_to[c] == -1) == cell_evicts, c, cell_evicts);
    due += cell_evicts ? 1 : 0;
  }
  // Pages: all free cells or none; scores of the candidates.
  const std::int32_t pages = core::pages_for(n, page_size);
  std::vector<std::int32_t> free_cells(pages, 0), gone(pages, 0), locked(pages, 0);
  std::vector<float> score(pages, 0.0f);
  for (std::int32_t p = 0; p < pages; ++p) {
    float sum = 0.0f, best = 0.0f;
    for (std::int32_t c = p * page_size; c < std::min(n, (p + 1) * page_size); ++c) {
      if (prot[c]) {
        locked[p] += cell.move_to[c] != -1 ? 1 : 0;
        continue;
      }
      const float s = cell.scores.empty() ? 0.0f : cell.scores[c];
      sum += s;
      best = free_cells[p] > 0 ? std::max(best, s) : s;
      ++free_cells[p];
      gone[p] += plan.move_to[c] == -1 ? 1 : 0;
    }
    if (free_cells[p] > 0)
      score[p] = rule == page_score_rule::max ? best : sum / static_cast<float>(free_cells[p]);
  }
  CHECK(gone[pages - 1] == 0, pages, gone[pages - 1]);  // the last page keeps its free cells
  std::int32_t chosen = 0;
  std::int64_t r = due;
  const auto key_less = [&](std::int32_t a, std::int32_t b) {
    return score[a] < score[b] || (score[a] == score[b] && a < b);
  };
  std::vector<std::int32_t> whole, partial;
  for (std::int32_t p = 0; p + 1 < pages; ++p) {
    CHECK(gone[p] == 0 || gone[p] == free_cells[p], p, gone[p]);
    if (gone[p] > 0) {
      ++chosen;
      r += gone[p];
      CHECK(protection == page_protection::cells || locked[p] == 0, p, locked[p]);
    }
    if (free_cells[p] == 0) continue;
    if (locked[p] == 0)
      whole.push_back(p);
    else if (protection == page_protection::cells)
      partial.push_back(p);
  }
  CHECK(ret == chosen, ret, chosen);
  CHECK(r == static_cast<std::int64_t>(evict.size()), r, evict.size());
  // Lowest first within each group, whole pages before partial ones, and no page more than
  // the count needs.
  const auto taken = [&](std::int32_t p) { return gone[p] > 0; };
  std::int32_t last_taken = -1;  // the page taken last: the highest of the last group taken
  for (std::vector<std::int32_t>* group : {&whole, &partial}) {
    // The pages taken from a group are a prefix of it in (score, page) order.
    std::sort(group->begin(), group->end(), key_less);
    std::size_t prefix = 0;
    while (prefix < group->size() && taken((*group)[prefix])) ++prefix;
    for (std::size_t i = prefix; i < group->size(); ++i) CHECK(!taken((*group)[i]), i, prefix);
    if (prefix > 0) last_taken = (*group)[prefix - 1];
  }
  for (const std::int32_t p : partial)
    if (taken(p))
      for (const std::int32_t w : whole) CHECK(taken(w), p, w);
  if (r < e) {
    for (const std::int32_t p : whole) CHECK(taken(p), p, r);
    for (const std::int32_t p : partial) CHECK(taken(p), p, r);
  } else if (chosen > 0) {
    CHECK(r - gone[last_taken] < e, r, e);  // the last page taken was needed
    CHECK(r < e + page_size, r, e);
  } else {
    CHECK(r == e && due == e, r, due);
  }
  return true;
}

float fuzz_score(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 11)) {
    case 0:
      return 0.0f;
    case 1:
      return -0.0f;
    case 2:
      return std::numeric_limits<float>::max();
    case 3:
      return -std::numeric_limits<float>::max();
    case 4:
      return std::numeric_limits<float>::denorm_min();
    case 5:
      return 0.5f;  // ties
    default:
      return in.ConsumeFloatingPointInRange<float>(-2.0f, 2.0f);
  }
}

std::int32_t fuzz_page_size(FuzzedDataProvider& in, std::int32_t n) {
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      return 0;
    case 1:
      return -in.ConsumeIntegralInRange<std::int32_t>(1, 1000);
    case 2:
      return std::numeric_limits<std::int32_t>::max();
    case 3:
      return std::numeric_limits<std::int32_t>::min();
    case 4:
      return n;
    case 5:
      return n + in.ConsumeIntegralInRange<std::int32_t>(1, 1000);
    case 6:
      return 1;
    default:
      return n > 1 ? in.ConsumeIntegralInRange<std::int32_t>(1, std::min(n - 1, 128)) : 1;
  }
}

/// One synthetic round: a random cell plan, possibly tampered, rewritten and checked.
void synthetic_round(FuzzedDataProvider& in, page_eviction_workspace& ws) {
  const std::int32_t n = in.ConsumeIntegralInRange<std::int32_t>(0, kMaxSyntheticCells);
  const int prot_density = in.ConsumeIntegralInRange<int>(0, 100);
  const int evict_density = in.ConsumeIntegralInRange<int>(0, 100);
  const int due_density = in.ConsumeIntegralInRange<int>(0, 100);
  const std::uint64_t seed = in.ConsumeIntegral<std::uint64_t>();
  std::uint64_t s = seed | 1u;
  const auto next = [&] {  // xorshift64*: cheap per-cell randomness from one seed
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return static_cast<int>(((s * 2685821657736338717ull) >> 33) % 100);
  };
  std::vector<std::uint8_t> prot(static_cast<std::size_t>(n));
  eviction_plan plan;
  plan.n_kv_before = n;
  const bool scored = in.ConsumeBool();
  const float tie = fuzz_score(in);
  std::int32_t kept = 0;
  for (std::int32_t c = 0; c < n; ++c) {
    prot[c] = next() < prot_density ? 1 : 0;
    const bool out =
        prot[c] ? next() < due_density && next() < evict_density : next() < evict_density;
    plan.move_to.push_back(out ? -1 : kept++);
    if (out) plan.evict.push_back(c);
    if (scored) plan.scores.push_back(next() < 20 ? tie : static_cast<float>(next()) / 37.0f);
  }
  plan.n_kv_after = kept;
  if (scored && n > 0 && in.ConsumeBool()) {
    plan.scores[in.ConsumeIntegralInRange<std::int32_t>(0, n - 1)] = fuzz_score(in);
  }
  for (int i = in.ConsumeIntegralInRange<int>(0, 4); i > 0 && n > 0; --i)
    (in.ConsumeBool() ? plan.promote : plan.demote)
        .push_back(in.ConsumeIntegralInRange<std::int32_t>(0, n - 1));
  plan.protections_released = in.ConsumeIntegralInRange<std::int32_t>(0, 3);
  plan.generation = seed;
  plan.cache_id = seed ^ 0x55;
  // Tampering: each makes the call invalid (or, for sizes, is caught by invalid_call too).
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      if (!plan.scores.empty()) plan.scores[n / 2] = std::numeric_limits<float>::quiet_NaN();
      break;
    case 1:
      if (!plan.scores.empty()) plan.scores[n - 1] = -std::numeric_limits<float>::infinity();
      break;
    case 2:
      plan.promote.push_back(n + in.ConsumeIntegralInRange<std::int32_t>(0, 5));
      break;
    case 3:
      plan.demote.push_back(-1 - in.ConsumeIntegralInRange<std::int32_t>(0, 5));
      break;
    case 4:
      plan.move_to.push_back(0);
      break;
    case 5:
      plan.scores.push_back(1.0f);
      break;
    default:
      break;
  }
  const std::int32_t page_size = fuzz_page_size(in, n);
  const page_score_rule rule = in.ConsumeBool() ? page_score_rule::max : page_score_rule::mean;
  const page_protection protection =
      in.ConsumeBool() ? page_protection::cells : page_protection::page;
  rewrite_and_check(plan, page_size, rule, protection, prot, ws);
}

/// A tiered_cache whose plans are rewritten into pages and applied.
void cache_run(FuzzedDataProvider& in, page_eviction_workspace& ws) {
  audiokv_config config;
  config.budget = in.ConsumeIntegralInRange<std::int32_t>(16, 160);
  config.num_speakers = in.ConsumeIntegralInRange<std::int32_t>(1, 3);
  const float emergency = in.ConsumeFloatingPointInRange<float>(0.02f, 0.4f);
  config.split.emergency = emergency;
  config.split.buffer = (1.0f - emergency) / 2.0f;
  config.split.base = 1.0f - emergency - config.split.buffer;
  config.min_retention_ms = in.ConsumeFloatingPointInRange<float>(0.0f, 200.0f);
  config.boundary_radius = in.ConsumeIntegralInRange<std::int32_t>(0, 12);
  try {
    config.validate();
  } catch (const error&) {
    return;  // the constructor's own validation is policy_fuzzer's subject
  }
  tiered_cache<> cache(config);
  const std::int32_t capacity = cache.capacity();
  eviction_plan plan;
  plan.reserve(capacity);
  std::vector<float> attention(static_cast<std::size_t>(capacity));
  std::vector<std::uint8_t> prot;
  const int seg = in.ConsumeIntegralInRange<int>(0, 60);       // % segment starts
  const int crit = in.ConsumeIntegralInRange<int>(0, 20);      // % critical frames
  const int boundary = in.ConsumeIntegralInRange<int>(0, 30);  // % phoneme boundaries
  const std::int32_t sinks = in.ConsumeIntegralInRange<std::int32_t>(0, 4);
  const std::int32_t fixed_page = in.ConsumeIntegralInRange<std::int32_t>(1, 64);
  std::uint64_t s = in.ConsumeIntegral<std::uint64_t>() | 1u;
  const auto next = [&] {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return static_cast<int>(((s * 2685821657736338717ull) >> 33) % 1000);
  };
  const int steps = in.ConsumeIntegralInRange<int>(config.budget, kMaxCacheSteps);
  std::int32_t pos = 0;
  for (int step = 0; step < steps; ++step) {
    if (cache.num_cells() < capacity) {
      frame_meta f{pos, next() % config.num_speakers, next() < 700 ? 1.0f : 0.0f, 0, 0.0f};
      if (pos < sinks) f.flags |= frame_flag_sink;
      if (next() < seg * 10) f.flags |= frame_flag_segment_start;
      if (next() < crit * 10) f.flags |= frame_flag_critical;
      if (next() < boundary * 10) f.flags |= frame_flag_phoneme_boundary;
      try {
        cache.append(&f, 1);
        ++pos;
      } catch (const error&) {
        ++pos;  // e.g. a sink beyond the emergency pool: rejected, the cache unchanged
        continue;
      }
    }
    const std::int32_t n = cache.num_cells();
    double sum = 0.0;
    for (std::int32_t j = 0; j < n; ++j) sum += attention[j] = 1.0f + next();
    for (std::int32_t j = 0; j < n; ++j) attention[j] = static_cast<float>(attention[j] / sum);
    if (n > 0) cache.observe(attention.data(), n);
    const bool forced = next() < 20;
    if (!cache.wants_eviction() && !forced) continue;
    try {
      if (forced && n > 0)
        cache.plan_to(static_cast<std::int32_t>(next()) % n, plan);
      else
        cache.plan(plan);
    } catch (const error&) {
      continue;  // plan_to below what no plan may evict: policy_fuzzer's subject
    }
    prot.resize(static_cast<std::size_t>(n));
    for (std::int32_t c = 0; c < n; ++c) prot[c] = cache.is_protected(c) ? 1 : 0;
    std::vector<std::int32_t> emergency_out;  // the cell plan's emergency evictions
    for (const std::int32_t c : plan.evict)
      if (cache.tiers()[c] == pool_tier::emergency) emergency_out.push_back(c);
    const std::int32_t page_size =
        next() < 30 && in.remaining_bytes() > 0 ? fuzz_page_size(in, n) : fixed_page;
    const page_score_rule rule = next() < 500 ? page_score_rule::mean : page_score_rule::max;
    const page_protection protection =
        next() < 700 ? page_protection::cells : page_protection::page;
    if (!rewrite_and_check(plan, page_size, rule, protection, prot, ws)) continue;
    std::vector<std::int32_t> emergency_gone;
    for (const std::int32_t c : plan.evict)
      if (cache.tiers()[c] == pool_tier::emergency) emergency_gone.push_back(c);
    CHECK(emergency_gone == emergency_out, emergency_gone.size(), emergency_out.size());
    try {
      cache.apply(plan);
    } catch (const error&) {
      CHECK(false && "the rewritten plan was rejected by the cache that made it");
    }
    CHECK(cache.num_cells() == plan.n_kv_after, cache.num_cells(), plan.n_kv_after);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  page_eviction_workspace ws;
  if (in.ConsumeBool()) {
    for (int round = 0; round < kMaxRounds && in.remaining_bytes() > 0; ++round)
      synthetic_round(in, ws);
  } else {
    cache_run(in, ws);
  }
  return 0;
}
