// SPDX-License-Identifier: Apache-2.0
// Every kernel of include/audiokv/cuda against its CPU reference on identical inputs:
// selection, masks, move_to, gathered bytes, paged tables and int8 codes exactly; float math
// within tests/cuda/tolerance.hpp. Skips without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/cpu/paged.hpp>
#include <audiokv/cpu/quantize.hpp>
#include <audiokv/cpu/reference.hpp>
#include <audiokv/cuda.cuh>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/device_buffer.hpp"
#include "cuda/tolerance.hpp"

namespace {

namespace ref = audiokv::cpu::reference;
namespace cu = audiokv::cuda;
namespace tol = audiokv::test::tolerance;

using audiokv::test::has_device;
#define REQUIRE_DEVICE() \
  if (!has_device()) GTEST_SKIP() << "no CUDA device: kernel not executed on this machine"

template <class T>
using dbuf = audiokv::test::device_buffer<T>;

std::vector<float> random_vec(std::size_t n, std::uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

using audiokv::cuda::detail::from_float;
using audiokv::cuda::detail::to_float;

template <class T>
void run_attention(cu::dtype type, int d, int hq, int hkv, int n, bool with_v, int live) {
  const auto q = random_vec(static_cast<std::size_t>(hq) * d, 1);
  auto kf = random_vec(static_cast<std::size_t>(n) * hkv * d, 2, -2.f, 2.f);
  auto vf = random_vec(kf.size(), 3);
  std::vector<T> kt(kf.size()), vt(vf.size());
  for (std::size_t i = 0; i < kf.size(); ++i) {
    kt[i] = from_float<T>(kf[i]);
    kf[i] = to_float(kt[i]);
    vt[i] = from_float<T>(vf[i]);
    vf[i] = to_float(vt[i]);
  }
  const audiokv::core::kv_addressing addr{nullptr, 1, 0, hkv * d, d};  // NHD
  std::vector<float> out_r(hq * d), probs_r(static_cast<std::size_t>(hq) * n),
      scores_r(static_cast<std::size_t>(hkv) * n);
  ref::decode_attention(q.data(), kf.data(), with_v ? vf.data() : nullptr, addr, hq, hkv, d, live,
                        n, out_r.data(), probs_r.data(), scores_r.data(), audiokv::gqa_reduce::max);
  const cu::attention_shape shape{hq, hkv, d, n};
  dbuf<float> dq(q), dout(out_r.size()), dprobs(probs_r.size()), dscores(scores_r.size());
  dbuf<T> dk(kt), dv(vt);
  dbuf<std::int32_t> dlive(std::vector<std::int32_t>{live});
  const std::size_t ws = cu::decode_attention_workspace_bytes(shape);
  dbuf<unsigned char> dws(ws);
  ASSERT_EQ(cu::decode_attention(shape, type, dq.p, dk.p, with_v ? dv.p : nullptr, addr, dout.p,
                                 dprobs.p, dscores.p, audiokv::gqa_reduce::max,
                                 live < n ? dlive.p : nullptr, dws.p, ws, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto probs = dprobs.down();
  const auto scores = dscores.down();
  for (int h = 0; h < hq; ++h)
    for (int j = 0; j < live; ++j) {
      const float e = probs_r[h * n + j];
      ASSERT_NEAR(probs[h * n + j], e, tol::probability_abs + tol::probability_rel * e)
          << "h=" << h << " j=" << j;
    }
  for (int h = 0; h < hkv; ++h)
    for (int j = 0; j < live; ++j) {
      const float e = scores_r[h * n + j];
      ASSERT_NEAR(scores[h * n + j], e, tol::probability_abs + tol::probability_rel * e);
    }
  if (with_v) {
    const auto out = dout.down();
    for (std::size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], out_r[i], tol::attention_out_abs) << i;
  }
}

TEST(CudaAttention, MatchesReferenceAllTypesAndHeadDims) {
  REQUIRE_DEVICE();
  for (int d : {64, 128}) {
    run_attention<float>(cu::dtype::f32, d, 8, 2, 1000, true, 1000);
    run_attention<__half>(cu::dtype::f16, d, 32, 8, 3000, true, 3000);
    run_attention<__nv_bfloat16>(cu::dtype::bf16, d, 16, 1, 70000, true, 70000);  // G = 16
    run_attention<__nv_bfloat16>(cu::dtype::bf16, d, 4, 4, 513, true, 300);       // live < capacity
  }
}

// Per-KV-head live counts (live_stride 1) and probabilities in rows wider than the cells.
TEST(CudaAttention, PerHeadLiveCountsAndRowStrideMatchReference) {
  REQUIRE_DEVICE();
  const int d = 64, hq = 8, hkv = 4, n = 700, stride = 768;
  const std::vector<std::int32_t> live = {700, 513, 64, 1};
  const auto q = random_vec(static_cast<std::size_t>(hq) * d, 21);
  const auto k = random_vec(static_cast<std::size_t>(n) * hkv * d, 22, -2.f, 2.f);
  const auto v = random_vec(k.size(), 23);
  const audiokv::core::kv_addressing addr{nullptr, 1, 0, hkv * d, d};  // NHD
  constexpr float sentinel = -7.0f;
  std::vector<float> out_r(hq * d), probs_r(static_cast<std::size_t>(hq) * stride, sentinel),
      scores_r(static_cast<std::size_t>(hkv) * stride, sentinel);
  ref::decode_attention(q.data(), k.data(), v.data(), addr, hq, hkv, d, n, stride, out_r.data(),
                        probs_r.data(), scores_r.data(), audiokv::gqa_reduce::mean, nullptr,
                        live.data(), 1);
  const cu::attention_shape shape{hq, hkv, d, n};
  dbuf<float> dq(q), dk(k), dv(v), dout(out_r.size()), dprobs(probs_r), dscores(scores_r);
  dbuf<std::int32_t> dlive(live);
  const std::size_t ws = cu::decode_attention_workspace_bytes(shape);
  dbuf<unsigned char> dws(ws);
  ASSERT_EQ(cu::decode_attention(shape, cu::dtype::f32, dq.p, dk.p, dv.p, addr, dout.p, dprobs.p,
                                 dscores.p, audiokv::gqa_reduce::mean, dlive.p, dws.p, ws, nullptr,
                                 nullptr, 1, stride),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto probs = dprobs.down();
  const auto scores = dscores.down();
  const auto out = dout.down();
  for (std::size_t i = 0; i < probs.size(); ++i) {
    const float e = probs_r[i];
    ASSERT_NEAR(probs[i], e, tol::probability_abs + tol::probability_rel * std::fabs(e)) << i;
  }
  for (std::size_t i = 0; i < scores.size(); ++i) {
    const float e = scores_r[i];
    ASSERT_NEAR(scores[i], e, tol::probability_abs + tol::probability_rel * std::fabs(e)) << i;
  }
  for (std::size_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(out[i], out_r[i], tol::attention_out_abs) << i;
  EXPECT_EQ(cu::decode_attention(shape, cu::dtype::f32, dq.p, dk.p, dv.p, addr, dout.p, dprobs.p,
                                 dscores.p, audiokv::gqa_reduce::mean, dlive.p, dws.p, ws, nullptr,
                                 nullptr, 1, n - 1),
            cudaErrorInvalidValue);
  EXPECT_EQ(cu::decode_attention(shape, cu::dtype::f32, dq.p, dk.p, dv.p, addr, dout.p, dprobs.p,
                                 dscores.p, audiokv::gqa_reduce::mean, dlive.p, dws.p, ws, nullptr,
                                 nullptr, 2, stride),
            cudaErrorInvalidValue);
}

TEST(CudaAttention, ScoringOnlyMatchesReference) {
  REQUIRE_DEVICE();
  run_attention<__nv_bfloat16>(cu::dtype::bf16, 128, 32, 8, 4096, false, 4096);
  run_attention<float>(cu::dtype::f32, 64, 6, 2, 17, false, 17);
}

TEST(CudaStages, ImportanceMedianTrendMatchReference) {
  REQUIRE_DEVICE();
  const int rows = 8, n = 5000, stride = 5120;
  auto imp = random_vec(static_cast<std::size_t>(rows) * stride, 4, 0.f, 1.f);
  const auto att = random_vec(imp.size(), 5, 0.f, 1.f);
  dbuf<float> di(imp), da(att), dm(imp.size()), dt(imp.size());
  ASSERT_EQ(cu::importance_enter(di.p, rows, stride, n - 3, 3, true, nullptr), cudaSuccess);
  ASSERT_EQ(cu::importance_update(di.p, da.p, rows, n, stride, 0.3f, nullptr, nullptr),
            cudaSuccess);
  ASSERT_EQ(cu::median<5>(di.p, dm.p, rows, n, stride, nullptr), cudaSuccess);
  ASSERT_EQ(cu::trend(dm.p, dt.p, rows, n, stride, 0.6f, 0.3f, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ref::importance_enter(imp.data(), rows, stride, n - 3, 3, true);
  ref::importance_update(imp.data(), att.data(), rows, n, stride, 0.3f);
  std::vector<float> med(imp.size()), tr(imp.size());
  const auto gi = di.down();
  for (int h = 0; h < rows; ++h)
    for (int j = 0; j < n; ++j)
      ASSERT_NEAR(gi[h * stride + j], imp[h * stride + j],
                  tol::stage_rel * (1 + imp[h * stride + j]));
  // Median and trend from the GPU's own importance: the medians are then bit-identical.
  ref::median_rows<5>(gi.data(), med.data(), rows, n, stride);
  const auto gm = dm.down();
  for (int h = 0; h < rows; ++h)
    for (int j = 0; j < n; ++j) ASSERT_EQ(gm[h * stride + j], med[h * stride + j]);
  ref::trend_rows(med.data(), tr.data(), rows, n, stride, 0.6f, 0.3f);
  const auto gt = dt.down();
  for (int h = 0; h < rows; ++h)
    for (int j = 0; j < n; ++j)
      ASSERT_NEAR(gt[h * stride + j], tr[h * stride + j],
                  tol::stage_rel * (1 + tr[h * stride + j]));
}

TEST(CudaSelection, IdenticalSetsToCpuIncludingTies) {
  REQUIRE_DEVICE();
  for (const auto& [rows, n] :
       std::vector<std::pair<int, int>>{{8, 4096}, {3, 1000}, {8, 131072}}) {
    std::mt19937 gen(rows * n);
    std::vector<float> s(static_cast<std::size_t>(rows) * n);
    for (auto& x : s) x = static_cast<float>(gen() % 64) / 64.0f - 0.25f;  // many ties, +-0
    std::vector<std::uint8_t> cand(s.size());
    for (auto& c : cand) c = gen() % 5 != 0;
    std::vector<std::int32_t> k(rows);
    for (int h = 0; h < rows; ++h) k[h] = static_cast<int>(gen() % n);
    std::vector<std::uint8_t> ev_r(s.size());
    ref::select_lowest(s.data(), cand.data(), rows, n, n, k.data(), ev_r.data());
    dbuf<float> ds(s);
    dbuf<std::uint8_t> dc(cand), dev(s.size()), dkeep(s.size());
    dbuf<std::int32_t> dk(k);
    const std::size_t ws = cu::select_workspace_bytes(rows, n);
    dbuf<unsigned char> dws(ws);
    ASSERT_EQ(cu::select_lowest(ds.p, dc.p, rows, n, n, dk.p, dev.p, dkeep.p, dws.p, ws, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto ev = dev.down();
    const auto keep = dkeep.down();
    for (std::size_t i = 0; i < s.size(); ++i) {
      ASSERT_EQ(ev[i], ev_r[i]) << i;
      ASSERT_EQ(keep[i], 1 - ev_r[i]) << i;
    }
  }
}

// NaN scores (which the device cannot reject) rank lowest on both backends: the device's keys
// and the CPU reference's partition use the one total order of core/selection.hpp.
TEST(CudaSelection, NanScoresRankLowestAsOnTheCpu) {
  REQUIRE_DEVICE();
  const int rows = 4, n = 3000;
  std::mt19937 gen(17);
  std::vector<float> s(static_cast<std::size_t>(rows) * n);
  for (std::size_t i = 0; i < s.size(); ++i) {
    const float x = static_cast<float>(gen() % 64) / 64.0f - 0.25f;
    s[i] = i % 3 == 0 ? (i % 2 == 0 ? std::nanf("") : -std::nanf("")) : x;
  }
  std::vector<std::int32_t> k = {1, 500, 1000, 2999};
  std::vector<std::uint8_t> ev_r(s.size());
  ref::select_lowest(s.data(), nullptr, rows, n, n, k.data(), ev_r.data());
  dbuf<float> ds(s);
  dbuf<std::uint8_t> dev(s.size());
  dbuf<std::int32_t> dk(k);
  const std::size_t ws = cu::select_workspace_bytes(rows, n);
  dbuf<unsigned char> dws(ws);
  ASSERT_EQ(cu::select_lowest(ds.p, nullptr, rows, n, n, dk.p, dev.p, nullptr, dws.p, ws, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto ev = dev.down();
  for (std::size_t i = 0; i < s.size(); ++i) ASSERT_EQ(ev[i], ev_r[i]) << i;
}

TEST(CudaCompaction, MoveToAndGatherAreExact) {
  REQUIRE_DEVICE();
  const int n = 20000, heads = 8, d = 128, rows = heads;
  std::mt19937 gen(11);
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(rows) * n);
  for (auto& x : keep) x = gen() % 4 != 0;
  std::vector<std::int32_t> mt_r(keep.size()), after_r(rows);
  ref::move_to_from_mask(keep.data(), rows, n, n, mt_r.data(), after_r.data());
  dbuf<std::uint8_t> dkeep(keep);
  dbuf<std::int32_t> dmt(keep.size()), dafter(rows);
  const std::size_t ws = cu::move_to_workspace_bytes(rows, n);
  dbuf<unsigned char> dws(ws);
  ASSERT_EQ(cu::move_to_from_mask(dkeep.p, rows, n, n, dmt.p, dafter.p, dws.p, ws, nullptr),
            cudaSuccess);
  // Per-head plan over a [cells, heads, dim] bf16 tensor, and a shared plan (row 0) on bytes
  // with an odd row size (byte path).
  std::vector<std::uint16_t> src(static_cast<std::size_t>(n) * heads * d);
  for (auto& x : src) x = static_cast<std::uint16_t>(gen());
  dbuf<std::uint16_t> dsrc(src), ddst(src.size());
  ASSERT_EQ(cudaMemset(ddst.p, 0, src.size() * 2), cudaSuccess);
  const cu::row_layout layout{0, heads * d * 2, d * 2, d * 2, heads};
  ASSERT_EQ(cu::gather_rows(dsrc.p, ddst.p, layout, dmt.p, heads, n, n, nullptr), cudaSuccess);
  const cu::row_layout odd{0, heads * d * 2, d * 2, d * 2 - 1, heads};
  dbuf<std::uint16_t> ddst2(src.size());
  ASSERT_EQ(cudaMemset(ddst2.p, 0, src.size() * 2), cudaSuccess);
  ASSERT_EQ(cu::gather_rows(dsrc.p, ddst2.p, odd, dmt.p, 1, n, n, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(dmt.down(), mt_r);
  EXPECT_EQ(dafter.down(), after_r);
  std::vector<std::uint16_t> dst_r(src.size(), 0), dst2_r(src.size(), 0);
  ref::gather_rows(reinterpret_cast<const unsigned char*>(src.data()),
                   reinterpret_cast<unsigned char*>(dst_r.data()), heads * d * 2, d * 2, d * 2,
                   heads, mt_r.data(), heads, n, n);
  ref::gather_rows(reinterpret_cast<const unsigned char*>(src.data()),
                   reinterpret_cast<unsigned char*>(dst2_r.data()), heads * d * 2, d * 2, d * 2 - 1,
                   heads, mt_r.data(), 1, n, n);
  EXPECT_EQ(ddst.down(), dst_r);
  EXPECT_EQ(ddst2.down(), dst2_r);
}

TEST(CudaPaged, TableAndMovesMatchCpuRule) {
  REQUIRE_DEVICE();
  for (int P : {1, 4, 16}) {
    std::mt19937 gen(P);
    const int batch = 5, pool_pages = 4000, heads = 2, d = 64;
    std::vector<std::int32_t> indptr{0}, last, indices, perm(pool_pages);
    for (int i = 0; i < pool_pages; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), gen);
    int next = 0;
    for (int b = 0; b < batch; ++b) {
      const int np = 1 + static_cast<int>(gen() % 300);
      for (int p = 0; p < np; ++p) indices.push_back(perm[next++]);
      indptr.push_back(indptr.back() + np);
      last.push_back(1 + static_cast<int>(gen() % P));
    }
    std::vector<std::int32_t> spares(perm.begin() + next, perm.begin() + next + 200);
    std::vector<std::uint8_t> keep(indices.size() * P);
    for (std::size_t i = 0; i < keep.size(); ++i)  // runs of evictions, some whole pages
      keep[i] = (i / (P * 3)) % 2 == 0 || gen() % 3 != 0;
    const auto r = audiokv::cpu::plan_paged_compaction(indices.data(), indptr.data(), last.data(),
                                                       batch, P, keep.data(), spares.data(), 200);
    const std::size_t row_bytes = d * 2;
    std::vector<std::uint8_t> pool(static_cast<std::size_t>(pool_pages) * P * heads * row_bytes);
    for (auto& x : pool) x = static_cast<std::uint8_t>(gen());
    auto pool_r = pool;
    const cu::row_layout layout{static_cast<std::int64_t>(P * heads * row_bytes),
                                static_cast<std::int64_t>(heads * row_bytes),
                                static_cast<std::int64_t>(row_bytes),
                                static_cast<std::int64_t>(row_bytes), heads};
    if (r.ok)
      audiokv::cpu::apply_paged_moves(pool_r.data(), layout.page_stride, layout.entry_stride,
                                      layout.head_stride, heads, layout.row_bytes, r.moves);
    const int nnz = indptr.back();
    dbuf<std::int32_t> di(indices), dp(indptr), dl(last), dsp(spares), dni(nnz), dnp(batch + 1),
        dnl(batch), dfp(nnz), dfi(batch + 1), dst(2);
    dbuf<std::uint8_t> dk(keep), dpool(pool);
    const cu::paged_shape shape{batch, nnz, P};
    const std::size_t ws = cu::paged_workspace_bytes(shape);
    dbuf<unsigned char> dws(ws);
    ASSERT_EQ(cu::paged_compact(shape, di.p, dp.p, dl.p, dk.p, dsp.p, 200, dni.p, dnp.p, dnl.p,
                                dfp.p, dfi.p, dst.p, dpool.p, nullptr, layout, dws.p, ws, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto status = dst.down();
    EXPECT_EQ(status[0], r.ok ? 1 : 0);
    EXPECT_EQ(status[1], r.spare_pages_used);
    EXPECT_EQ(dnp.down(), r.new_indptr);
    EXPECT_EQ(dnl.down(), r.new_last_page_len);
    EXPECT_EQ(dfi.down(), r.freed_indptr);
    auto ni = dni.down();
    ni.resize(r.new_indices.size());
    EXPECT_EQ(ni, r.new_indices);
    auto fp = dfp.down();
    fp.resize(r.freed_pages.size());
    EXPECT_EQ(fp, r.freed_pages);
    auto gpool = dpool.down();
    gpool.resize(pool_r.size());
    EXPECT_EQ(gpool, pool_r) << "P=" << P;
  }
}

TEST(CudaQuantize, Fp32CodesAndScalesAreExact) {
  REQUIRE_DEVICE();
  const int rows = 1000, dim = 128, stride = 136;
  auto x = random_vec(static_cast<std::size_t>(rows) * stride, 12, -4.f, 4.f);
  std::vector<std::int8_t> q_r(static_cast<std::size_t>(rows) * dim);
  std::vector<float> s_r(rows), y_r(x.size(), 0.f);
  audiokv::cpu::quantize_rows(x.data(), stride, rows, dim, q_r.data(), s_r.data());
  audiokv::cpu::dequantize_rows(q_r.data(), s_r.data(), rows, dim, y_r.data(), stride);
  dbuf<float> dx(x), dy(x.size()), ds(rows);
  dbuf<std::int8_t> dq(q_r.size());
  ASSERT_EQ(cudaMemset(dy.p, 0, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cu::quantize_rows(cu::dtype::f32, dx.p, stride, rows, dim, dq.p, ds.p, nullptr),
            cudaSuccess);
  ASSERT_EQ(cu::dequantize_rows(cu::dtype::f32, dq.p, ds.p, rows, dim, dy.p, stride, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto q = dq.down();
  auto s = ds.down();
  auto y = dy.down();
  q.resize(q_r.size());
  s.resize(rows);
  y.resize(y_r.size());
  EXPECT_EQ(q, q_r);
  EXPECT_EQ(s, s_r);
  EXPECT_EQ(y, y_r);
}

// A whole eviction step (attention with scores, EMA, median, trend, selection, move_to, gather)
// captured into a CUDA graph, replayed, and compared with the same step run eagerly.
TEST(CudaGraph, CapturedStepReplaysIdentically) {
  REQUIRE_DEVICE();
  const int hq = 16, hkv = 8, d = 128, n = 8192;
  const cu::attention_shape shape{hq, hkv, d, n};
  std::vector<__nv_bfloat16> kv(static_cast<std::size_t>(n) * hkv * d);
  const auto kf = random_vec(kv.size(), 21);
  for (std::size_t i = 0; i < kv.size(); ++i) kv[i] = from_float<__nv_bfloat16>(kf[i]);
  dbuf<__nv_bfloat16> dk(kv), dv(kv), dgathered(kv.size());
  dbuf<float> dq(random_vec(static_cast<std::size_t>(hq) * d, 22)), dout(hq * d),
      dprobs(static_cast<std::size_t>(hq) * n), dscores(static_cast<std::size_t>(hkv) * n),
      dimp(std::vector<float>(static_cast<std::size_t>(hkv) * n, 0.f)),
      dmed(static_cast<std::size_t>(hkv) * n), dtr(static_cast<std::size_t>(hkv) * n);
  dbuf<std::int32_t> dk_count(std::vector<std::int32_t>(hkv, n / 4)),
      dmove(static_cast<std::size_t>(hkv) * n), dafter(hkv);
  dbuf<std::uint8_t> dkeep(static_cast<std::size_t>(hkv) * n);
  const std::size_t ws_a = cu::decode_attention_workspace_bytes(shape);
  const std::size_t ws_s = cu::select_workspace_bytes(hkv, n);
  const std::size_t ws_m = cu::move_to_workspace_bytes(hkv, n);
  dbuf<unsigned char> wa(ws_a), wsel(ws_s), wm(ws_m);
  const audiokv::core::kv_addressing addr{nullptr, 1, 0, hkv * d, d};
  const cu::row_layout layout{0, hkv * d * 2, d * 2, d * 2, hkv};
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  auto step = [&]() {
    cudaError_t e =
        cu::decode_attention(shape, cu::dtype::bf16, dq.p, dk.p, dv.p, addr, dout.p, dprobs.p,
                             dscores.p, audiokv::gqa_reduce::mean, nullptr, wa.p, ws_a, stream);
    if (e == cudaSuccess)
      e = cu::importance_update(dimp.p, dscores.p, hkv, n, n, 0.3f, nullptr, stream);
    if (e == cudaSuccess) e = cu::median<5>(dimp.p, dmed.p, hkv, n, n, stream);
    if (e == cudaSuccess) e = cu::trend(dmed.p, dtr.p, hkv, n, n, 0.6f, 0.3f, stream);
    if (e == cudaSuccess)
      e = cu::select_lowest(dtr.p, nullptr, hkv, n, n, dk_count.p, nullptr, dkeep.p, wsel.p, ws_s,
                            stream);
    if (e == cudaSuccess)
      e = cu::move_to_from_mask(dkeep.p, hkv, n, n, dmove.p, dafter.p, wm.p, ws_m, stream);
    if (e == cudaSuccess)
      e = cu::gather_rows(dk.p, dgathered.p, layout, dmove.p, hkv, n, n, stream);
    return e;
  };
  ASSERT_EQ(step(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const auto eager_imp = dimp.down();
  const auto eager_keep = dkeep.down();
  const auto eager_out = dgathered.down();
  // Reset the state the step mutates, capture, replay once: same result as the eager step.
  dimp.up(std::vector<float>(static_cast<std::size_t>(hkv) * n, 0.f));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(step(), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(dimp.down(), eager_imp);
  EXPECT_EQ(dkeep.down(), eager_keep);
  const auto graph_out = dgathered.down();
  EXPECT_EQ(0, std::memcmp(graph_out.data(), eager_out.data(), eager_out.size() * 2));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(CudaSharedRows, BiasedRowsEqualRepeatedCells) {
  REQUIRE_DEVICE();
  const int hq = 8, hkv = 2, d = 64, rows = 700;
  const auto q = random_vec(static_cast<std::size_t>(hq) * d, 21);
  const auto k = random_vec(static_cast<std::size_t>(rows) * hkv * d, 22, -2.f, 2.f);
  const auto v = random_vec(k.size(), 23);
  std::vector<std::int32_t> multiplicity(static_cast<std::size_t>(hkv) * rows), cell_row;
  for (int r = 0; r < rows; ++r) {
    const int m = 1 + r % 5;
    for (int c = 0; c < m; ++c) cell_row.push_back(r);
    multiplicity[r] = multiplicity[rows + r] = m;
  }
  const int cells = static_cast<int>(cell_row.size());
  std::vector<float> k_cells(static_cast<std::size_t>(cells) * hkv * d), v_cells(k_cells.size());
  for (int c = 0; c < cells; ++c)
    for (int i = 0; i < hkv * d; ++i) {
      k_cells[static_cast<std::size_t>(c) * hkv * d + i] = k[cell_row[c] * hkv * d + i];
      v_cells[static_cast<std::size_t>(c) * hkv * d + i] = v[cell_row[c] * hkv * d + i];
    }
  const audiokv::core::kv_addressing addr{nullptr, 1, 0, hkv * d, d};
  std::vector<float> out_r(hq * d), probs_r(static_cast<std::size_t>(hq) * cells),
      scores_r(static_cast<std::size_t>(hkv) * cells);
  ref::decode_attention(q.data(), k_cells.data(), v_cells.data(), addr, hq, hkv, d, cells, cells,
                        out_r.data(), probs_r.data(), scores_r.data());
  std::vector<std::int32_t> cell_rows(static_cast<std::size_t>(hkv) * cells);
  for (int h = 0; h < hkv; ++h)
    std::copy(cell_row.begin(), cell_row.end(), cell_rows.begin() + h * cells);
  const cu::attention_shape shape{hq, hkv, d, rows};
  dbuf<float> dq(q), dk(k), dv(v), dout(out_r.size()), dprobs(static_cast<std::size_t>(hq) * rows),
      dscores(static_cast<std::size_t>(hkv) * rows), dbias(static_cast<std::size_t>(hkv) * rows),
      dcell(scores_r.size());
  dbuf<std::int32_t> dmult(multiplicity), dcell_row(cell_rows);
  const std::size_t ws = cu::decode_attention_workspace_bytes(shape);
  dbuf<unsigned char> dws(ws);
  ASSERT_EQ(cu::multiplicity_bias(dmult.p, dbias.p, hkv, rows, rows, nullptr), cudaSuccess);
  ASSERT_EQ(cu::decode_attention(shape, cu::dtype::f32, dq.p, dk.p, dv.p, addr, dout.p, dprobs.p,
                                 dscores.p, audiokv::gqa_reduce::mean, nullptr, dws.p, ws, nullptr,
                                 dbias.p),
            cudaSuccess);
  ASSERT_EQ(cu::shared_cell_probs(dscores.p, dmult.p, dcell_row.p, dcell.p, hkv, cells, cells, rows,
                                  nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto out = dout.down();
  for (std::size_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(out[i], out_r[i], tol::attention_out_abs);
  const auto cell_scores = dcell.down();
  for (std::size_t i = 0; i < cell_scores.size(); ++i) {
    const float e = scores_r[i];
    ASSERT_NEAR(cell_scores[i], e, tol::probability_abs + tol::probability_rel * e) << i;
  }
}

}  // namespace
