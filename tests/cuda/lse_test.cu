// SPDX-License-Identifier: Apache-2.0
// cuda::lse_scores (LSE scoring on the device) against its CPU oracle cpu::lse_scores on identical
// inputs (K rounded to fp16/bf16 on the host first): contiguous and FlashInfer-paged K with
// scattered pages and NaN holes, GQA, both LSE bases, both group reductions; and the fp32 result
// against the double-precision softmax. The argument checks run without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <audiokv/cpu/lse_scores.hpp>
#include <audiokv/cuda.cuh>
#include <cstdint>
#include <vector>

#include "common/lse_case.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/tolerance.hpp"

namespace {

namespace cu = audiokv::cuda;
namespace tol = audiokv::test::tolerance;
using audiokv::core::gqa_reduce;
using audiokv::core::lse_base;
using audiokv::test::has_device;
using audiokv::test::lse_case;
using audiokv::test::lse_layout;
template <class T>
using dbuf = audiokv::test::device_buffer<T>;

#define REQUIRE_DEVICE() \
  if (!has_device()) GTEST_SKIP() << "no CUDA device: kernel not executed on this machine"

using audiokv::cuda::detail::from_float;
using audiokv::cuda::detail::to_float;

template <class T>
void run_case(cu::dtype type, lse_layout layout, lse_base base, gqa_reduce mode, int dim,
              int page_size, std::uint64_t seed) {
  lse_case c = audiokv::test::make_lse_case(seed, layout, base, 3, 8, 2, dim, 150, page_size, 1.0f);
  std::vector<T> kt(c.k.size());
  for (std::size_t i = 0; i < c.k.size(); ++i) {
    kt[i] = from_float<T>(c.k[i]);
    c.k[i] = to_float(kt[i]);  // the oracle reads the rounded K
  }
  const audiokv::lse_scoring host = c.scoring(mode);
  const std::size_t n_scores = static_cast<std::size_t>(c.batch) * c.hkv * c.capacity;
  const std::size_t n_probs = static_cast<std::size_t>(c.batch) * c.hq * c.capacity;
  constexpr float sentinel = -7.0f;
  std::vector<float> scores_r(n_scores, sentinel), probs_r(n_probs, sentinel);
  audiokv::cpu::lse_scores(host, c.k.data(), static_cast<std::int64_t>(c.k.size()), scores_r.data(),
                           probs_r.data());

  dbuf<float> dq(c.q), dlse(c.lse), dscores(scores_r), dprobs(probs_r);
  dbuf<T> dk(kt);
  dbuf<std::int32_t> dlens(c.lens),
      dindptr(c.indptr.empty() ? std::vector<std::int32_t>{0} : c.indptr),
      dindices(c.indices.empty() ? std::vector<std::int32_t>{0} : c.indices),
      dlast(c.last_page_len.empty() ? std::vector<std::int32_t>{0} : c.last_page_len);
  audiokv::lse_scoring dev = host;
  dev.q = dq.p;
  dev.lse = dlse.p;
  if (layout == lse_layout::contiguous) {
    dev.kv.seq_lens = dlens.p;
  } else {
    dev.kv.indptr = dindptr.p;
    dev.kv.indices = dindices.p;
    dev.kv.last_page_len = dlast.p;
  }
  ASSERT_EQ(cu::lse_scores(dev, type, dk.p, dscores.p, dprobs.p, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto scores = dscores.down(n_scores);
  const auto probs = dprobs.down(n_probs);
  for (std::size_t i = 0; i < n_probs; ++i) {
    const float e = probs_r[i];
    ASSERT_NEAR(probs[i], e, tol::probability_abs + tol::probability_rel * e) << i;
  }
  for (std::size_t i = 0; i < n_scores; ++i) {
    const float e = scores_r[i];
    ASSERT_NEAR(scores[i], e, tol::probability_abs + tol::probability_rel * e) << i;
  }
  if (type == cu::dtype::f32) {  // and the double softmax itself
    for (std::int32_t b = 0; b < c.batch; ++b)
      for (std::int32_t r = 0; r < c.hq; ++r)
        for (std::int32_t j = 0; j < c.lens[b]; ++j)
          ASSERT_NEAR(probs[(static_cast<std::size_t>(b) * c.hq + r) * c.capacity + j],
                      c.ref(b, r, j), 2e-6);
  }
}

TEST(CudaLseScores, MatchesTheCpuOracleAllTypesLayoutsAndBases) {
  REQUIRE_DEVICE();
  for (int dim : {64, 128}) {
    run_case<float>(cu::dtype::f32, lse_layout::contiguous, lse_base::two, gqa_reduce::mean, dim, 1,
                    1);
    run_case<float>(cu::dtype::f32, lse_layout::paged_nhd, lse_base::natural, gqa_reduce::max, dim,
                    16, 2);
    run_case<__half>(cu::dtype::f16, lse_layout::paged_hnd, lse_base::two, gqa_reduce::mean, dim, 5,
                     3);
    run_case<__nv_bfloat16>(cu::dtype::bf16, lse_layout::paged_nhd, lse_base::two, gqa_reduce::mean,
                            dim, 1, 4);
    run_case<__half>(cu::dtype::f16, lse_layout::contiguous, lse_base::natural, gqa_reduce::max,
                     dim, 1, 5);
  }
}

// Host-side checks: nothing is enqueued, no device needed.
TEST(CudaLseScores, RefusesBadArgumentsBeforeLaunching) {
  lse_case c =
      audiokv::test::make_lse_case(6, lse_layout::contiguous, lse_base::two, 1, 4, 2, 64, 8, 1);
  float out = 0.0f;
  audiokv::lse_scoring s = c.scoring();
  s.base = {};
  EXPECT_EQ(cu::lse_scores(s, cu::dtype::f32, c.k.data(), &out, nullptr, nullptr),
            cudaErrorInvalidValue);
  s = c.scoring();
  s.scale = 0.0f;
  EXPECT_EQ(cu::lse_scores(s, cu::dtype::f32, c.k.data(), &out, nullptr, nullptr),
            cudaErrorInvalidValue);
  s = c.scoring();
  EXPECT_EQ(cu::lse_scores(s, cu::dtype::f32, c.k.data(), nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cu::lse_scores(s, cu::dtype::f32, nullptr, &out, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cu::lse_scores(s, cu::dtype::f32, reinterpret_cast<const char*>(c.k.data()) + 4, &out,
                           nullptr, nullptr),
            cudaErrorInvalidValue);
  s.kv.entry_stride += 1;  // rows no longer 16-byte aligned
  EXPECT_EQ(cu::lse_scores(s, cu::dtype::f32, c.k.data(), &out, nullptr, nullptr),
            cudaErrorInvalidValue);
  s = c.scoring();
  s.shape.head_dim = 96;  // the kernel is instantiated for 64 and 128
  s.q = c.q.data();
  EXPECT_EQ(cu::lse_scores(s, cu::dtype::f32, c.k.data(), &out, nullptr, nullptr),
            cudaErrorInvalidValue);
  s = c.scoring();
  s.batch = 0;
  EXPECT_EQ(cu::lse_scores(s, cu::dtype::f32, c.k.data(), &out, nullptr, nullptr), cudaSuccess);
}

}  // namespace
