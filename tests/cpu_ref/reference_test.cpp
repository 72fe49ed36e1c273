// SPDX-License-Identifier: Apache-2.0
// The CPU oracles of the CUDA kernels against the existing CPU backends (Eigen attention,
// cpu::compact) and against values worked out from the formulas (sequence stages, selection).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <audiokv/core/shared_rows.hpp>
#include <audiokv/cpu/compact.hpp>
#include <audiokv/cpu/eigen_attention.hpp>
#include <audiokv/cpu/quantize.hpp>
#include <audiokv/cpu/reference.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

namespace ref = audiokv::cpu::reference;
using audiokv::core::kv_addressing;

std::vector<float> random_vec(std::size_t n, std::uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

TEST(Reference, OnlineAttentionMatchesEigenTwoPass) {
  for (const auto& [hq, hkv, d, n] : std::vector<std::array<int, 4>>{
           {8, 2, 64, 300}, {4, 4, 128, 17}, {8, 1, 32, 1}, {6, 2, 16, 1000}}) {
    const auto q = random_vec(static_cast<std::size_t>(hq) * d, 1);
    const auto k = random_vec(static_cast<std::size_t>(n) * hkv * d, 2, -2.f, 2.f);
    const auto v = random_vec(static_cast<std::size_t>(n) * hkv * d, 3);
    const audiokv::layout_nhd layout{{n, hkv, d}};
    audiokv::kv_view<const float> kv(k.data(), layout), vv(v.data(), layout);
    std::vector<float> out_e(hq * d), probs_e(hq * n), out_r(hq * d), probs_r(hq * n),
        scores(hkv * n);
    audiokv::cpu::decode_attention(q.data(), kv, vv, {hq, hkv, d, n}, out_e.data(), probs_e.data());
    ref::decode_attention(q.data(), k.data(), v.data(), kv_addressing{nullptr, 1, 0, hkv * d, d},
                          hq, hkv, d, n, n, out_r.data(), probs_r.data(), scores.data());
    for (std::size_t i = 0; i < out_e.size(); ++i) EXPECT_NEAR(out_r[i], out_e[i], 1e-5f) << i;
    for (std::size_t i = 0; i < probs_e.size(); ++i)
      EXPECT_NEAR(probs_r[i], probs_e[i], 1e-6f + 1e-5f * probs_e[i]) << i;
    const int g = hq / hkv;
    for (int h = 0; h < hkv; ++h)
      for (int j = 0; j < n; ++j) {
        float mean = 0.f;
        for (int i = 0; i < g; ++i) mean += probs_r[(h * g + i) * n + j];
        EXPECT_FLOAT_EQ(scores[h * n + j], mean / static_cast<float>(g));
      }
  }
}

// Per-KV-head live counts and a row stride wider than the cells: each head's rows equal the
// Eigen backend run over that head's first live[h] cells alone; later cells and the stride gap
// are not written.
TEST(Reference, PerHeadLiveCountsAndRowStride) {
  const int hq = 6, hkv = 3, d = 32, n = 40, stride = 47, g = hq / hkv;
  const std::vector<std::int32_t> live = {40, 17, 1};
  const auto q = random_vec(static_cast<std::size_t>(hq) * d, 11);
  const auto k = random_vec(static_cast<std::size_t>(n) * hkv * d, 12, -2.f, 2.f);
  const auto v = random_vec(static_cast<std::size_t>(n) * hkv * d, 13);
  constexpr float sentinel = -7.0f;
  std::vector<float> out(hq * d), probs(hq * stride, sentinel), scores(hkv * stride, sentinel);
  ref::decode_attention(q.data(), k.data(), v.data(), kv_addressing{nullptr, 1, 0, hkv * d, d}, hq,
                        hkv, d, n, stride, out.data(), probs.data(), scores.data(),
                        audiokv::gqa_reduce::mean, nullptr, live.data(), 1);
  for (int h = 0; h < hkv; ++h) {
    const int m = live[h];
    // The first m cells of every head, NHD, as a cache of m cells.
    std::vector<float> km(k.begin(), k.begin() + static_cast<std::ptrdiff_t>(m) * hkv * d);
    std::vector<float> vm(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m) * hkv * d);
    const audiokv::layout_nhd layout{{m, hkv, d}};
    audiokv::kv_view<const float> kv(km.data(), layout), vv(vm.data(), layout);
    std::vector<float> out_e(hq * d), probs_e(hq * m);
    audiokv::cpu::decode_attention(q.data(), kv, vv, {hq, hkv, d, m}, out_e.data(), probs_e.data());
    for (int i = h * g; i < (h + 1) * g; ++i) {
      for (int x = 0; x < d; ++x) EXPECT_NEAR(out[i * d + x], out_e[i * d + x], 1e-5f);
      for (int j = 0; j < m; ++j)
        EXPECT_NEAR(probs[i * stride + j], probs_e[i * m + j], 1e-6f + 1e-5f * probs_e[i * m + j]);
      for (int j = m; j < stride; ++j) EXPECT_EQ(probs[i * stride + j], sentinel) << i << " " << j;
    }
    for (int j = 0; j < m; ++j) {
      float mean = 0.f;
      for (int i = h * g; i < (h + 1) * g; ++i) mean += probs[i * stride + j];
      EXPECT_FLOAT_EQ(scores[h * stride + j], mean / static_cast<float>(g));
    }
    for (int j = m; j < stride; ++j) EXPECT_EQ(scores[h * stride + j], sentinel);
  }
}

TEST(Reference, PagedAddressingGivesTheSameAttention) {
  const int hq = 4, hkv = 2, d = 32, n = 45, P = 8, np = 6;
  const auto q = random_vec(hq * d, 4);
  const auto k = random_vec(static_cast<std::size_t>(n) * hkv * d, 5);
  const auto v = random_vec(static_cast<std::size_t>(n) * hkv * d, 6);
  const std::vector<std::int32_t> pages = {3, 0, 5, 1, 4, 2};  // pool of 6 pages, kHND
  std::vector<float> kp(np * P * hkv * d), vp(kp.size());
  const kv_addressing paged{pages.data(), P, P * hkv * d, d, P * d};
  const kv_addressing flat{nullptr, 1, 0, hkv * d, d};
  for (int c = 0; c < n; ++c)
    for (int h = 0; h < hkv; ++h)
      for (int i = 0; i < d; ++i) {
        kp[paged.row_offset(c, h) + i] = k[flat.row_offset(c, h) + i];
        vp[paged.row_offset(c, h) + i] = v[flat.row_offset(c, h) + i];
      }
  std::vector<float> o1(hq * d), o2(hq * d), p1(hq * 64), p2(hq * 64);
  ref::decode_attention(q.data(), k.data(), v.data(), flat, hq, hkv, d, n, 64, o1.data(), p1.data(),
                        nullptr);
  ref::decode_attention(q.data(), kp.data(), vp.data(), paged, hq, hkv, d, n, 64, o2.data(),
                        p2.data(), nullptr);
  EXPECT_EQ(o1, o2);
  for (int h = 0; h < hq; ++h)
    for (int j = 0; j < n; ++j) EXPECT_EQ(p1[h * 64 + j], p2[h * 64 + j]);
}

// median_rows against sorted windows (edges replicated); trend_rows against Holt's method
// worked out by hand (docs/design.md, Decisions): level s = w m + (1 - w)(s_prev + d_prev), slope
// d = g (s - s_prev) + (1 - g) d_prev, s_0 = m_0, d_0 = 0, output max(s, 0) while the state
// keeps the unclamped level. Cells past num_cells in each row are left alone.
TEST(Reference, SequenceStagesMatchHandComputedValues) {
  const int rows = 3, n = 257, stride = 300;
  const auto x = random_vec(static_cast<std::size_t>(rows) * stride, 7, 0.f, 1.f);
  std::vector<float> med(x.size(), -7.f);
  ref::median_rows<5>(x.data(), med.data(), rows, n, stride);
  for (int h = 0; h < rows; ++h) {
    for (int j = 0; j < n; ++j) {
      std::array<float, 5> w{};
      for (int k = 0; k < 5; ++k) w[k] = x[h * stride + std::clamp(j - 2 + k, 0, n - 1)];
      std::sort(w.begin(), w.end());
      ASSERT_EQ(med[h * stride + j], w[2]) << h << " " << j;
    }
    for (int j = n; j < stride; ++j) ASSERT_EQ(med[h * stride + j], -7.f);
  }

  constexpr int cells = 8, row_stride = 10;
  // Row 0 rises, falls to 0 (the level goes negative at cell 6: output 0) and recovers at cell
  // 7 from the negative level; row 1 is constant; row 2 decays from a spike.
  const std::vector<std::vector<float>> m = {{1.f, 2.f, 3.f, 0.f, 0.f, 0.f, 0.f, 1.f},
                                             std::vector<float>(cells, 0.25f),
                                             {2.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}};
  // By hand, w = 0.6, g = 0.3. Row 0: s1 = 0.6*2 + 0.4*1 = 1.6, d1 = 0.3*0.6 = 0.18;
  // s2 = 1.8 + 0.4*1.78 = 2.512, d2 = 0.3*0.912 + 0.7*0.18 = 0.3996; s3 = 0.4*2.9116 = 1.16464,
  // d3 = -0.124488; s4 = 0.4160608, d4 = -0.31171536; s5 = 0.041738176, d5 = -0.3304975392;
  // s6 = -0.11550374528 (output 0), d6 = -0.278520853824; s7 = 0.6 + 0.4*(-0.394024599104).
  // Row 2: s1 = 0.8, d1 = -0.36; s2 = 0.176, then negative levels (output 0).
  const std::vector<std::vector<double>> expected = {
      {1.0, 1.6, 2.512, 1.16464, 0.4160608, 0.041738176, 0.0, 0.4423901603584},
      std::vector<double>(cells, 0.25),
      {2.0, 0.8, 0.176, 0.0, 0.0, 0.0, 0.0, 0.0}};
  std::vector<float> in(rows * row_stride, -7.f), tr(rows * row_stride, -7.f);
  for (int h = 0; h < rows; ++h) std::copy(m[h].begin(), m[h].end(), in.begin() + h * row_stride);
  ref::trend_rows(in.data(), tr.data(), rows, cells, row_stride, 0.6f, 0.3f);
  for (int h = 0; h < rows; ++h) {
    for (int j = 0; j < cells; ++j) {
      const double e = expected[h][j];
      EXPECT_NEAR(tr[h * row_stride + j], e, 1e-6 * (1.0 + std::fabs(e))) << h << " " << j;
    }
    for (int j = cells; j < row_stride; ++j) EXPECT_EQ(tr[h * row_stride + j], -7.f);
  }
  // Other weights, w = g = 0.5: s1 = 0.5*2 + 0.5*1 = 1.5, d1 = 0.25, s2 = 1.5 + 0.5*1.75.
  ref::trend_rows(in.data(), tr.data(), 1, 3, row_stride, 0.5f, 0.5f);
  EXPECT_FLOAT_EQ(tr[0], 1.0f);
  EXPECT_FLOAT_EQ(tr[1], 1.5f);
  EXPECT_FLOAT_EQ(tr[2], 2.375f);

  // Importance: a new cell enters at its predecessor's value, then I = a a + (1 - a) I.
  std::vector<float> imp = {0.5f, 0.25f, 9.f, 9.f, 1.f, 0.f, 9.f, 9.f};
  const std::vector<float> att = {1.f, 0.f, 0.f, 0.f, 0.f, 1.f, 0.f, 0.f};
  ref::importance_enter(imp.data(), 2, 4, 2, 2, true);
  EXPECT_EQ(imp, (std::vector<float>{0.5f, 0.25f, 0.25f, 0.25f, 1.f, 0.f, 0.f, 0.f}));
  ref::importance_update(imp.data(), att.data(), 2, 4, 4, 0.3f);
  EXPECT_FLOAT_EQ(imp[0], 0.3f + 0.7f * 0.5f);
  EXPECT_FLOAT_EQ(imp[5], 0.3f);
}

TEST(Reference, SelectionTieRuleCandidatesAndShortRows) {
  const std::vector<float> s = {0.5f,     0.1f, 0.1f, 0.2f, -0.0f, 0.0f,
                                /**/ 1.f, 1.f,  1.f,  1.f,  1.f,   1.f};
  const std::vector<std::uint8_t> cand = {1, 1, 1, 1, 1, 1, /**/ 0, 1, 0, 1, 0, 0};
  const std::vector<std::int32_t> k = {3, 5};
  std::vector<std::uint8_t> ev(12);
  ref::select_lowest(s.data(), cand.data(), 2, 6, 6, k.data(), ev.data());
  // Row 0: -0 and +0 tie (the lower slot, 4, wins), then 0.1@1... k = 3 -> {4, 5, 1}.
  EXPECT_EQ(ev, (std::vector<std::uint8_t>{0, 1, 0, 0, 1, 1, /**/ 0, 1, 0, 1, 0, 0}));
}

TEST(Reference, MaskCompactionEqualsCpuCompactOnThePlan) {
  const int n = 64, heads = 4, d = 8;
  std::mt19937 gen(9);
  std::vector<std::uint8_t> keep(n);
  for (auto& kk : keep) kk = static_cast<std::uint8_t>(gen() % 3 != 0);
  std::vector<std::int32_t> move_to(n);
  std::int32_t after = 0;
  ref::move_to_from_mask(keep.data(), 1, n, n, move_to.data(), &after);
  audiokv::eviction_plan plan;
  plan.n_kv_before = n;
  plan.move_to = move_to;
  plan.n_kv_after = after;
  std::vector<float> kv = random_vec(static_cast<std::size_t>(n) * heads * d, 10);
  std::vector<float> dst(kv.size(), 0.f);
  ref::gather_rows(reinterpret_cast<const unsigned char*>(kv.data()),
                   reinterpret_cast<unsigned char*>(dst.data()), heads * d * 4, d * 4, d * 4, heads,
                   move_to.data(), 1, n, n);
  audiokv::cpu::compact_all_heads(audiokv::kv_view<float>(kv.data(), {{n, heads, d}}), plan);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(after) * heads * d; ++i)
    ASSERT_EQ(dst[i], kv[i]);
  int kept = 0;
  for (int j = 0; j < n; ++j) {
    EXPECT_EQ(move_to[j], keep[j] ? kept : -1);
    kept += keep[j];
  }
  EXPECT_EQ(after, kept);
}

TEST(Reference, QuantizeRoundTripWithinHalfAScale) {
  const int rows = 16, dim = 128;
  auto x = random_vec(static_cast<std::size_t>(rows) * dim, 11, -3.f, 3.f);
  for (int i = 0; i < dim; ++i) x[5 * dim + i] = 0.f;  // an all-zero row
  std::vector<std::int8_t> q(x.size());
  std::vector<float> scales(rows), y(x.size());
  audiokv::cpu::quantize_rows(x.data(), dim, rows, dim, q.data(), scales.data());
  audiokv::cpu::dequantize_rows(q.data(), scales.data(), rows, dim, y.data(), dim);
  EXPECT_EQ(scales[5], 1.f);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < dim; ++i) {
      EXPECT_LE(std::fabs(x[r * dim + i] - y[r * dim + i]), scales[r] * 0.5f * (1 + 1e-6f));
      EXPECT_GE(q[r * dim + i], -127);
    }
}

// Shared rows: attention over rows standing for m cells each, with logit bias ln m, equals
// attention over the cells themselves; each cell receives its row's probability / m.
TEST(Reference, SharedRowBiasEqualsAttentionOverRepeatedCells) {
  const int hq = 4, hkv = 2, d = 32, rows = 50;
  const auto q = random_vec(static_cast<std::size_t>(hq) * d, 11);
  const auto k = random_vec(static_cast<std::size_t>(rows) * hkv * d, 12, -2.f, 2.f);
  const auto v = random_vec(k.size(), 13);
  std::vector<int> multiplicity(rows), cell_row;
  for (int r = 0; r < rows; ++r) {
    multiplicity[r] = 1 + r % 4;
    for (int m = 0; m < multiplicity[r]; ++m) cell_row.push_back(r);
  }
  const int cells = static_cast<int>(cell_row.size());
  std::vector<float> k_cells(static_cast<std::size_t>(cells) * hkv * d), v_cells(k_cells.size());
  for (int c = 0; c < cells; ++c) {
    for (int i = 0; i < hkv * d; ++i) {
      k_cells[static_cast<std::size_t>(c) * hkv * d + i] = k[cell_row[c] * hkv * d + i];
      v_cells[static_cast<std::size_t>(c) * hkv * d + i] = v[cell_row[c] * hkv * d + i];
    }
  }
  std::vector<float> bias(static_cast<std::size_t>(hkv) * rows);
  for (int h = 0; h < hkv; ++h)
    for (int r = 0; r < rows; ++r)
      bias[h * rows + r] = audiokv::core::multiplicity_bias(multiplicity[r]);
  std::vector<float> out_rows(hq * d), probs_rows(hq * rows), out_cells(hq * d),
      probs_cells(static_cast<std::size_t>(hq) * cells);
  ref::decode_attention(q.data(), k.data(), v.data(), kv_addressing{nullptr, 1, 0, hkv * d, d}, hq,
                        hkv, d, rows, rows, out_rows.data(), probs_rows.data(), nullptr,
                        audiokv::gqa_reduce::mean, bias.data());
  ref::decode_attention(q.data(), k_cells.data(), v_cells.data(),
                        kv_addressing{nullptr, 1, 0, hkv * d, d}, hq, hkv, d, cells, cells,
                        out_cells.data(), probs_cells.data(), nullptr);
  for (int i = 0; i < hq * d; ++i) EXPECT_NEAR(out_rows[i], out_cells[i], 1e-6f) << i;
  for (int h = 0; h < hq; ++h) {
    for (int c = 0; c < cells; ++c) {
      const float p = audiokv::core::shared_cell_probability(probs_rows[h * rows + cell_row[c]],
                                                             multiplicity[cell_row[c]]);
      EXPECT_NEAR(p, probs_cells[static_cast<std::size_t>(h) * cells + c], 1e-7f);
    }
  }
}

}  // namespace
