// SPDX-License-Identifier: Apache-2.0
// Set-for-set parity with NVIDIA kvpress 0.5.5 on the fixtures of tests/fixtures/kvpress/: the
// one-shot scorers (scores/*) and the streaming policies fed the same attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/policy/baselines/adakv.hpp>
#include <audiokv/policy/baselines/knorm.hpp>
#include <audiokv/policy/baselines/observed_attention.hpp>
#include <audiokv/policy/baselines/snapkv.hpp>
#include <audiokv/policy/baselines/streaming_llm.hpp>
#include <audiokv/policy/baselines/tova.hpp>
#include <audiokv/policy/scores/adakv.hpp>
#include <audiokv/policy/scores/budget.hpp>
#include <audiokv/policy/scores/knorm.hpp>
#include <audiokv/policy/scores/observed_attention.hpp>
#include <audiokv/policy/scores/snapkv.hpp>
#include <audiokv/policy/scores/streaming_llm.hpp>
#include <audiokv/policy/scores/top_k.hpp>
#include <audiokv/policy/scores/tova.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "baselines/kvpress_fixture.hpp"
#include "common/stream.hpp"

#ifndef AUDIOKV_FIXTURE_DIR
#error "AUDIOKV_FIXTURE_DIR must name tests/fixtures/kvpress"
#endif

namespace {

using namespace audiokv;
using test::kvpress_fixture;
using test::set_match;
namespace fs = std::filesystem;

std::vector<std::string> fixture_files() {
  std::vector<std::string> out;
  const fs::path dir(AUDIOKV_FIXTURE_DIR);
  if (!fs::is_directory(dir)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".txt") out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool is_official(const std::string& file) { return file.find("_official_") != std::string::npos; }

std::vector<std::string> kvpress_files() {
  std::vector<std::string> out;
  for (const auto& f : fixture_files()) {
    if (!is_official(f)) out.push_back(f);
  }
  return out;
}

/// Per-family tally of how every kept set matched, printed at the end.
struct tally {
  int files = 0, exact = 0, tie = 0, near_tie = 0, mismatch = 0;
};
std::map<std::string, tally>& tallies() {
  static std::map<std::string, tally> t;
  return t;
}

void record(const std::string& family, set_match m) {
  tally& t = tallies()[family];
  t.exact += m == set_match::exact;
  t.tie += m == set_match::tie;
  t.near_tie += m == set_match::near_tie;
  t.mismatch += m == set_match::mismatch;
}

std::string family_of(const kvpress_fixture& f) {
  if (f.press == "snapkv") return f.press + "_w" + f.params.at("window");
  if (f.press == "pyramidkv")
    return f.press + "_w" + f.params.at("window") + "_L" + std::to_string(f.layers);
  if (f.press == "streamingllm") return f.press + "_s" + f.params.at("n_sink");
  if (f.press == "adakv") return f.press + "_a" + f.params.at("alpha_safeguard");
  return f.press;
}

/// |a - b| <= 1e-5 |b| (+ a tiny absolute floor for exact zeros).
void expect_scores_near(const float* mine, const std::vector<float>& ref, int count,
                        const std::string& what) {
  ASSERT_GE(static_cast<int>(ref.size()), count) << what;
  for (int j = 0; j < count; ++j) {
    EXPECT_LE(std::fabs(mine[j] - ref[j]), 1e-5 * std::fabs(ref[j]) + 1e-12)
        << what << " [" << j << "]: " << mine[j] << " vs " << ref[j];
  }
}

/// Largest |score| that is not a max + 1 pad (the README's gap scale).
double non_pad_scale(const std::vector<std::vector<float>>& scores, int pads) {
  double scale = 0.0;
  for (const auto& row : scores) {
    for (std::size_t j = 0; j + pads < row.size(); ++j)
      scale = std::max(scale, std::fabs(double(row[j])));
  }
  return scale;
}

/// One kept set of a top-k press against the fixture: `mine` must be a top-k of kvpress's own
/// scores `ref` (exactly, or within `tolerance` where our scores round differently); a tie may
/// differ from kvpress's set by any number of swaps, all inside the recorded `tied` cells.
void check_topk(const kvpress_fixture& f, const std::string& family, const std::string& r,
                int layer, int head, const std::vector<int>& mine, const std::vector<float>& ref,
                int k, double tolerance, const std::string& how) {
  const kvpress_fixture::sel_key key{r, layer, head};
  const std::string where = f.path + how + " r " + r + " layer " + std::to_string(layer) +
                            " head " + std::to_string(head);
  const std::vector<int>& theirs = f.kept.at(key);
  ASSERT_TRUE(test::topk_valid(theirs, ref, k, 0.0)) << where << ": kvpress's own set";
  std::vector<float> sorted_ref = ref;
  std::sort(sorted_ref.begin(), sorted_ref.end(), std::greater<>());
  const float kth = k > 0 && k <= static_cast<int>(ref.size()) ? sorted_ref[k - 1] : 0.0f;
  std::vector<int> at_kth;
  int above = 0;
  for (int j = 0; j < static_cast<int>(ref.size()); ++j) {
    if (ref[j] == kth) at_kth.push_back(j);
    above += ref[j] > kth;
  }
  const auto tied = f.tied.find(key);
  if (tied != f.tied.end()) {
    EXPECT_EQ(f.gap.at(key), 0.0) << where;
    EXPECT_EQ(tied->second.second, at_kth) << where << ": recorded tie";
    EXPECT_EQ(tied->second.first, k - above) << where << ": recorded need";
  } else if (k < static_cast<int>(ref.size())) {
    EXPECT_EQ(static_cast<int>(at_kth.size()), k - above) << where << ": an unrecorded tie";
  }
  const std::set<int> a(mine.begin(), mine.end()), b(theirs.begin(), theirs.end());
  const set_match m = test::classify_kept(
      a == b, [&](double eps) { return test::topk_valid(mine, ref, k, eps); }, tolerance);
  if (m == set_match::tie) {
    for (int j : a) {
      if (!b.count(j)) {
        EXPECT_EQ(ref[j], kth) << where << ": swapped-in cell " << j;
      }
    }
  }
  record(family + how, m);
  EXPECT_NE(m, set_match::mismatch) << where;
}

/// The kept sets of all heads of one AdaKV ratio against the fixture (see test::adakv_valid); a
/// tie may move cells between heads, but only cells of the recorded ties (tied_flat, tied_safe).
void check_adakv(const kvpress_fixture& f, const std::string& family, const std::string& r,
                 const std::vector<std::vector<int>>& mine,
                 const std::vector<std::vector<float>>& ref, int n_kept, int n_safe,
                 double tolerance, const std::string& how) {
  const int hkv = f.h_kv, n = f.n;
  const std::string where = f.path + how + " r " + r;
  std::vector<std::vector<int>> theirs(hkv);
  std::set<int> a, b;
  for (int h = 0; h < hkv; ++h) {
    theirs[h] = f.kept.at({r, 0, h});
    for (int j : theirs[h]) b.insert(h * n + j);
    for (int j : mine[h]) a.insert(h * n + j);
  }
  ASSERT_TRUE(test::adakv_valid(theirs, ref, n_kept, n_safe, 0.0)) << where << ": kvpress's set";
  const set_match m = test::classify_kept(
      a == b, [&](double eps) { return test::adakv_valid(mine, ref, n_kept, n_safe, eps); },
      tolerance);
  if (m == set_match::tie) {
    std::set<int> recorded;
    if (const auto it = f.tied_flat.find(r); it != f.tied_flat.end())
      recorded.insert(it->second.second.begin(), it->second.second.end());
    for (int h = 0; h < hkv; ++h) {
      if (const auto it = f.tied_safe.find({r, h}); it != f.tied_safe.end()) {
        for (int j : it->second.second) recorded.insert(h * n + j);
      }
    }
    for (int i : a) {
      if (!b.count(i)) {
        EXPECT_TRUE(recorded.count(i)) << where << ": swapped-in cell " << i;
      }
    }
    for (int i : b) {
      if (!a.count(i)) {
        EXPECT_TRUE(recorded.count(i)) << where << ": swapped-out cell " << i;
      }
    }
  }
  for (int h = 0; h < hkv; ++h) record(family + how, m);
  EXPECT_NE(m, set_match::mismatch) << where;
}

std::vector<frame_meta> frames_upto(int n) { return test::frames(0, n); }

/// Kept slots (== positions here) of a plan.
std::vector<int> kept_of(const eviction_plan& plan, const std::int32_t* pos) {
  std::vector<int> out;
  for (std::int32_t i = 0; i < plan.n_kv_before; ++i) {
    if (plan.move_to[i] != core::evicted_slot) out.push_back(pos[i]);
  }
  return out;
}

std::vector<float> window_rows(const kvpress_fixture& f, int w) {
  const int hq = f.h_kv * f.g;
  std::vector<float> rows(static_cast<std::size_t>(hq) * w * f.n);
  for (int h = 0; h < hq; ++h) {
    for (int i = 0; i < w; ++i) {
      const auto& row = f.attn.at({h, f.n - w + i});
      std::copy(row.begin(), row.end(), rows.begin() + (static_cast<std::size_t>(h) * w + i) * f.n);
    }
  }
  return rows;
}

class KvpressFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(KvpressFixture, KeptSetsMatch) {
  const kvpress_fixture f =
      test::parse_fixture(std::string(AUDIOKV_FIXTURE_DIR) + "/" + GetParam());
  const std::string family = family_of(f);
  ++tallies()[family].files;
  const int n = f.n, hkv = f.h_kv, g = f.g;
  const std::vector<frame_meta> frames = frames_upto(n);
  std::vector<std::vector<float>> ours(hkv, std::vector<float>(n));
  std::vector<float> flat(static_cast<std::size_t>(hkv) * n);
  int pads = 0;
  int w = 0, k = 0;
  if (f.press == "snapkv" || f.press == "pyramidkv" || f.press == "adakv") {
    w = std::stoi(f.params.at("window"));
    k = std::stoi(f.params.at("kernel"));
    pads = w;
    const std::vector<float> rows = window_rows(f, w);
    std::vector<double> ws(scores::snapkv_workspace_size(n, w));
    scores::snapkv_scores(rows.data(), hkv, g, w, n, k, scores::kernel_reduce::avg, flat.data(),
                          ws.data());
  } else if (f.press == "tova") {
    pads = 1;
    std::vector<float> last;
    for (int h = 0; h < hkv * g; ++h) {
      const auto& row = f.attn.at({h, n - 1});
      last.insert(last.end(), row.begin(), row.end());
    }
    scores::tova_scores(last.data(), hkv * g, hkv, n, /*force_last=*/true, flat.data());
  } else if (f.press == "knorm") {
    std::vector<float> keys;
    for (int h = 0; h < hkv; ++h) {
      for (int j = 0; j < n; ++j) {
        const auto& key = f.key.at({h, j});
        keys.insert(keys.end(), key.begin(), key.end());
      }
    }
    scores::knorm_scores(keys.data(), hkv, n, f.d, flat.data());
  } else if (f.press == "observed_attention") {
    std::vector<float> attn;
    for (int h = 0; h < hkv * g; ++h) {
      for (int i = 0; i < n; ++i) {
        const auto& row = f.attn.at({h, i});
        attn.insert(attn.end(), row.begin(), row.end());
      }
    }
    std::vector<double> ws(n);
    scores::observed_attention_scores(attn.data(), hkv, g, n, flat.data(), ws.data());
  } else if (f.press != "streamingllm") {
    FAIL() << "unknown press " << f.press << " in " << f.path;
  }
  for (int h = 0; h < hkv; ++h) {
    std::copy(flat.begin() + static_cast<std::ptrdiff_t>(h) * n,
              flat.begin() + static_cast<std::ptrdiff_t>(h + 1) * n, ours[h].begin());
    if (f.press != "streamingllm") {
      expect_scores_near(ours[h].data(), f.scores.at({"", h}), n,
                         f.path + " scores head " + std::to_string(h));
    }
  }
  const double scale = f.press == "streamingllm" ? 1.0 : non_pad_scale(ours, pads);
  const double tolerance = 1e-6 * std::max(scale, 1e-30);
  // kvpress's own scores: the oracle for ties (a set is right if kvpress could have returned it).
  auto ref_of = [&f](int h, const std::string& r_txt) -> const std::vector<float>& {
    return f.press == "streamingllm" ? f.scores.at({r_txt, h}) : f.scores.at({"", h});
  };

  for (const std::string& r_txt : f.ratios) {
    const double r = std::strtod(r_txt.c_str(), nullptr);
    const auto n_kept = static_cast<int>(scores::kvpress_n_kept(n, r));
    if (f.press == "adakv") {
      EXPECT_EQ(f.budget.at({r_txt, 0}), n_kept) << f.path;
      EXPECT_EQ(f.safeguard.at(r_txt),
                scores::adakv_n_safe(n_kept, std::stod(f.params.at("alpha_safeguard"))));
      std::vector<std::uint8_t> kept(flat.size());
      std::vector<float> ws_scores(flat.size());
      std::vector<std::int64_t> ws_order(flat.size());
      const double alpha = std::strtod(f.params.at("alpha_safeguard").c_str(), nullptr);
      EXPECT_EQ(scores::adakv_select(flat.data(), hkv, n, r, alpha, kept.data(), ws_scores.data(),
                                     ws_order.data()),
                static_cast<std::int64_t>(hkv) * n_kept);
      const auto n_safe = static_cast<int>(f.safeguard.at(r_txt));
      std::vector<std::vector<float>> refs;
      for (int h = 0; h < hkv; ++h) refs.push_back(ref_of(h, r_txt));
      std::vector<std::vector<int>> mine(hkv);
      for (int h = 0; h < hkv; ++h) {
        for (int j = 0; j < n; ++j) {
          if (kept[static_cast<std::size_t>(h) * n + j]) mine[h].push_back(j);
        }
      }
      check_adakv(f, family, r_txt, mine, refs, n_kept, n_safe, tolerance, "");
      // Streaming: adakv_group over the same window rows.
      adakv_config config;
      config.snap = snapkv_config{baseline_config{n, n, 1}, w, k, scores::kernel_reduce::avg, g};
      config.num_heads = hkv;
      config.alpha_safeguard = alpha;
      adakv_group group(config);
      group.append_all(frames.data(), n);
      const std::vector<float> rows = window_rows(f, w);
      for (int h = 0; h < hkv; ++h) {
        for (int i = 0; i < w; ++i) {
          std::vector<float> step(static_cast<std::size_t>(g) * n);
          for (int q = 0; q < g; ++q) {
            const float* src = rows.data() + ((static_cast<std::size_t>(h) * g + q) * w + i) * n;
            std::copy(src, src + n, step.begin() + static_cast<std::ptrdiff_t>(q) * n);
          }
          group.observe_group(h, step.data(), g, n);
        }
      }
      std::vector<eviction_plan> plans;
      group.plan_to(n_kept, plans);
      for (int h = 0; h < hkv; ++h) mine[h] = kept_of(plans[h], group.head(h).positions());
      check_adakv(f, family, r_txt, mine, refs, n_kept, n_safe, tolerance, "/streaming");
      continue;
    }
    if (f.press == "streamingllm") {
      std::vector<float> s(n);
      scores::streaming_llm_scores(n, r, std::stoi(f.params.at("n_sink")), s.data());
      for (int h = 0; h < hkv; ++h) {
        expect_scores_near(s.data(), f.scores.at({r_txt, h}), n, f.path + " scores r " + r_txt);
        ours[h] = s;
      }
    }
    for (int layer = 0; layer < f.layers; ++layer) {
      long long budget = n_kept;
      if (f.press == "pyramidkv") {
        budget =
            scores::pyramid_layer_budget(n, r, w, std::stoi(f.params.at("beta")), f.layers, layer);
      }
      EXPECT_EQ(f.budget.at({r_txt, layer}), budget)
          << f.path << " r " << r_txt << " layer " << layer;
      for (int h = 0; h < hkv; ++h) {
        check_topk(f, family, r_txt, layer, h, scores::select_top_k(ours[h], budget),
                   ref_of(h, r_txt), static_cast<int>(budget), tolerance, "");
      }
    }
    // Streaming policies on the same inputs, evicted with plan_to(n_kept).
    const baseline_config base{n, n, 1};
    eviction_plan plan;
    if (f.press == "snapkv") {
      const std::vector<float> rows = window_rows(f, w);
      for (int h = 0; h < hkv; ++h) {
        snapkv policy(snapkv_config{base, w, k, scores::kernel_reduce::avg, g});
        policy.append(frames.data(), n);
        for (int i = 0; i < w; ++i) {
          std::vector<float> step(static_cast<std::size_t>(g) * n);
          for (int q = 0; q < g; ++q) {
            const float* src = rows.data() + ((static_cast<std::size_t>(h) * g + q) * w + i) * n;
            std::copy(src, src + n, step.begin() + static_cast<std::ptrdiff_t>(q) * n);
          }
          policy.observe_group(step.data(), g, n);
        }
        std::vector<float> cand(n);
        ASSERT_EQ(policy.candidate_scores(cand.data()), n - w);
        expect_scores_near(cand.data(), f.scores.at({"", h}), n - w, f.path + " streaming scores");
        policy.plan_to(n_kept, plan);
        check_topk(f, family, r_txt, 0, h, kept_of(plan, policy.positions()), ref_of(h, r_txt),
                   n_kept, tolerance, "/streaming");
      }
    } else if (f.press == "streamingllm") {
      streaming_llm policy(streaming_llm_config{base, std::stoi(f.params.at("n_sink"))});
      policy.append(frames.data(), n);
      policy.plan_to(n_kept, plan);
      for (int h = 0; h < hkv; ++h) {
        check_topk(f, family, r_txt, 0, h, kept_of(plan, policy.positions()), ref_of(h, r_txt),
                   n_kept, tolerance, "/streaming");
      }
    } else if (f.press == "knorm") {
      for (int h = 0; h < hkv; ++h) {
        knorm policy(base);
        std::vector<float> keys;
        for (int j = 0; j < n; ++j) {
          const auto& key = f.key.at({h, j});
          keys.insert(keys.end(), key.begin(), key.end());
        }
        policy.append_with_keys(frames.data(), keys.data(), f.d, n);
        policy.plan_to(n_kept, plan);
        check_topk(f, family, r_txt, 0, h, kept_of(plan, policy.positions()), ref_of(h, r_txt),
                   n_kept, tolerance, "/streaming");
      }
    } else if (f.press == "tova") {
      tova policy(tova_config{base, /*force_last=*/true});
      policy.append(frames.data(), n);
      std::vector<float> last;
      for (int q = 0; q < hkv * g; ++q) {
        const auto& row = f.attn.at({q, n - 1});
        last.insert(last.end(), row.begin(), row.end());
      }
      policy.observe_group(last.data(), hkv * g, n);
      policy.plan_to(n_kept, plan);
      for (int h = 0; h < hkv; ++h) {
        check_topk(f, family, r_txt, 0, h, kept_of(plan, policy.positions()), ref_of(h, r_txt),
                   n_kept, tolerance, "/streaming");
      }
    } else if (f.press == "observed_attention") {
      for (int h = 0; h < hkv; ++h) {
        observed_attention policy(base);
        for (int i = 0; i < n; ++i) {
          policy.append(frames.data() + i, 1);
          std::vector<float> step(static_cast<std::size_t>(g) * (i + 1));
          for (int q = 0; q < g; ++q) {
            const auto& row = f.attn.at({h * g + q, i});
            std::copy(row.begin(), row.begin() + i + 1,
                      step.begin() + static_cast<std::ptrdiff_t>(q) * (i + 1));
          }
          policy.observe_group(step.data(), g, i + 1);
        }
        policy.plan_to(n_kept, plan);
        check_topk(f, family, r_txt, 0, h, kept_of(plan, policy.positions()), ref_of(h, r_txt),
                   n_kept, tolerance, "/streaming");
      }
    }
  }
}

std::string file_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(0, info.param.size() - 4);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Files, KvpressFixture, ::testing::ValuesIn(kvpress_files()),
                         file_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(KvpressFixture);

TEST(KvpressFixtureDirectory, IsPresentAndCoversEveryFamily) {
  ASSERT_TRUE(fs::is_directory(AUDIOKV_FIXTURE_DIR)) << AUDIOKV_FIXTURE_DIR << " is missing";
  const std::vector<std::string> files = fixture_files();
  ASSERT_FALSE(files.empty()) << AUDIOKV_FIXTURE_DIR << " exists but holds no fixture";
  for (const char* prefix :
       {"snapkv_w4", "snapkv_w8", "pyramidkv_w4", "pyramidkv_w8", "pyramidkv_w4_k5_L1_",
        "streamingllm_s4", "streamingllm_s0_", "knorm_", "tova_N", "observed_",
        "adakv_snapkv_w4_k5_a0.0_", "adakv_snapkv_w4_k5_a0.2_", "adakv_snapkv_w4_k5_a1.0_",
        "h2o_official_", "streamingllm_official_", "tova_official_"}) {
    EXPECT_TRUE(std::any_of(files.begin(), files.end(),
                            [prefix](const std::string& f) { return f.rfind(prefix, 0) == 0; }))
        << "no fixture file starts with " << prefix;
  }
  // Exactly tied inputs (rounded attention, equal key norms) and GQA 7 for every input family.
  for (const char* family :
       {"snapkv_w4", "snapkv_w8", "pyramidkv_w4", "knorm_", "tova_N", "observed_", "adakv_"}) {
    for (const char* infix : {"_tied.txt", "_G7"}) {
      EXPECT_TRUE(std::any_of(files.begin(), files.end(),
                              [&](const std::string& f) {
                                return f.rfind(family, 0) == 0 &&
                                       f.find(infix) != std::string::npos;
                              }))
          << "no " << family << "* fixture with " << infix;
    }
  }
}

}  // namespace

/// Prints the per-family tally once all tests ran (visible in ctest --verbose / the log).
class tally_printer : public ::testing::EmptyTestEventListener {
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    for (const auto& [family, t] : tallies()) {
      if (t.exact + t.tie + t.near_tie + t.mismatch == 0) continue;
      std::cout << "[kvpress parity] " << family << ": exact " << t.exact << ", tie " << t.tie
                << ", near-tie " << t.near_tie << ", mismatch " << t.mismatch << "\n";
    }
  }
};
static const bool tally_registered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new tally_printer);
  return true;
}();
