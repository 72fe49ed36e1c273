// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: bytes -> a cpu::head_kv_store configuration (valid or not) and a sequence of
// hostile calls (append of repeated, fresh, NaN or infinite rows; apply of valid, tampered and
// stale move maps with random pools; attend; reserve). After every call it checks:
//   - a failure is audiokv::error only and leaves the store exactly as it was;
//   - the slot table is consistent: every cell references a live row, each row's multiplicity
//     is the number of cells behind it, rows are dense in each arena;
//   - a row is int8 only while every cell behind it is in the buffer pool (when pools are given);
//   - each cell reads back the first frame of its run: byte for byte while its row has always
//     been full precision, within the int8 bound (max |x| / 127, plus rounding) otherwise;
//   - attention is finite with probabilities summing to 1, over cells as over rows.
// Any violated invariant aborts, so libFuzzer saves the input as a crash reproducer.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <audiokv/cpu/head_kv_store.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace {

using namespace audiokv;

constexpr std::int32_t kMaxCells = 256;
constexpr std::int32_t kMaxDim = 16;
constexpr int kMaxOps = 200;

[[noreturn]] void fail_at(int line, const char* what, long long a = 0, long long b = 0) {
  std::fprintf(stderr, "store_fuzzer.cpp:%d: invariant violated: %s (%lld, %lld)\n", line, what, a,
               b);
  std::abort();
}
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) fail_at(__LINE__, #cond, ##__VA_ARGS__); \
  } while (0)

/// What the fuzzer knows of each cell: the frame its row was first stored from, and whether
/// that row has ever been int8.
struct shadow_cell {
  std::vector<float> k, v;
  bool was_int8 = false;
};

/// Everything a failed call must leave untouched.
struct snapshot {
  std::vector<std::int32_t> refs;
  std::vector<std::int32_t> multiplicity;
  std::vector<float> rows;
  std::int32_t full = 0, int8 = 0, capacity = 0;
  bool operator==(const snapshot& o) const {
    // Rows compare as bytes: NaN payloads included.
    return refs == o.refs && multiplicity == o.multiplicity && full == o.full && int8 == o.int8 &&
           capacity == o.capacity && rows.size() == o.rows.size() &&
           (rows.empty() ||
            std::memcmp(rows.data(), o.rows.data(), sizeof(float) * rows.size()) == 0);
  }
  static snapshot of(const cpu::head_kv_store& s) {
    snapshot out;
    const shared_row_table& t = s.table();
    out.full = t.num_rows(row_precision::full);
    out.int8 = t.num_rows(row_precision::int8);
    out.capacity = s.config().cell_capacity;
    for (std::int32_t c = 0; c < t.num_cells(); ++c) {
      out.refs.push_back(t.cell_rows()[c].row * 2 + static_cast<int>(t.cell_rows()[c].precision));
    }
    for (const row_precision p : {row_precision::full, row_precision::int8}) {
      for (std::int32_t r = 0; r < t.num_rows(p); ++r)
        out.multiplicity.push_back(t.multiplicity(p)[r]);
    }
    const std::int32_t d = s.config().head_dim;
    out.rows.resize(static_cast<std::size_t>(t.num_cells()) * 2 * d);
    for (std::int32_t c = 0; c < t.num_cells(); ++c) {
      s.read_cell(c, &out.rows[static_cast<std::size_t>(c) * 2 * d],
                  &out.rows[static_cast<std::size_t>(c) * 2 * d + d]);
    }
    return out;
  }
};

float fuzz_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      return std::numeric_limits<float>::quiet_NaN();
    case 1:
      return std::numeric_limits<float>::infinity();
    case 2:
      return 0.0f;
    case 3:
      return -0.0f;
    case 4:
      return 1e30f;
    case 5:
      return std::numeric_limits<float>::denorm_min();
    default:
      return in.ConsumeFloatingPointInRange<float>(-4.0f, 4.0f);
  }
}

void check_table(const cpu::head_kv_store& s, const std::vector<shadow_cell>& shadow,
                 const std::vector<pool_tier>* tiers) {
  const shared_row_table& t = s.table();
  CHECK(t.num_cells() == static_cast<std::int32_t>(shadow.size()), t.num_cells(), shadow.size());
  std::vector<std::int32_t> count[2];
  count[0].assign(t.num_rows(row_precision::full), 0);
  count[1].assign(t.num_rows(row_precision::int8), 0);
  std::vector<std::uint8_t> needs_full(t.num_rows(row_precision::int8), 0);
  for (std::int32_t c = 0; c < t.num_cells(); ++c) {
    const row_ref ref = t.cell_rows()[c];
    const int a = ref.precision == row_precision::full ? 0 : 1;
    CHECK(ref.row >= 0 && ref.row < static_cast<std::int32_t>(count[a].size()), c, ref.row);
    ++count[a][ref.row];
    if (a == 1 && tiers != nullptr) needs_full[ref.row] |= (*tiers)[c] != pool_tier::buffer;
  }
  for (int a = 0; a < 2; ++a) {
    const row_precision p = a == 0 ? row_precision::full : row_precision::int8;
    for (std::size_t r = 0; r < count[a].size(); ++r) {
      CHECK(count[a][r] >= 1 && count[a][r] == t.multiplicity(p)[r], a, r);
    }
  }
  for (const std::uint8_t n : needs_full) CHECK(n == 0);  // an int8 row behind a non-buffer cell
  const std::int32_t d = s.config().head_dim;
  std::vector<float> k(d), v(d);
  for (std::int32_t c = 0; c < t.num_cells(); ++c) {
    s.read_cell(c, k.data(), v.data());
    const shadow_cell& sc = shadow[c];
    for (int which = 0; which < 2; ++which) {
      const float* got = which == 0 ? k.data() : v.data();
      const std::vector<float>& want = which == 0 ? sc.k : sc.v;
      if (!sc.was_int8) {
        CHECK(d == 0 || std::memcmp(got, want.data(), sizeof(float) * d) == 0, c, which);
        continue;
      }
      float max_abs = 0.0f;
      for (const float x : want) max_abs = std::max(max_abs, std::fabs(x));
      const float bound = core::int8_scale(max_abs) * 0.5f * 1.0001f + max_abs * 1e-6f;
      for (std::int32_t i = 0; i < d; ++i) CHECK(std::fabs(got[i] - want[i]) <= bound, c, i);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  cpu::head_kv_store_config config;
  config.cell_capacity = in.ConsumeIntegralInRange<std::int32_t>(-2, kMaxCells);
  config.head_dim = in.ConsumeIntegralInRange<std::int32_t>(-1, kMaxDim);
  config.share_rows = in.ConsumeBool();
  config.share_tolerance = in.ConsumeBool() ? 0.0f : in.ConsumeFloatingPointInRange(-0.5f, 1.5f);
  config.int8_buffer = in.ConsumeBool();
  config.full_rows = in.ConsumeIntegralInRange<std::int32_t>(-1, kMaxCells + 1);
  bool valid = true;
  try {
    config.validate();
  } catch (const error&) {
    valid = false;
  }
  if (!valid) {
    try {
      cpu::head_kv_store rejected(config);
      fail_at(__LINE__, "an invalid configuration constructed a store");
    } catch (const error&) {
    }
    return 0;
  }
  cpu::head_kv_store store(config);
  const std::int32_t d = config.head_dim;
  std::vector<shadow_cell> shadow;
  std::vector<pool_tier> tiers;  // the pools last given to apply()
  bool have_tiers = false;
  std::vector<float> palette_k(4 * d), palette_v(4 * d);
  for (float& x : palette_k) x = in.ConsumeFloatingPointInRange<float>(-2.0f, 2.0f);
  for (float& x : palette_v) x = in.ConsumeFloatingPointInRange<float>(-2.0f, 2.0f);

  for (int op = 0; op < kMaxOps && in.remaining_bytes() > 0; ++op) {
    const snapshot before = snapshot::of(store);
    bool failed = false;
    try {
      switch (in.ConsumeIntegralInRange<int>(0, 4)) {
        case 0:
        case 1: {  // append: a palette row (repeats), a perturbed one, or hostile values
          std::vector<float> k(d), v(d);
          const int pick = in.ConsumeIntegralInRange<int>(0, 3);
          for (std::int32_t i = 0; i < d; ++i) {
            k[i] = pick < 3 ? palette_k[pick * d + i] : fuzz_value(in);
            v[i] = pick < 3 ? palette_v[pick * d + i] : fuzz_value(in);
          }
          if (in.ConsumeBool() && d > 0)
            k[in.ConsumeIntegralInRange<std::int32_t>(0, d - 1)] *= 1.01f;
          const pool_tier tier = in.ConsumeBool() ? pool_tier::buffer : pool_tier::emergency;
          const bool shared = store.append(k.data(), v.data(), tier);
          shadow_cell sc;
          if (shared) {
            CHECK(!shadow.empty());
            sc = shadow.back();
          } else {
            sc.k = k;
            sc.v = v;
          }
          sc.was_int8 |=
              store.table().cell_rows()[store.num_cells() - 1].precision == row_precision::int8;
          shadow.push_back(sc);
          tiers.push_back(tier);
          break;
        }
        case 2: {  // apply: a stable map with random pools, or a tampered one
          const auto n = static_cast<std::int32_t>(shadow.size());
          std::vector<std::int32_t> move_to(n);
          std::int32_t kept = 0;
          for (std::int32_t i = 0; i < n; ++i) {
            const bool keep = in.ConsumeIntegralInRange<int>(0, 3) != 0;
            move_to[i] = keep ? kept++ : -1;
          }
          if (n > 0 && in.ConsumeIntegralInRange<int>(0, 7) == 0) {
            move_to[in.ConsumeIntegralInRange<std::int32_t>(0, n - 1)] =
                in.ConsumeIntegralInRange<std::int32_t>(-2, n);
          }
          // Sized for every cell: a tampered map may keep more cells than `kept`.
          std::vector<pool_tier> after(n);
          for (pool_tier& t : after)
            t = static_cast<pool_tier>(in.ConsumeIntegralInRange<int>(0, 2));
          const bool with_tiers = in.ConsumeBool();
          const std::int32_t claimed = in.ConsumeIntegralInRange<int>(0, 9) == 0 ? n + 1 : n;
          store.apply(move_to.data(), claimed, with_tiers ? after.data() : nullptr);
          std::vector<shadow_cell> next;
          for (std::int32_t i = 0; i < n; ++i) {
            if (move_to[i] != -1) next.push_back(shadow[i]);
          }
          shadow = next;
          for (std::int32_t c = 0; c < store.num_cells(); ++c) {
            shadow[c].was_int8 |= store.table().cell_rows()[c].precision == row_precision::int8;
          }
          if (with_tiers) tiers.assign(after.begin(), after.begin() + store.num_cells());
          have_tiers = with_tiers;
          if (!with_tiers) tiers.assign(shadow.size(), pool_tier::buffer);
          break;
        }
        case 3: {  // attend
          std::vector<float> q(d), out(d), probs(shadow.size());
          for (float& x : q) x = in.ConsumeFloatingPointInRange<float>(-3.0f, 3.0f);
          store.attend(q.data(), out.data(), probs.data());
          if (shadow.empty()) break;
          double sum = 0.0;
          for (const float p : probs) {
            CHECK(std::isfinite(p) && p >= 0.0f);
            sum += p;
          }
          bool finite_rows = true;
          for (const shadow_cell& sc : shadow) {
            for (std::int32_t i = 0; i < d; ++i) {
              finite_rows &= std::fabs(sc.k[i]) < 1e6f && std::fabs(sc.v[i]) < 1e6f;
            }
          }
          if (finite_rows) CHECK(std::fabs(sum - 1.0) < 1e-3, static_cast<long long>(sum * 1e6));
          break;
        }
        default: {  // reserve
          const std::int32_t cells = in.ConsumeIntegralInRange<std::int32_t>(-1, kMaxCells + 16);
          const std::int32_t full = in.ConsumeIntegralInRange<std::int32_t>(-1, kMaxCells + 16);
          store.reserve(cells, full);
          break;
        }
      }
    } catch (const error&) {
      failed = true;
    }
    if (failed) {
      CHECK(snapshot::of(store) == before, op);
      if (shadow.size() != static_cast<std::size_t>(store.num_cells())) {
        // A failed append or apply never reached the shadow bookkeeping: nothing to undo.
        fail_at(__LINE__, "shadow out of step", static_cast<long long>(shadow.size()),
                store.num_cells());
      }
    }
    check_table(store, shadow, have_tiers ? &tiers : nullptr);
  }
  return 0;
}
