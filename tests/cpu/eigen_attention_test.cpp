// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/eigen.hpp>
#include <cmath>
#include <random>
#include <vector>

namespace {

using namespace audiokv;

TEST(EigenAttention, MatchesNaiveSoftmaxAndWeightedSumWithGqa) {
  const cpu::attention_shape shape{8, 2, 16, 33};
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> q(8 * 16), k(33 * 2 * 16), v(33 * 2 * 16), out(8 * 16), probs(8 * 33);
  for (auto* vec : {&q, &k, &v}) {
    for (auto& x : *vec) x = normal(rng);
  }
  const layout_nhd layout{{33, 2, 16}};
  cpu::decode_attention(q.data(), kv_view<const float>(k.data(), layout),
                        kv_view<const float>(v.data(), layout), shape, out.data(), probs.data());
  for (int h = 0; h < 8; ++h) {
    const int kvh = h / 4;
    std::vector<double> logits(33);
    double m = -1e30, sum = 0;
    for (int j = 0; j < 33; ++j) {
      double dot = 0;
      for (int d = 0; d < 16; ++d) dot += q[h * 16 + d] * k[(j * 2 + kvh) * 16 + d];
      logits[j] = dot / 4.0;
      m = std::max(m, logits[j]);
    }
    for (auto& l : logits) sum += std::exp(l - m);
    for (int d = 0; d < 16; ++d) {
      double o = 0;
      for (int j = 0; j < 33; ++j) {
        const double p = std::exp(logits[j] - m) / sum;
        if (d == 0) {
          EXPECT_NEAR(probs[h * 33 + j], p, 1e-5);
        }
        o += p * v[(j * 2 + kvh) * 16 + d];
      }
      EXPECT_NEAR(out[h * 16 + d], o, 1e-4);
    }
  }
}

TEST(EigenAttention, StridedViewsGiveTheSameResult) {
  const cpu::attention_shape shape{2, 1, 4, 5};
  std::vector<float> q = {1, 0, -1, 0.5f, 0.2f, 0.1f, 0, 1};
  std::vector<float> k(5 * 4), kt(5 * 4), probs_a(10), probs_b(10);
  for (int i = 0; i < 20; ++i) k[i] = 0.1f * static_cast<float>(i % 7) - 0.2f;
  for (int j = 0; j < 5; ++j) {
    for (int d = 0; d < 4; ++d) kt[d * 5 + j] = k[j * 4 + d];  // dim-major copy
  }
  cpu::attention_scores(q.data(), kv_view<const float>(k.data(), layout_nhd{{5, 1, 4}}), shape,
                        probs_a.data());
  cpu::attention_scores(
      q.data(),
      kv_view<const float, layout_strided>(kt.data(), layout_strided{{5, 1, 4}, 1, 20, 5}), shape,
      probs_b.data());
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(probs_a[i], probs_b[i], 1e-6f);
}

TEST(EigenAttention, RejectsInconsistentShapes) {
  std::vector<float> q(8), k(20), probs(10);
  EXPECT_THROW(
      cpu::attention_scores(q.data(), kv_view<const float>(k.data(), layout_nhd{{5, 1, 4}}),
                            cpu::attention_shape{3, 2, 4, 5}, probs.data()),
      audiokv::error);
  EXPECT_THROW(
      cpu::attention_scores(q.data(), kv_view<const float>(k.data(), layout_nhd{{5, 1, 4}}),
                            cpu::attention_shape{2, 1, 8, 5}, probs.data()),
      audiokv::error);
}

}  // namespace
