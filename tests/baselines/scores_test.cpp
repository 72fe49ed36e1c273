// SPDX-License-Identifier: Apache-2.0
// One-shot scorers and kvpress budget arithmetic: hand-worked cases and bad input.
#include <gtest/gtest.h>

#include <audiokv/policy/scores/adakv.hpp>
#include <audiokv/policy/scores/budget.hpp>
#include <audiokv/policy/scores/kernel_reduce.hpp>
#include <audiokv/policy/scores/knorm.hpp>
#include <audiokv/policy/scores/observed_attention.hpp>
#include <audiokv/policy/scores/snapkv.hpp>
#include <audiokv/policy/scores/streaming_llm.hpp>
#include <audiokv/policy/scores/top_k.hpp>
#include <audiokv/policy/scores/tova.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace {

using namespace audiokv;

void expect_error(const std::function<void()>& call, const std::string& argument) {
  try {
    call();
    FAIL() << "accepted invalid " << argument;
  } catch (const audiokv::error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
  }
}

TEST(ScoresBudget, KvpressNKeptTruncates) {
  EXPECT_EQ(scores::kvpress_n_kept(100, 0.8), 19);  // int(19.999999999999996)
  EXPECT_EQ(scores::kvpress_n_kept(100, 0.9), 9);
  EXPECT_EQ(scores::kvpress_n_kept(128, 0.8), 25);
  EXPECT_EQ(scores::kvpress_n_kept(37, 0.8), 7);
  EXPECT_EQ(scores::kvpress_n_kept(3, 0.9), 1);  // clamped to 1 (kvpress 0.5.5)
  EXPECT_EQ(scores::kvpress_n_kept(100, 0.0), 100);
  EXPECT_EQ(scores::kvpress_n_kept(100, 1.0), 0);
  expect_error([] { scores::kvpress_n_kept(10, -0.1); }, "compression_ratio");
  expect_error([] { scores::kvpress_n_kept(10, std::nan("")); }, "compression_ratio");
  expect_error([] { scores::kvpress_n_kept(-1, 0.5); }, "n");
}

TEST(ScoresBudget, PyramidHalfToEvenAndWorkedExample) {
  // README: checked with the real get_layer_budget.
  EXPECT_EQ(scores::pyramid_layer_budget(20, 0.25, 4, 20, 5, 1), 16);  // round(15.5)
  EXPECT_EQ(scores::pyramid_layer_budget(20, 0.25, 4, 20, 5, 3), 14);  // round(14.5)
  // Spec worked example: N=1000, r=0.5, w=64, L=32.
  EXPECT_EQ(scores::pyramid_layer_budget(1000, 0.5, 64, 20, 32, 0), 936);
  EXPECT_EQ(scores::pyramid_layer_budget(1000, 0.5, 64, 20, 32, 31), 64);
  // Fallback uses round, not int: N=37, r=0.2, w=8 keeps 30 (SnapKV keeps 29).
  EXPECT_EQ(scores::pyramid_layer_budget(37, 0.2, 8, 20, 4, 0), 30);
  EXPECT_EQ(scores::pyramid_layer_budget(100, 0.2, 4, 20, 4, 0), 96);
  EXPECT_EQ(scores::pyramid_layer_budget(100, 0.2, 4, 20, 4, 3), 64);
  // Mean over layers ~= N(1 - r) (kvpress test_pyramidkv_press, rel 1e-3).
  for (int layers : {32, 64, 128}) {
    double sum = 0.0;
    for (int l = 0; l < layers; ++l)
      sum += scores::pyramid_layer_budget(4096, 0.5, 64, 20, layers, l);
    EXPECT_NEAR(sum / layers, 2048.0, 2048.0 * 1e-3);
  }
  expect_error([] { scores::pyramid_layer_budget(100, 0.5, 4, 20, 4, 4); }, "layer");
  expect_error([] { scores::pyramid_layer_budget(100, 0.5, 4, 0, 4, 0); }, "beta");
}

TEST(ScoresBudget, PyramidOneLayerKeepsRoundMaxN) {
  // kvpress 0.5.5 get_layer_budget with num_hidden_layers = 1: steps = 0, so layer 0 keeps
  // round(max_n), not N(1 - r). N = 1000, w = 3, beta = 20 (values from the real press):
  //   r = 0.1:  mean 900, max_n = 1800 - 45 >= N - w  -> clamped to 997
  //   r = 0.33: mean 670, max_n = 1340 - 33.5 >= 997 -> 997
  //   r = 0.5:  mean 500, max_n = 1000 - 25 = 975
  //   r = 0.77: mean 230, max_n = 460 - 11.5 = 448.5 (229.99999999999997 in double) -> 448
  //   r = 0.9:  mean 100, max_n = 200 - 5 = 195
  const double ratios[] = {0.1, 0.33, 0.5, 0.77, 0.9};
  const std::int64_t expected[] = {997, 997, 975, 448, 195};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(scores::pyramid_layer_budget(1000, ratios[i], 3, 20, 1, 0), expected[i])
        << "r = " << ratios[i];
  }
  // The uniform fallback still applies when the pyramid condition fails: N = 37, w = 8,
  // r = 0.1 gives min_n = 66.6 - 29 = 37.6 > max_n = 29, so round(33.3) = 33.
  EXPECT_EQ(scores::pyramid_layer_budget(37, 0.1, 8, 20, 1, 0), 33);
}

TEST(ScoresBudget, AdakvSafeguard) {
  EXPECT_EQ(scores::adakv_n_safe(29, 0.2), 5);
  EXPECT_EQ(scores::adakv_n_safe(7, 0.2), 1);  // int(1.4)
  EXPECT_EQ(scores::adakv_n_safe(3, 0.2), 1);  // clamped
  EXPECT_EQ(scores::adakv_n_safe(3, 0.0), 0);
  expect_error([] { scores::adakv_n_safe(3, 1.5); }, "alpha_safeguard");
}

TEST(ScoresTopK, TiesKeepTheNewerIndex) {
  const std::vector<float> s = {1.0f, 2.0f, 2.0f, 0.5f, 2.0f};
  EXPECT_EQ(scores::select_top_k(s, 2), (std::vector<std::int32_t>{2, 4}));
  EXPECT_EQ(scores::select_top_k(s, 0), (std::vector<std::int32_t>{}));
  EXPECT_EQ(scores::select_top_k(s, 9), (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
  const std::vector<float> bad = {1.0f, std::nanf("")};
  expect_error([&] { scores::select_top_k(bad, 1); }, "scores[1]");
}

TEST(ScoresPooling, AvgCountsPadsAndMaxIgnoresThem) {
  const std::vector<double> in = {3, 1, 4, 1, 5};
  std::vector<double> out(5);
  scores::reduce_1d(in.data(), out.data(), 5, 3, scores::kernel_reduce::avg);
  EXPECT_DOUBLE_EQ(out[0], (0 + 3 + 1) / 3.0);  // zero pad, divide by 3
  EXPECT_DOUBLE_EQ(out[2], (1 + 4 + 1) / 3.0);
  EXPECT_DOUBLE_EQ(out[4], (1 + 5 + 0) / 3.0);
  scores::reduce_1d(in.data(), out.data(), 5, 3, scores::kernel_reduce::max);
  EXPECT_EQ(out, (std::vector<double>{3, 4, 4, 5, 5}));
}

TEST(ScoresSnapkv, HandWorkedTinyCase) {
  // n = 4, w = 1, k = 1: scores are the last row over the first 3 keys; pad = max + 1.
  const std::vector<float> rows = {0.1f, 0.5f, 0.2f, 0.2f};
  std::vector<float> out(4);
  std::vector<double> ws(scores::snapkv_workspace_size(4, 1));
  scores::snapkv_scores(rows.data(), 1, 1, 1, 4, 1, scores::kernel_reduce::avg, out.data(),
                        ws.data());
  EXPECT_FLOAT_EQ(out[0], 0.1f);
  EXPECT_FLOAT_EQ(out[1], 0.5f);
  EXPECT_FLOAT_EQ(out[2], 0.2f);
  EXPECT_FLOAT_EQ(out[3], 1.5f);
  expect_error(
      [&] {
        scores::snapkv_scores(rows.data(), 1, 1, 4, 4, 1, scores::kernel_reduce::avg, out.data(),
                              ws.data());
      },
      "n");
  expect_error(
      [&] {
        scores::snapkv_scores(rows.data(), 1, 1, 1, 4, 2, scores::kernel_reduce::avg, out.data(),
                              ws.data());
      },
      "kernel");
  std::vector<float> nan_rows = rows;
  nan_rows[2] = std::nanf("");
  expect_error(
      [&] {
        scores::snapkv_scores(nan_rows.data(), 1, 1, 1, 4, 1, scores::kernel_reduce::avg,
                              out.data(), ws.data());
      },
      "window_attn[2]");
  expect_error(
      [&] {
        scores::snapkv_scores(rows.data(), 0, 1, 1, 4, 1, scores::kernel_reduce::avg, out.data(),
                              ws.data());
      },
      "num_kv_heads");
}

TEST(ScoresOthers, TovaKnormObservedStreaming) {
  // TOVA: two query heads, mean of the last row; kvpress forces the last token.
  const std::vector<float> last = {0.2f, 0.4f, 0.4f, 0.6f, 0.2f, 0.2f};
  std::vector<float> out(6);
  scores::tova_scores(last.data(), 2, 2, 3, true, out.data());
  EXPECT_FLOAT_EQ(out[0], 0.4f);
  EXPECT_FLOAT_EQ(out[1], 0.3f);
  EXPECT_FLOAT_EQ(out[2], 1.4f);
  EXPECT_FLOAT_EQ(out[5], 1.4f);
  scores::tova_scores(last.data(), 2, 1, 3, false, out.data());
  EXPECT_FLOAT_EQ(out[2], 0.3f);
  // Knorm.
  const std::vector<float> keys = {3, 4, 0, 1};
  scores::knorm_scores(keys.data(), 1, 2, 2, out.data());
  EXPECT_FLOAT_EQ(out[0], -5.0f);
  EXPECT_FLOAT_EQ(out[1], -1.0f);
  std::vector<float> bad_keys = keys;
  bad_keys[3] = std::numeric_limits<float>::infinity();
  expect_error([&] { scores::knorm_scores(bad_keys.data(), 1, 2, 2, out.data()); }, "keys[3]");
  // ObservedAttention: sum_i A[i][j] / (n - j).
  const std::vector<float> a = {1, 0, 0.25f, 0.75f};
  std::vector<double> ws(2);
  scores::observed_attention_scores(a.data(), 1, 1, 2, out.data(), ws.data());
  EXPECT_FLOAT_EQ(out[0], 0.625f);
  EXPECT_FLOAT_EQ(out[1], 0.75f);
  // StreamingLLM: n = 10, r = 0.5 -> n_kept 5: sinks 0..3 + token 9.
  std::vector<float> s10(10);
  scores::streaming_llm_scores(10, 0.5, 4, s10.data());
  EXPECT_EQ(scores::select_top_k(s10, 5), (std::vector<std::int32_t>{0, 1, 2, 3, 9}));
  expect_error([&] { scores::streaming_llm_scores(4, 0.5, 4, s10.data()); }, "n");
}

TEST(ScoresStreamingLlm, PrunedCountIsNotClampedAndSinksTieBelowTheBudget) {
  // kvpress: n_pruned = N - int(N (1 - r)); int(7 * 0.1) = 0, so with no sinks all 7 scores are
  // 0 (n_kept is still clamped to 1 by compute_n_kept: top-1 keeps one of 7 tied tokens).
  std::vector<float> s7(7);
  scores::streaming_llm_scores(7, 0.9, 0, s7.data());
  EXPECT_EQ(s7, std::vector<float>(7, 0.0f));
  // With 4 sinks only the sinks score 1 (values from the real StreamingLLMPress).
  scores::streaming_llm_scores(7, 0.9, 4, s7.data());
  EXPECT_EQ(s7, (std::vector<float>{1, 1, 1, 1, 0, 0, 0}));
  // N = 10, r = 0.8: n_kept = 2 < 4 sinks; the 4 sinks tie at 1 and top-2 keeps two of them.
  std::vector<float> s10(10);
  scores::streaming_llm_scores(10, 0.8, 4, s10.data());
  EXPECT_EQ(s10, (std::vector<float>{1, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
  const std::vector<std::int32_t> kept = scores::select_top_k(s10, 2);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_LT(kept[1], 4);
  expect_error([&] { scores::streaming_llm_scores(10, -0.1, 4, s10.data()); }, "compression_ratio");
}

TEST(ScoresAdakv, SafeguardForcesEveryHeadAndTotalIsExact) {
  // Head 1 scores far below head 0; the safeguard still keeps its top n_safe.
  const int n = 10;
  std::vector<float> s(2 * n);
  for (int j = 0; j < n; ++j) {
    s[j] = 10.0f + j;
    s[n + j] = 0.01f * j;
  }
  std::vector<std::uint8_t> kept(2 * n);
  std::vector<float> ws(2 * n);
  std::vector<std::int64_t> order(2 * n);
  // r = 0.5: n_kept 5, n_safe max(1, int(1.0)) = 1 with alpha 0.2; prune 10 of 20.
  EXPECT_EQ(scores::adakv_select(s.data(), 2, n, 0.5, 0.2, kept.data(), ws.data(), order.data()),
            10);
  int head1 = 0;
  for (int j = 0; j < n; ++j) head1 += kept[n + j];
  EXPECT_EQ(head1, 1);
  EXPECT_EQ(kept[n + 9], 1);  // its best token
}

}  // namespace
