// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: bytes -> an audiokv_config (valid or not) and a sequence of hostile calls
// on tiered_cache and cpu::compact. After every call it checks the "Bad input" rules of the
// specification: failures are audiokv::error only and leave the cache exactly as it was; the
// cache never exceeds its capacity; an applied plan leaves n_kv_after cells; no cell is evicted
// against its protection (except the emergency-overflow and protections_released cases that
// tiered_cache.hpp documents); and compacting a K buffer whose rows encode positions leaves
// exactly positions() behind, byte for byte.
//
// Any violated invariant calls fail(), which prints the reason and aborts, so libFuzzer saves
// the input as a crash reproducer.
//
// The reproducers of the defects this fuzzer found are in tests/fuzz/crashes/ and replay in CI
// (tests/fuzz/README.md).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using namespace audiokv;

// Largest cache the fuzzer constructs. A valid config with a larger capacity is only validated:
// its constructor would legitimately reserve (or fail with std::bad_alloc for) that much memory.
constexpr std::int32_t kMaxCells = 1024;
constexpr std::int32_t kMaxSpeakers = 4096;
constexpr std::int32_t kHeads = 2;  // K is [capacity, kHeads, kDim] (layout_nhd)
constexpr std::int32_t kDim = 3;    // each row: pos, pos ^ 0x5a5a5a5a, ~pos (as int32)
constexpr int kMaxOps = 256;

[[noreturn]] void fail_at(int line, const char* what, long long a = 0, long long b = 0) {
  std::fprintf(stderr, "policy_fuzzer.cpp:%d: invariant violated: %s (%lld, %lld)\n", line, what, a,
               b);
  std::abort();
}
#define fail(...) fail_at(__LINE__, __VA_ARGS__)
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) fail_at(__LINE__, #cond, ##__VA_ARGS__); \
  } while (0)

float hostile_float(FuzzedDataProvider& in, float typical) {
  const int pick = in.ConsumeIntegralInRange<int>(0, 19);
  switch (pick) {
    case 0:
      return std::numeric_limits<float>::quiet_NaN();
    case 1:
      return std::numeric_limits<float>::infinity();
    case 2:
      return -std::numeric_limits<float>::infinity();
    case 3:
      return std::numeric_limits<float>::denorm_min();
    case 4:
      return -std::numeric_limits<float>::denorm_min();
    case 5:
      return std::numeric_limits<float>::min();
    case 6:
      return std::numeric_limits<float>::max();
    case 7:
      return -1.0f;
    case 8:
      return 0.0f;
    case 9:
      return -0.0f;
    case 10:
      return 1.0f;
    case 11:
      return 1e30f;
    case 12:
      return 1e-30f;
    case 13:
      return in.ConsumeFloatingPointInRange<float>(0.0f, 1.0f);
    case 14:
      return in.ConsumeFloatingPointInRange<float>(-2.0f, 2.0f);
    case 15:
      return in.ConsumeFloatingPoint<float>();
    default:
      return typical;
  }
}

// Keeps the default most of the time so that valid configurations are common.
float knob(FuzzedDataProvider& in, float def) {
  return in.ConsumeIntegralInRange<int>(0, 7) == 0 ? hostile_float(in, def) : def;
}

std::int32_t hostile_int(FuzzedDataProvider& in, std::int32_t lo, std::int32_t hi) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
      return 0;
    case 1:
      return -1;
    case 2:
      return std::numeric_limits<std::int32_t>::max();
    case 3:
      return std::numeric_limits<std::int32_t>::min();
    case 4:
      return in.ConsumeIntegral<std::int32_t>();
    default:
      return in.ConsumeIntegralInRange<std::int32_t>(lo, hi);
  }
}

std::int32_t saturate(std::int64_t v) {
  return static_cast<std::int32_t>(std::clamp<std::int64_t>(
      v, std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()));
}

/// Knobs that not every version of audiokv_config has (evaluation_share arrived with the
/// local-rank stage): set when present, so the target builds against either.
template <class C, class = void>
struct has_evaluation_share : std::false_type {};
template <class C>
struct has_evaluation_share<C, std::void_t<decltype(std::declval<C&>().evaluation_share)>>
    : std::true_type {};
template <class C>
void set_evaluation_share(C& c, float v) {
  if constexpr (has_evaluation_share<C>::value) c.evaluation_share = v;
}

audiokv_config make_config(FuzzedDataProvider& in) {
  audiokv_config c;
  c.budget = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::int32_t>(1, 300)
                              : hostile_int(in, 1, kMaxCells);
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0:
      c.capacity = 0;
      break;
    case 1:
      c.capacity = c.budget;
      break;
    case 2:
      c.capacity = saturate(std::int64_t{c.budget} + in.ConsumeIntegralInRange(0, 64));
      break;
    case 3:
      c.capacity = saturate(std::int64_t{c.budget} - 1);
      break;
    default:
      c.capacity = hostile_int(in, 0, kMaxCells);
      break;
  }
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    c.split.base = hostile_float(in, 0.6f);
    c.split.buffer = hostile_float(in, 0.3f);
    c.split.emergency = hostile_float(in, 0.1f);
  } else if (in.ConsumeBool()) {  // a valid but unusual split
    const float e = in.ConsumeFloatingPointInRange<float>(0.0f, 0.5f);
    const float b = in.ConsumeFloatingPointInRange<float>(0.0f, 1.0f - e);
    c.split = {b, 1.0f - e - b, e};
  }
  c.trigger = knob(in, in.ConsumeBool() ? 0.9f : in.ConsumeFloatingPointInRange(0.3f, 1.0f));
  c.alpha = knob(in, 0.3f);
  c.neighbour_prior = in.ConsumeBool();
  c.base_rate = knob(in, in.ConsumeBool() ? 0.05f : in.ConsumeFloatingPointInRange(0.0f, 1.0f));
  c.lambda = knob(in, 0.2f);
  c.voice_weight = knob(in, 0.5f);
  c.boundary_radius =
      in.ConsumeBool() ? in.ConsumeIntegralInRange<std::int32_t>(0, 12) : hostile_int(in, 0, 100);
  c.boundary_horizon_ms = knob(in, 1000.0f);
  c.min_retention_ms = knob(in, in.ConsumeBool() ? 200.0f : 20.0f);
  c.frame_ms = knob(in, in.ConsumeBool() ? 10.0f : 40.0f);
  c.num_speakers =
      in.ConsumeBool() ? in.ConsumeIntegralInRange<std::int32_t>(1, 4) : hostile_int(in, 1, 64);
  c.baseline_rate = knob(in, 0.1f);
  c.drift_window =
      in.ConsumeBool() ? in.ConsumeIntegralInRange<std::int32_t>(2, 12) : hostile_int(in, 0, 64);
  c.drift_factor = knob(in, 2.0f);
  c.prior = static_cast<prior_mode>(in.ConsumeIntegralInRange<int>(0, 2));
  if (in.ConsumeBool())
    set_evaluation_share(c, knob(in, in.ConsumeFloatingPointInRange(0.0f, 2.0f)));
  return c;
}

/// Everything a failed call must leave untouched.
struct snapshot {
  std::vector<std::int32_t> pos;
  std::vector<std::uint32_t> importance;  // bit patterns: exact comparison, NaN included
  std::vector<pool_tier> tiers;
  std::vector<std::uint32_t> baselines;
  audiokv_stats stats;
  bool wants = false;

  template <class Cache>
  static snapshot of(const Cache& c) {
    snapshot s;
    const std::int32_t n = c.num_cells();
    s.pos.assign(c.positions(), c.positions() + n);
    s.importance.resize(n);
    if (n > 0) std::memcpy(s.importance.data(), c.importance(), sizeof(float) * n);
    s.tiers.assign(c.tiers(), c.tiers() + n);
    s.baselines.resize(c.config().num_speakers);
    std::memcpy(s.baselines.data(), c.speaker_baselines(), sizeof(float) * s.baselines.size());
    s.stats = c.stats();
    s.wants = c.wants_eviction();
    return s;
  }
  bool operator==(const snapshot& o) const {
    return pos == o.pos && importance == o.importance && tiers == o.tiers &&
           baselines == o.baselines && wants == o.wants &&
           std::memcmp(&stats, &o.stats, sizeof stats) == 0;
  }
};

/// What the host knows about each cached cell, compacted with every applied plan.
struct mirror_cell {
  std::int32_t pos;
  std::uint8_t flags;
};

void write_row(std::vector<std::int32_t>& k, std::int32_t slot, std::int32_t pos) {
  for (std::int32_t h = 0; h < kHeads; ++h) {
    std::int32_t* row = &k[(static_cast<std::size_t>(slot) * kHeads + h) * kDim];
    row[0] = pos;
    row[1] = pos ^ 0x5a5a5a5a;
    row[2] = ~pos;
  }
}

class session {
 public:
  session(const audiokv_config& config, std::uint32_t seed)
      : cache_(config),
        rng_(seed),
        k_(static_cast<std::size_t>(cache_.capacity()) * kHeads * kDim) {
    plan_.reserve(cache_.capacity());
    scratch_plan_.reserve(cache_.capacity());
  }

  void step(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange<int>(0, 9)) {
      case 0:
      case 1:
        append(in);
        break;
      case 2:
      case 3:
        observe(in);
        break;
      case 4:
        observe_group(in);
        break;
      case 5:
        plan(in);
        break;
      case 6:
        plan_to(in);
        break;
      case 7:
        apply_fresh(in);
        break;
      case 8:
        apply_hostile(in);
        break;
      default:
        compact_hostile(in);
        break;
    }
    check_always();
  }

 private:
  /// Runs `call`; if it throws, the error must be audiokv::error and the cache unchanged.
  template <class Call>
  bool guarded(Call&& call) {
    const snapshot before = snapshot::of(cache_);
    try {
      call();
      return true;
    } catch (const audiokv::error& e) {
      CHECK(!e.argument().empty());
      CHECK(snapshot::of(cache_) == before);
      return false;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "unexpected exception: %s\n", e.what());
      fail("exception other than audiokv::error");
    } catch (...) {
      fail("non-std exception");
    }
  }

  void check_always() {
    const std::int32_t n = cache_.num_cells();
    CHECK(n >= 0 && n <= cache_.capacity(), n, cache_.capacity());
    CHECK(static_cast<std::int32_t>(mirror_.size()) == n, mirror_.size(), n);
    for (std::int32_t j = 0; j < n; ++j) {
      CHECK(cache_.positions()[j] == mirror_[j].pos, j, cache_.positions()[j]);
      CHECK(j == 0 || cache_.positions()[j - 1] < cache_.positions()[j], j);
      const auto t = static_cast<int>(cache_.tiers()[j]);
      CHECK(t >= 0 && t <= 2, j, t);
      // Cells flagged for the emergency pool live there and never leave it.
      CHECK(((mirror_[j].flags & emergency_flags) != 0) ==
                (cache_.tiers()[j] == pool_tier::emergency),
            j, mirror_[j].flags);
    }
  }

  frame_meta hostile_frame(FuzzedDataProvider& in, std::int64_t& next_pos) {
    frame_meta f;
    switch (in.ConsumeIntegralInRange<int>(0, 15)) {
      case 0:
        f.pos = saturate(next_pos - 1);
        break;  // repeat
      case 1:
        f.pos = saturate(next_pos - 7);
        break;  // out of order
      case 2:
        f.pos = std::numeric_limits<std::int32_t>::max();
        break;
      case 3:
        f.pos = std::numeric_limits<std::int32_t>::min();
        break;
      case 4:
        f.pos = saturate(next_pos + in.ConsumeIntegralInRange(1, 500));
        break;
      default:
        f.pos = saturate(next_pos);
        break;
    }
    next_pos = static_cast<std::int64_t>(f.pos) + 1;
    const std::int32_t speakers = cache_.config().num_speakers;
    f.speaker = in.ConsumeIntegralInRange<int>(0, 15) == 0
                    ? hostile_int(in, -2, speakers + 2)
                    : static_cast<std::int32_t>(rng_() % static_cast<std::uint32_t>(speakers));
    f.voice = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? hostile_float(in, 0.5f)
                                                         : static_cast<float>(rng_() & 1u);
    const int fl = in.ConsumeIntegralInRange<int>(0, 31);
    f.flags = fl < 20   ? 0
              : fl < 24 ? frame_flag_phoneme_boundary
              : fl < 27 ? frame_flag_segment_start
              : fl < 29 ? frame_flag_critical
              : fl < 30 ? frame_flag_sink
                        : in.ConsumeIntegral<std::uint8_t>();  // unknown bits too
    f.prior = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? hostile_float(in, 0.0f) : 0.0f;
    return f;
  }

  void append(FuzzedDataProvider& in) {
    std::int32_t count = in.ConsumeIntegralInRange<std::int32_t>(0, 6);
    if (in.ConsumeIntegralInRange<int>(0, 15) == 0) count = hostile_int(in, -3, 2 * kMaxCells);
    const std::int32_t room = cache_.capacity() - cache_.num_cells();
    const std::int32_t made = std::max(0, std::min(count, room + 2));
    frames_.resize(static_cast<std::size_t>(made));
    std::int64_t next = next_pos_;
    for (auto& f : frames_) f = hostile_frame(in, next);
    const bool null_frames = in.ConsumeIntegralInRange<int>(0, 31) == 0;
    // A count beyond the frames we made can only be legal if it also exceeds the capacity, so
    // the cache must reject it before reading frames: never hand it more than `made` frames
    // when it could accept them.
    if (count > made && count <= room) count = made;
    const frame_meta* ptr = null_frames ? nullptr : frames_.data();
    if (frames_.empty() && !null_frames) ptr = nullptr;
    const std::int32_t n_before = cache_.num_cells();
    const bool ok = guarded([&] { cache_.append(ptr, count); });
    if (!ok) return;
    CHECK(count >= 0 && count <= made && n_before + count == cache_.num_cells(), count);
    for (std::int32_t i = 0; i < count; ++i) {
      const frame_meta& f = frames_[i];
      CHECK(f.pos > newest_ || (!any_frame_ && i == 0) || (i > 0 && f.pos > frames_[i - 1].pos),
            f.pos, newest_);
      mirror_.push_back({f.pos, f.flags});
      write_row(k_, n_before + i, f.pos);
    }
    if (count > 0) {
      newest_ = frames_[count - 1].pos;
      any_frame_ = true;
      next_pos_ = static_cast<std::int64_t>(newest_) + 1;
    }
  }

  void fill_attention(FuzzedDataProvider& in, std::int32_t rows, std::int32_t cols) {
    const std::int64_t total = static_cast<std::int64_t>(std::max(rows, 0)) * std::max(cols, 0);
    attention_.assign(static_cast<std::size_t>(std::min<std::int64_t>(total, 1 << 16)), 0.0f);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    const int shape = in.ConsumeIntegralInRange<int>(0, 3);
    for (std::size_t i = 0; i < attention_.size(); ++i) {
      const std::size_t j = cols > 0 ? i % static_cast<std::size_t>(cols) : 0;
      attention_[i] = shape == 0   ? unit(rng_)
                      : shape == 1 ? (j + 1 == static_cast<std::size_t>(cols) ? 1.0f : 0.0f)
                      : shape == 2 ? unit(rng_) * unit(rng_) * unit(rng_)
                                   : 1.0f / static_cast<float>(std::max(cols, 1));
    }
    const int injections =
        in.ConsumeIntegralInRange<int>(0, 3) == 0 ? in.ConsumeIntegralInRange(1, 3) : 0;
    for (int k = 0; k < injections && !attention_.empty(); ++k) {
      const std::size_t at = in.ConsumeIntegralInRange<std::size_t>(0, attention_.size() - 1);
      attention_[at] = hostile_float(in, 0.0f);
    }
  }

  std::int32_t hostile_count(FuzzedDataProvider& in) {
    const std::int32_t n = cache_.num_cells();
    switch (in.ConsumeIntegralInRange<int>(0, 15)) {
      case 0:
        return n + 1;
      case 1:
        return n - 1;
      case 2:
        return 0;
      case 3:
        return -1;
      default:
        return n;
    }
  }

  void observe(FuzzedDataProvider& in) {
    const std::int32_t cells = hostile_count(in);
    fill_attention(in, 1, std::max(cells, cache_.num_cells()));
    const float* ptr = in.ConsumeIntegralInRange<int>(0, 31) == 0 ? nullptr : attention_.data();
    if (attention_.empty()) ptr = nullptr;
    // Wrong counts larger than the buffer would only be read past its end if the cache
    // skipped its shape check; the buffer holds max(cells, num_cells) values.
    guarded([&] { cache_.observe(ptr, cells); });
  }

  void observe_group(FuzzedDataProvider& in) {
    std::int32_t group = in.ConsumeIntegralInRange<std::int32_t>(1, 4);
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) group = in.ConsumeIntegralInRange(-2, 0);
    const std::int32_t cells = hostile_count(in);
    fill_attention(in, std::max(group, 1), std::max(cells, cache_.num_cells()));
    const auto mode = static_cast<gqa_reduce>(in.ConsumeIntegralInRange<int>(0, 1));
    const float* ptr = attention_.empty() ? nullptr : attention_.data();
    guarded([&] { cache_.observe_group(ptr, group, cells, mode); });
  }

  /// Plans are reused across calls, as an engine does (reserved once, never reallocated).
  static eviction_plan& reuse(eviction_plan& p) { return p; }

  /// Invariants of any plan made for the current state.
  void check_plan_shape(const eviction_plan& p) {
    const std::int32_t n = cache_.num_cells();
    CHECK(p.n_kv_before == n, p.n_kv_before, n);
    CHECK(static_cast<std::int32_t>(p.move_to.size()) == n, p.move_to.size(), n);
    std::int32_t kept = 0;
    std::size_t e = 0;
    for (std::int32_t i = 0; i < n; ++i) {
      if (p.move_to[i] == -1) {
        CHECK(e < p.evict.size() && p.evict[e] == i, i, e);
        ++e;
      } else {
        CHECK(p.move_to[i] == kept, i, p.move_to[i]);
        ++kept;
      }
    }
    CHECK(e == p.evict.size(), e, p.evict.size());
    CHECK(kept == p.n_kv_after, kept, p.n_kv_after);
    for (const std::int32_t s : p.promote) {
      CHECK(s >= 0 && s < n && p.move_to[s] != -1 && cache_.tiers()[s] == pool_tier::buffer, s);
    }
    for (const std::int32_t s : p.demote) {
      CHECK(s >= 0 && s < n && p.move_to[s] != -1 && cache_.tiers()[s] == pool_tier::base, s);
    }
    CHECK(std::isfinite(p.ratio) && p.ratio >= 0.0f && p.ratio <= 1.0f);
    CHECK(p.protections_released >= 0 && p.protections_released <= n - p.n_kv_after);
  }

  /// No evicted cell was protected, except where tiered_cache.hpp allows it: emergency cells on
  /// the pool's own overflow (oldest first among those never kept) and boundary cells counted in
  /// plan.protections_released. Recent-window cells, text cells in the text window and sinks are
  /// never evicted.
  void check_protection(const eviction_plan& p) {
    const std::int32_t n = cache_.num_cells();
    const auto& cfg = cache_.config();
    const std::int64_t recent_from =
        static_cast<std::int64_t>(newest_) - cfg.recent_window_frames() + 1;
    const std::int64_t text_from = static_cast<std::int64_t>(newest_) - cfg.text_recent_cells() + 1;
    const auto never_evicted = [&](std::int32_t j) {
      return (mirror_[j].flags & frame_flag_sink) || mirror_[j].pos >= recent_from ||
             ((mirror_[j].flags & frame_flag_text) && mirror_[j].pos >= text_from);
    };
    std::int32_t emergency = 0;
    for (std::int32_t j = 0; j < n; ++j) emergency += cache_.tiers()[j] == pool_tier::emergency;
    const std::int32_t overflow = std::max(0, emergency - cache_.emergency_pool_cells());
    std::int32_t emergency_evicted = 0, boundary_evicted = 0;
    for (const std::int32_t slot : p.evict) {
      CHECK(!never_evicted(slot), slot, mirror_[slot].pos);
      if (!cache_.is_protected(slot)) continue;
      if (cache_.tiers()[slot] == pool_tier::emergency) {
        ++emergency_evicted;
      } else {
        CHECK(cache_.tiers()[slot] == pool_tier::buffer, slot);  // base cells: only "always"
        ++boundary_evicted;
      }
    }
    CHECK(emergency_evicted <= overflow, emergency_evicted, overflow);
    CHECK(boundary_evicted <= p.protections_released, boundary_evicted, p.protections_released);
    // Oldest first: the evicted emergency cells are the oldest evictable ones.
    std::int32_t seen = 0;
    for (std::int32_t j = 0; j < n && seen < emergency_evicted; ++j) {
      if (cache_.tiers()[j] != pool_tier::emergency) continue;
      if (never_evicted(j)) continue;
      CHECK(p.move_to[j] == -1, j, seen);
      ++seen;
    }
  }

  void plan(FuzzedDataProvider& in) {
    const snapshot before = snapshot::of(cache_);
    const bool ok = guarded([&] { cache_.plan(reuse(plan_)); });
    CHECK(snapshot::of(cache_) == before);  // plan() is const
    plan_valid_ = ok;
    if (!ok) return;
    check_plan_shape(plan_);
    if (!cache_.wants_eviction()) {
      CHECK(plan_.empty() && plan_.n_kv_after == cache_.num_cells());
    } else {
      // Eviction ratio: always frees enough to get back under the trigger.
      CHECK(plan_.n_kv_after < cache_.trigger_cells(), plan_.n_kv_after, cache_.trigger_cells());
    }
    check_protection(plan_);
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {  // deterministic
      cache_.plan(scratch_plan_);
      CHECK(scratch_plan_.move_to == plan_.move_to && scratch_plan_.promote == plan_.promote &&
            scratch_plan_.demote == plan_.demote);
    }
  }

  void plan_to(FuzzedDataProvider& in) {
    const std::int32_t n = cache_.num_cells();
    std::int32_t target;
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
      case 0:
        target = hostile_int(in, -5, n + 5);
        break;
      case 1:
        target = n;
        break;
      case 2:
        target = n - 1;
        break;
      default:
        target = in.ConsumeIntegralInRange<std::int32_t>(0, std::max(n, 0));
        break;
    }
    const snapshot before = snapshot::of(cache_);
    const bool ok = guarded([&] { cache_.plan_to(target, reuse(plan_)); });
    CHECK(snapshot::of(cache_) == before);
    plan_valid_ = ok;
    if (!ok) return;
    check_plan_shape(plan_);
    // "An eviction down to min(num_cells(), target_cells) cells, or ... down to
    // protected_cells()."
    CHECK(plan_.n_kv_after == std::max(std::min(n, target), cache_.protected_cells()),
          plan_.n_kv_after, target);
    check_protection(plan_);
  }

  /// Applies the current plan (fresh, or stale after another call) to K and to the cache.
  void apply_fresh(FuzzedDataProvider& in) {
    if (!plan_valid_) {
      // validate() keeps the always-protected set (recent window + emergency pool) below the
      // trigger, so plan() can always get back under it and must not throw.
      CHECK(guarded([&] { cache_.plan(reuse(plan_)); }));
      plan_valid_ = true;
      check_plan_shape(plan_);
      check_protection(plan_);
    }
    const bool fresh = plan_.generation == generation_of_last_check();
    if (!fresh) {  // stale: must be rejected
      guarded([&] { cache_.apply(plan_); });
      return;
    }
    apply_and_compact(in);
  }

  /// The generation of the current state, read from a freshly made empty plan.
  std::uint64_t generation_of_last_check() {
    cache_.plan_to(std::numeric_limits<std::int32_t>::max(), scratch_plan_);
    return scratch_plan_.generation;
  }

  void apply_and_compact(FuzzedDataProvider& in) {
    const std::int32_t n = cache_.num_cells();
    const kv_view<std::int32_t, layout_nhd> k(k_.data(),
                                              layout_nhd{{cache_.capacity(), kHeads, kDim}});
    const bool ok = guarded([&] { cache_.apply(plan_); });
    CHECK(ok);  // a fresh, untouched plan is always accepted
    if (in.ConsumeBool()) {
      cpu::compact_all_heads(k, plan_);
    } else {
      for (std::int32_t h = 0; h < kHeads; ++h) cpu::compact(k, h, plan_);
    }
    CHECK(cache_.num_cells() == plan_.n_kv_after, cache_.num_cells(), plan_.n_kv_after);
    for (std::int32_t i = 0; i < n; ++i) {
      if (plan_.move_to[i] != -1) mirror_[plan_.move_to[i]] = mirror_[i];
    }
    mirror_.resize(static_cast<std::size_t>(plan_.n_kv_after));
    for (std::int32_t j = 0; j < cache_.num_cells(); ++j) {
      std::int32_t expect[kDim];
      const std::int32_t pos = cache_.positions()[j];
      expect[0] = pos;
      expect[1] = pos ^ 0x5a5a5a5a;
      expect[2] = ~pos;
      for (std::int32_t h = 0; h < kHeads; ++h) {
        CHECK(std::memcmp(k.row(j, h), expect, sizeof expect) == 0, j, h);
      }
    }
    for (const std::int32_t s : plan_.promote) {
      CHECK(cache_.tiers()[plan_.move_to[s]] == pool_tier::base, s);
    }
    for (const std::int32_t s : plan_.demote) {
      CHECK(cache_.tiers()[plan_.move_to[s]] == pool_tier::buffer, s);
    }
    plan_valid_ = false;
  }

  /// A copy of the current plan with one field tampered with.
  void tamper(FuzzedDataProvider& in, eviction_plan& p) {
    const std::int32_t n = static_cast<std::int32_t>(p.move_to.size());
    const std::int32_t any = in.ConsumeIntegral<std::int32_t>();
    switch (in.ConsumeIntegralInRange<int>(0, 9)) {
      case 0:
        p.generation += in.ConsumeIntegralInRange<std::uint64_t>(1, 3);
        break;
      case 1:
        p.n_kv_after += in.ConsumeBool() ? 1 : -1;
        break;
      case 2:
        p.n_kv_before += in.ConsumeBool() ? 1 : -1;
        break;
      case 3:
        p.move_to.push_back(-1);
        break;
      case 4:
        if (n > 0) p.move_to.pop_back();
        break;
      case 5:
        if (n > 0) p.move_to[in.ConsumeIntegralInRange(0, n - 1)] = any;
        break;
      case 6:
        if (n > 0)
          p.move_to[in.ConsumeIntegralInRange(0, n - 1)] = in.ConsumeIntegralInRange(-2, n + 1);
        break;
      case 7:
        p.promote.push_back(in.ConsumeBool() ? any : in.ConsumeIntegralInRange(-1, n));
        break;
      case 8:
        p.demote.push_back(in.ConsumeBool() ? any : in.ConsumeIntegralInRange(-1, n));
        break;
      default:  // evict list disagreeing with move_to
        p.evict.push_back(in.ConsumeIntegralInRange(-1, n));
        break;
    }
  }

  void apply_hostile(FuzzedDataProvider& in) {
    if (!plan_valid_) return;
    eviction_plan bad = plan_;
    tamper(in, bad);
    const snapshot before = snapshot::of(cache_);
    const bool ok = guarded([&] { cache_.apply(bad); });
    if (ok) {
      // Accepted: the tampering must have been harmless for the current cells, e.g. a bumped
      // generation after an append of zero frames (same cells) or a promote of a kept base
      // cell. The move map must be a valid one for these cells, and no emergency cell may have
      // been moved out of its pool (it would lose its emergency pool protection).
      CHECK(bad.n_kv_before == static_cast<std::int32_t>(before.pos.size()), bad.n_kv_before);
      std::int32_t kept = 0;
      for (std::int32_t i = 0; i < bad.n_kv_before; ++i) {
        CHECK(bad.move_to[i] == -1 || bad.move_to[i] == kept, i, bad.move_to[i]);
        kept += bad.move_to[i] != -1;
      }
      CHECK(kept == bad.n_kv_after && kept == cache_.num_cells(), kept, cache_.num_cells());
      for (const std::int32_t s : bad.promote) CHECK(before.tiers[s] != pool_tier::emergency, s);
      for (const std::int32_t s : bad.demote) CHECK(before.tiers[s] != pool_tier::emergency, s);
      for (std::int32_t i = 0; i < bad.n_kv_before; ++i) {
        if (bad.move_to[i] != -1) mirror_[bad.move_to[i]] = mirror_[i];
      }
      mirror_.resize(static_cast<std::size_t>(bad.n_kv_after));
      const kv_view<std::int32_t, layout_nhd> k(k_.data(),
                                                layout_nhd{{cache_.capacity(), kHeads, kDim}});
      cpu::compact_all_heads(k, bad);
      plan_valid_ = false;
    }
  }

  /// cpu::compact / compact_all_heads on a scratch copy of K with tampered plans or views: must
  /// either succeed in bounds or throw audiokv::error without touching the buffer.
  void compact_hostile(FuzzedDataProvider& in) {
    if (!plan_valid_) return;
    eviction_plan bad = plan_;
    if (in.ConsumeBool()) tamper(in, bad);
    std::int32_t cells = cache_.capacity();
    if (in.ConsumeIntegralInRange<int>(0, 3) == 0) cells = in.ConsumeIntegralInRange(0, cells);
    std::int32_t head = in.ConsumeIntegralInRange(0, kHeads - 1);
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) head = hostile_int(in, -1, kHeads);
    std::vector<std::int32_t> copy(k_.begin(),
                                   k_.begin() + static_cast<std::ptrdiff_t>(cells) * kHeads * kDim);
    const std::vector<std::int32_t> original = copy;
    const kv_view<std::int32_t, layout_nhd> view(copy.empty() ? nullptr : copy.data(),
                                                 layout_nhd{{cells, kHeads, kDim}});
    try {
      if (in.ConsumeBool()) {
        cpu::compact(view, head, bad);
      } else {
        cpu::compact_all_heads(view, bad);
      }
    } catch (const audiokv::error&) {
      CHECK(copy == original);
    } catch (...) {
      fail("cpu::compact threw something other than audiokv::error");
    }
  }

  tiered_cache<> cache_;
  std::mt19937 rng_;
  std::vector<std::int32_t> k_;  // [capacity, kHeads, kDim] engine K, rows encode positions
  std::vector<mirror_cell> mirror_;
  std::vector<frame_meta> frames_;
  std::vector<float> attention_;
  std::vector<std::uint8_t> promoted_;
  eviction_plan plan_, scratch_plan_;
  bool plan_valid_ = false;  // plan_ was made by this cache (possibly for an older state)
  std::int64_t next_pos_ = 0;
  std::int32_t newest_ = 0;
  bool any_frame_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const audiokv_config config = make_config(in);
  try {
    config.validate();
  } catch (const audiokv::error& e) {
    CHECK(!e.argument().empty());
    // A config that fails validation must also fail construction, with the same argument.
    try {
      tiered_cache<> rejected(config);
      fail("constructor accepted a config that validate() rejects");
    } catch (const audiokv::error& e2) {
      CHECK(e2.argument() == e.argument());
    }
    return 0;
  }
  // Valid, but too large to build here: the constructor reserves capacity cells and
  // num_speakers baselines (and may legitimately throw std::bad_alloc for huge ones).
  if (config.reserved_capacity() > kMaxCells || config.num_speakers > kMaxSpeakers) return 0;
  session s(config, in.ConsumeIntegral<std::uint32_t>());
  for (int op = 0; op < kMaxOps && in.remaining_bytes() > 0; ++op) s.step(in);
  return 0;
}
