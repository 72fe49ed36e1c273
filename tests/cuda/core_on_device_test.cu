// SPDX-License-Identifier: Apache-2.0
// The core/ functions the kernels are built from, executed in kernels and compared with the same
// functions on the host, whose values the CPU tests prove against references: median of 5,
// importance EMA, Holt trend steps, entropy, the segment floor, eviction ratio and count, tie rule,
// ordered score bits and 64-bit selection keys, compaction targets, int8 scale,
// quantise and dequantise, GQA reduction, online softmax, the shared-row
// bias and the row copy (every width, threads assigned to rows as the kernels do). Integer and
// bit-exact results must be equal; float arithmetic that nvcc may contract into FMA or that calls
// the device's logf/expf agrees within tests/cuda/tolerance.hpp. Every test skips without a CUDA
// device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <audiokv/core/compaction.hpp>
#include <audiokv/core/entropy.hpp>
#include <audiokv/core/gqa.hpp>
#include <audiokv/core/importance.hpp>
#include <audiokv/core/median.hpp>
#include <audiokv/core/online_softmax.hpp>
#include <audiokv/core/quantize.hpp>
#include <audiokv/core/row_copy.hpp>
#include <audiokv/core/segment_floor.hpp>
#include <audiokv/core/selection.hpp>
#include <audiokv/core/selection_key.hpp>
#include <audiokv/core/shared_rows.hpp>
#include <audiokv/core/trend.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cuda/device_buffer.hpp"
#include "cuda/tolerance.hpp"

namespace {

namespace core = audiokv::core;
namespace tol = audiokv::test::tolerance;

using audiokv::test::has_device;
#define REQUIRE_DEVICE() \
  if (!has_device()) GTEST_SKIP() << "no CUDA device: kernel execution not tested here"

template <class T>
using dbuf = audiokv::test::device_buffer<T>;

/// Waits for the last launch and reports its error.
::testing::AssertionResult launched() {
  const cudaError_t launch = cudaGetLastError();
  const cudaError_t run = cudaDeviceSynchronize();
  if (launch == cudaSuccess && run == cudaSuccess) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << cudaGetErrorString(launch != cudaSuccess ? launch : run);
}

int blocks_for(int n) { return (n + 255) / 256; }

std::vector<float> uniform(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

/// Float results that may differ by FMA contraction or device libm: relative to the magnitude,
/// with an absolute floor of the same size for values near zero.
void expect_close(float device, float host, float rel, const char* what, int i) {
  EXPECT_NEAR(device, host, rel * (1.0f + std::fabs(host))) << what << " [" << i << "]";
}

// ---- kernels: one core function (or one recurrence) per thread ----

__global__ void median5_kernel(const float* x, int n, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = core::median_at<5>(x, n, i);
}

/// One thread per row of n cells: the segment floor's marks (tier 2) of that row.
__global__ void segment_floor_kernel(const std::int32_t* pos, const float* voice,
                                     const float* score, int rows, int n,
                                     core::segment_floor_params p, std::uint8_t* tier) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const std::int64_t at = static_cast<std::int64_t>(r) * n;
  core::mark_segment_floor(pos + at, voice + at, score + at, n, p, tier + at, 2);
}

__global__ void importance_kernel(const float* previous, const float* attention, int n, float alpha,
                                  float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = core::importance_update(previous[i], attention[i], alpha);
}

/// One thread per row of n medians: the trend state (level and slope) after every cell.
__global__ void trend_kernel(const float* m, int rows, int n, float level_weight, float slope_gain,
                             float* level, float* slope) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows || n == 0) return;
  const float* x = m + static_cast<std::int64_t>(r) * n;
  float* lv = level + static_cast<std::int64_t>(r) * n;
  float* sl = slope + static_cast<std::int64_t>(r) * n;
  core::trend_state state = core::trend_start(x[0]);
  lv[0] = state.level;
  sl[0] = state.slope;
  for (int j = 1; j < n; ++j) {
    state = core::trend_step(state, x[j], level_weight, slope_gain);
    lv[j] = state.level;
    sl[j] = state.slope;
  }
}

/// One thread per row of n candidate scores: H / H_max, the ratio r and ceil(r * n).
__global__ void entropy_kernel(const float* scores, int rows, int n, float base_rate, float lambda,
                               float* entropy, float* ratio, int* count) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  core::entropy_accumulator acc;
  for (int j = 0; j < n; ++j) acc.add(scores[static_cast<std::int64_t>(r) * n + j]);
  entropy[r] = acc.normalized_entropy();
  ratio[r] = core::entropy_eviction_ratio(entropy[r], base_rate, lambda);
  count[r] = core::ratio_count(ratio[r], n);
}

/// Per cell i: its ordered score bits, its key in segment i % 3, both read back from the key,
/// and its compaction target; for i < pairs, whether it evicts before each cell j < pairs.
__global__ void selection_kernel(const float* score, const std::int32_t* pos,
                                 const std::uint8_t* keep, const std::int32_t* kept_before, int n,
                                 int pairs, int slot_bits, std::uint32_t* bits, std::uint64_t* key,
                                 std::int32_t* key_slot, std::uint32_t* key_bits,
                                 std::uint8_t* before, std::int32_t* target) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  bits[i] = core::ordered_score_bits(score[i]);
  key[i] = core::selection_key(static_cast<std::uint32_t>(i % 3), bits[i],
                               static_cast<std::uint32_t>(i), slot_bits);
  key_slot[i] = core::key_slot(key[i], slot_bits);
  key_bits[i] = core::key_score_bits(key[i], slot_bits);
  for (int j = 0; i < pairs && j < pairs; ++j) {
    before[i * pairs + j] = core::evicts_before(score[i], pos[i], score[j], pos[j]) ? 1 : 0;
  }
  target[i] = core::compaction_target(keep[i] != 0, kept_before[i]);
}

/// One thread per row of dim values: the row's int8 scale, codes and dequantised values.
__global__ void quantize_kernel(const float* x, int rows, int dim, float* scale, std::int8_t* q,
                                float* y) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* row = x + static_cast<std::int64_t>(r) * dim;
  float max_abs = 0.0f;
  for (int i = 0; i < dim; ++i) max_abs = core::max_of(max_abs, fabsf(row[i]));
  const float s = core::int8_scale(max_abs);
  scale[r] = s;
  for (int i = 0; i < dim; ++i) {
    const std::int64_t at = static_cast<std::int64_t>(r) * dim + i;
    q[at] = core::quantize_int8(row[i], s);
    y[at] = core::dequantize_int8(q[at], s);
  }
}

/// Per cell j of a [group, n] block: the mean and the max over the group's query heads.
__global__ void gqa_kernel(const float* attention, int group, int n, float* mean, float* max) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  mean[j] = core::reduce_group(attention, group, n, j, audiokv::gqa_reduce::mean);
  max[j] = core::reduce_group(attention, group, n, j, audiokv::gqa_reduce::max);
}

/// One thread per row of n logits: the probabilities of an online softmax over the row, and a
/// second state built from the two halves and merged.
__global__ void softmax_kernel(const float* logits, int rows, int n, float* probs,
                               float* merged_probs) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* x = logits + static_cast<std::int64_t>(r) * n;
  core::softmax_state whole, first, second;
  for (int j = 0; j < n; ++j) whole.add(x[j]);
  for (int j = 0; j < n / 2; ++j) first.add(x[j]);
  for (int j = n / 2; j < n; ++j) second.add(x[j]);
  first.merge(second);
  for (int j = 0; j < n; ++j) {
    probs[static_cast<std::int64_t>(r) * n + j] = whole.probability(x[j]);
    merged_probs[static_cast<std::int64_t>(r) * n + j] = first.probability(x[j]);
  }
}

/// Per row i of multiplicity m[i]: the logit bias ln m and one cell's share of p[i].
__global__ void shared_rows_kernel(const std::int32_t* multiplicity, const float* p, int n,
                                   float* bias, float* share) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  bias[i] = core::multiplicity_bias(multiplicity[i]);
  share[i] = core::shared_cell_probability(p[i], multiplicity[i]);
}

/// Rows r < rows of `bytes` bytes, row_stride apart: dst row r = src row r, each row by
/// core::row_copy_lanes threads of the grid taken by core::assign_row_lanes.
__global__ void row_copy_kernel(unsigned char* dst, const unsigned char* src, std::int64_t bytes,
                                std::int64_t row_stride, std::int64_t rows, int width) {
  const std::int64_t lanes = core::row_copy_lanes(bytes / width);
  const core::row_lane_assignment a =
      core::assign_row_lanes(static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                             static_cast<std::int64_t>(gridDim.x) * blockDim.x, lanes);
  for (std::int64_t r = a.first; r < rows; r += a.step)
    core::copy_row(dst + r * row_stride, src + r * row_stride, bytes, width, a.lane, lanes);
}

// ---- tests ----

TEST(CudaCore, MedianMatchesHost) {
  REQUIRE_DEVICE();
  const int n = 1000;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>((i * 7919) % 101);
  dbuf<float> dx(x), dy(n);
  median5_kernel<<<blocks_for(n), 256>>>(dx.p, n, dy.p);
  ASSERT_TRUE(launched());
  const auto y = dy.down();
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], core::median_at<5>(x.data(), n, i)) << i;
}

TEST(CudaCore, ImportanceUpdateMatchesHost) {
  REQUIRE_DEVICE();
  const int n = 4096;
  const auto previous = uniform(n, 1, 0.0f, 1.0f);
  auto attention = uniform(n, 2, 0.0f, 1.0f);
  attention[0] = 0.0f;
  attention[1] = 1.0f;
  dbuf<float> dp(previous), da(attention), dout(n);
  for (const float alpha : {0.3f, 1.0f, 0.05f}) {
    importance_kernel<<<blocks_for(n), 256>>>(dp.p, da.p, n, alpha, dout.p);
    ASSERT_TRUE(launched());
    const auto out = dout.down();
    for (int i = 0; i < n; ++i) {
      expect_close(out[i], core::importance_update(previous[i], attention[i], alpha),
                   tol::stage_rel, "importance", i);
    }
  }
}

TEST(CudaCore, TrendStepsMatchHost) {
  REQUIRE_DEVICE();
  const int rows = 8, n = 97;
  auto m = uniform(static_cast<std::size_t>(rows) * n, 3, 0.0f, 1.0f);
  for (int j = 0; j < n; ++j) m[j] = j < 3 ? static_cast<float>(j + 1) : 0.0f;  // level < 0
  dbuf<float> dm(m), dlevel(m.size()), dslope(m.size());
  trend_kernel<<<1, 32>>>(dm.p, rows, n, 0.6f, 0.3f, dlevel.p, dslope.p);
  ASSERT_TRUE(launched());
  const auto level = dlevel.down(), slope = dslope.down();
  for (int r = 0; r < rows; ++r) {
    core::trend_state state = core::trend_start(m[r * n]);
    for (int j = 0; j < n; ++j) {
      if (j > 0) state = core::trend_step(state, m[r * n + j], 0.6f, 0.3f);
      expect_close(level[r * n + j], state.level, tol::stage_rel, "level", r * n + j);
      expect_close(slope[r * n + j], state.slope, tol::stage_rel, "slope", r * n + j);
    }
  }
  EXPECT_LT(level[6], 0.0f);  // the state is not clamped (the stage clamps its output)
}

TEST(CudaCore, EntropyRatioAndCountMatchHost) {
  REQUIRE_DEVICE();
  const int rows = 6, n = 200;
  auto s = uniform(static_cast<std::size_t>(rows) * n, 4, 0.0f, 1.0f);
  for (int j = 0; j < n; ++j) {
    s[1 * n + j] = 0.5f;                  // flat: H / H_max = 1
    s[2 * n + j] = j == 7 ? 1.0f : 0.0f;  // one peak: H = 0
    s[3 * n + j] = j % 2 ? -1.0f : 2.0f;  // negatives count as zero mass
    s[4 * n + j] = 0.0f;                  // no mass: 1
    s[5 * n + j] = j < 10 ? 1e-30f : 1e30f;
  }
  dbuf<float> ds(s), dh(rows), dr(rows);
  dbuf<int> dc(rows);
  entropy_kernel<<<1, 32>>>(ds.p, rows, n, 0.05f, 0.2f, dh.p, dr.p, dc.p);
  ASSERT_TRUE(launched());
  const auto h = dh.down(), ratio = dr.down();
  const auto count = dc.down();
  for (int r = 0; r < rows; ++r) {
    core::entropy_accumulator acc;
    for (int j = 0; j < n; ++j) acc.add(s[r * n + j]);
    const float host_h = acc.normalized_entropy();
    expect_close(h[r], host_h, tol::stage_rel, "entropy", r);
    expect_close(ratio[r], core::entropy_eviction_ratio(host_h, 0.05f, 0.2f), tol::stage_rel,
                 "ratio", r);
    // The count from the device's own ratio: ceil(r * n) is exact integer logic.
    EXPECT_EQ(count[r], core::ratio_count(ratio[r], n)) << r;
  }
  EXPECT_NEAR(h[1], 1.0f, 1e-6f);
  EXPECT_FLOAT_EQ(h[2], 0.0f);
  EXPECT_FLOAT_EQ(h[4], 1.0f);
  EXPECT_EQ(count[2], 50);  // r = 0.05 + 0.2 = 0.25 of 200
}

TEST(CudaCore, SelectionKeysTieRuleAndCompactionTargetsMatchHost) {
  REQUIRE_DEVICE();
  const float inf = std::numeric_limits<float>::infinity();
  const float denorm = std::numeric_limits<float>::denorm_min();
  // The first `pairs` scores hold ties (0.5, +-0, 1.0) whose positions come in both orders.
  constexpr int pairs = 16;
  std::vector<float> score = {0.5f,    -0.0f, 0.0f,  denorm,  -denorm,  inf,  -inf, 1e-30f,
                              -1e-30f, 0.5f,  0.25f, 3.0e38f, -3.0e38f, 1.0f, 1.0f, 0.1f};
  const auto more = uniform(1000, 5, -2.0f, 2.0f);
  score.insert(score.end(), more.begin(), more.end());
  const int n = static_cast<int>(score.size());
  std::vector<std::int32_t> pos(n), kept_before(n);
  std::vector<std::uint8_t> keep(n);
  std::int32_t kept = 0;
  for (int i = 0; i < n; ++i) {
    pos[i] = i < pairs ? (i * 7) % pairs : 3 * i + 1;  // a permutation of 0..15 first
    keep[i] = static_cast<std::uint8_t>(i % 3 != 1);
    kept_before[i] = kept;
    kept += keep[i];
  }
  const int slot_bits = core::bits_for(static_cast<std::uint32_t>(n));
  ASSERT_TRUE(core::selection_key_fits(3, static_cast<std::uint32_t>(n)));
  dbuf<float> dscore(score);
  dbuf<std::int32_t> dpos(pos), dkb(kept_before), dslot(n), dtarget(n);
  dbuf<std::uint8_t> dkeep(keep), dbefore(pairs * pairs);
  dbuf<std::uint32_t> dbits(n), dkbits(n);
  dbuf<std::uint64_t> dkey(n);
  selection_kernel<<<blocks_for(n), 256>>>(dscore.p, dpos.p, dkeep.p, dkb.p, n, pairs, slot_bits,
                                           dbits.p, dkey.p, dslot.p, dkbits.p, dbefore.p,
                                           dtarget.p);
  ASSERT_TRUE(launched());
  const auto bits = dbits.down();
  const auto key = dkey.down();
  const auto slot = dslot.down(), target = dtarget.down();
  const auto key_bits = dkbits.down();
  const auto before = dbefore.down();
  for (int i = 0; i < n; ++i) {
    const std::uint32_t host_bits = core::ordered_score_bits(score[i]);
    ASSERT_EQ(bits[i], host_bits) << i;
    ASSERT_EQ(key[i], core::selection_key(static_cast<std::uint32_t>(i % 3), host_bits,
                                          static_cast<std::uint32_t>(i), slot_bits))
        << i;
    ASSERT_EQ(slot[i], i) << i;
    ASSERT_EQ(key_bits[i], host_bits) << i;
    ASSERT_EQ(target[i], core::compaction_target(keep[i] != 0, kept_before[i])) << i;
  }
  for (int i = 0; i < pairs; ++i) {
    for (int j = 0; j < pairs; ++j) {
      ASSERT_EQ(before[i * pairs + j] != 0, core::evicts_before(score[i], pos[i], score[j], pos[j]))
          << i << " " << j;
    }
  }
  // Equal scores: the older position goes first, whatever the slot order (1.0 at slots 13 and
  // 14 has positions 11 and 2).
  EXPECT_EQ(before[14 * pairs + 13], 1);
  EXPECT_EQ(before[13 * pairs + 14], 0);
  EXPECT_EQ(bits[1], bits[2]);  // -0 and +0 share a key
  EXPECT_EQ(target[1], core::evicted_slot);
}

TEST(CudaCore, Int8ScaleQuantiseAndDequantiseMatchHost) {
  REQUIRE_DEVICE();
  const int rows = 12, dim = 64;
  auto x = uniform(static_cast<std::size_t>(rows) * dim, 6, -3.0f, 3.0f);
  const float fmin = std::numeric_limits<float>::min();
  for (int i = 0; i < dim; ++i) {
    x[1 * dim + i] = 0.0f;                                                    // scale 1
    x[2 * dim + i] = (i % 5 - 2) * std::numeric_limits<float>::denorm_min();  // subnormal row
    x[3 * dim + i] = (i % 7 - 3) * 10.0f * fmin;                              // max / 127 subnormal
    x[4 * dim + i] = i % 2 ? std::numeric_limits<float>::max() : -1.0f;
    x[5 * dim + i] = (i - 32) * 0.5f;  // exact halves: rounding
  }
  x[6 * dim + 3] = std::numeric_limits<float>::quiet_NaN();  // NaN codes 0
  dbuf<float> dx(x), dscale(rows), dy(x.size());
  dbuf<std::int8_t> dq(x.size());
  quantize_kernel<<<1, 32>>>(dx.p, rows, dim, dscale.p, dq.p, dy.p);
  ASSERT_TRUE(launched());
  const auto scale = dscale.down(), y = dy.down();
  const auto q = dq.down();
  for (int r = 0; r < rows; ++r) {
    float max_abs = 0.0f;
    for (int i = 0; i < dim; ++i) max_abs = core::max_of(max_abs, std::fabs(x[r * dim + i]));
    const float host_scale = core::int8_scale(max_abs);
    ASSERT_EQ(scale[r], host_scale) << r;
    for (int i = 0; i < dim; ++i) {
      const int at = r * dim + i;
      const std::int8_t host_q = core::quantize_int8(x[at], host_scale);
      ASSERT_EQ(q[at], host_q) << r << " " << i;
      ASSERT_EQ(y[at], core::dequantize_int8(host_q, host_scale)) << r << " " << i;
    }
  }
  EXPECT_EQ(scale[1], 1.0f);
  EXPECT_GT(scale[3], 0.0f);
  EXPECT_EQ(q[6 * dim + 3], 0);
}

TEST(CudaCore, GqaReductionMatchesHost) {
  REQUIRE_DEVICE();
  const int group = 7, n = 513;
  const auto a = uniform(static_cast<std::size_t>(group) * n, 7, 0.0f, 1.0f);
  dbuf<float> da(a), dmean(n), dmax(n);
  gqa_kernel<<<blocks_for(n), 256>>>(da.p, group, n, dmean.p, dmax.p);
  ASSERT_TRUE(launched());
  const auto mean = dmean.down(), max = dmax.down();
  for (int j = 0; j < n; ++j) {
    // Same additions in the same order and one division: no contraction applies.
    ASSERT_EQ(mean[j], core::reduce_group(a.data(), group, n, j, audiokv::gqa_reduce::mean)) << j;
    ASSERT_EQ(max[j], core::reduce_group(a.data(), group, n, j, audiokv::gqa_reduce::max)) << j;
  }
}

TEST(CudaCore, OnlineSoftmaxAndSharedRowBiasMatchHost) {
  REQUIRE_DEVICE();
  const int rows = 4, n = 300;
  auto logits = uniform(static_cast<std::size_t>(rows) * n, 8, -20.0f, 20.0f);
  for (int j = 0; j < n; ++j) logits[n + j] = 1.0f;  // uniform row
  dbuf<float> dl(logits), dp(logits.size()), dm(logits.size());
  softmax_kernel<<<1, 32>>>(dl.p, rows, n, dp.p, dm.p);
  ASSERT_TRUE(launched());
  const auto probs = dp.down(), merged = dm.down();
  for (int r = 0; r < rows; ++r) {
    core::softmax_state whole;
    for (int j = 0; j < n; ++j) whole.add(logits[r * n + j]);
    for (int j = 0; j < n; ++j) {
      const int at = r * n + j;
      const float host = whole.probability(logits[at]);
      EXPECT_NEAR(probs[at], host, tol::probability_abs + tol::probability_rel * host) << at;
      EXPECT_NEAR(merged[at], host, tol::probability_abs + tol::probability_rel * host) << at;
    }
  }
  EXPECT_NEAR(probs[n], 1.0f / n, tol::probability_rel / n);

  const int m = 64;
  std::vector<std::int32_t> multiplicity(m);
  const auto p = uniform(m, 9, 0.0f, 1.0f);
  for (int i = 0; i < m; ++i) multiplicity[i] = 1 + i * 37 % 1000;
  dbuf<std::int32_t> dmult(multiplicity);
  dbuf<float> dprow(p), dbias(m), dshare(m);
  shared_rows_kernel<<<1, 64>>>(dmult.p, dprow.p, m, dbias.p, dshare.p);
  ASSERT_TRUE(launched());
  const auto bias = dbias.down(), share = dshare.down();
  for (int i = 0; i < m; ++i) {
    expect_close(bias[i], core::multiplicity_bias(multiplicity[i]), tol::stage_rel, "bias", i);
    ASSERT_EQ(share[i], core::shared_cell_probability(p[i], multiplicity[i])) << i;
  }
  EXPECT_EQ(bias[0], 0.0f);  // ln 1
}

TEST(CudaCore, RowCopyIsByteExactForEveryWidth) {
  REQUIRE_DEVICE();
  // (row bytes, offset of both buffers from a 256-byte boundary): widths 16, 8, 4 and 1.
  const std::int64_t cases[][2] = {{256, 0},  {24576, 0}, {24, 0},   {256, 8}, {12, 0},
                                   {3072, 4}, {2, 0},     {1027, 0}, {256, 1}};
  const int expected_width[] = {16, 16, 8, 8, 4, 4, 1, 1, 1};
  for (int c = 0; c < 9; ++c) {
    const std::int64_t bytes = cases[c][0], offset = cases[c][1], rows = 37;
    const std::int64_t stride = bytes + 16 - bytes % 16;  // keeps the row's own alignment
    const std::size_t total = static_cast<std::size_t>(rows * stride + 256);
    std::vector<unsigned char> host(total);
    for (std::size_t i = 0; i < total; ++i) host[i] = static_cast<unsigned char>(i * 131u + 7u);
    dbuf<unsigned char> src(host), dst(std::vector<unsigned char>(total, 0xEE));
    const int width = core::row_copy_width(bytes, dst.p + offset, src.p + offset, stride);
    ASSERT_EQ(width, expected_width[c]) << bytes << " bytes at offset " << offset;
    row_copy_kernel<<<3, 256>>>(dst.p + offset, src.p + offset, bytes, stride, rows, width);
    ASSERT_TRUE(launched());
    const auto out = dst.down();
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(total); ++i) {
      const std::int64_t in_row = (i - offset) % stride;
      const bool copied = i >= offset && i < offset + rows * stride && in_row < bytes;
      ASSERT_EQ(out[i], copied ? host[i] : 0xEE) << bytes << " bytes, byte " << i;
    }
  }
}

// The segment floor marks the same cells on the device as on the host (weights that are exact
// in double: voice 0 or 1 with silence weight 0.5, no decay; rows 0 mod 4 keep a sink).
TEST(CudaCore, SegmentFloorMatchesHost) {
  REQUIRE_DEVICE();
  const int rows = 64, n = 500;
  std::vector<std::int32_t> pos(static_cast<size_t>(rows) * n);
  std::vector<float> voice(pos.size());
  std::vector<std::uint8_t> tier(pos.size(), 0);
  std::mt19937 gen(11);
  for (int r = 0; r < rows; ++r) {
    std::int32_t p = 0;
    for (int j = 0; j < n; ++j) {
      p += 1 + static_cast<std::int32_t>(gen() % 4);
      pos[static_cast<size_t>(r) * n + j] = p;
      voice[static_cast<size_t>(r) * n + j] = static_cast<float>(gen() % 2);
    }
    if (r % 4 == 0) tier[static_cast<size_t>(r) * n + 7] = 3;
  }
  const std::vector<float> score = uniform(pos.size(), 12, 0.0f, 1.0f);
  core::segment_floor_params params;
  params.floor = 37;
  params.segment_cells = 2;
  params.silence_weight = 0.5;
  params.scored_until = 900;
  std::vector<std::uint8_t> host = tier;
  for (int r = 0; r < rows; ++r) {
    const size_t at = static_cast<size_t>(r) * n;
    core::mark_segment_floor(pos.data() + at, voice.data() + at, score.data() + at, n, params,
                             host.data() + at, 2);
  }
  dbuf<std::int32_t> d_pos(pos);
  dbuf<float> d_voice(voice), d_score(score);
  dbuf<std::uint8_t> d_tier(tier);
  segment_floor_kernel<<<1, rows>>>(d_pos.p, d_voice.p, d_score.p, rows, n, params, d_tier.p);
  ASSERT_TRUE(launched());
  EXPECT_EQ(d_tier.down(), host);
}

}  // namespace
