// SPDX-License-Identifier: Apache-2.0
// Golden cases of the official eviction rules (tests/fixtures/kvpress/*_official_case*.txt):
// FMInference/H2O real-drop H2OKVCache_LayerWise, mit-han-lab/streaming-llm StartRecentKVCache
// (__call__ and evict_for_space) and schwartz-lab-NLP/TOVA TOVACache.reduce, replayed through
// the streaming policies step by step.
#include <gtest/gtest.h>

#include <algorithm>
#include <audiokv/policy/baselines/h2o.hpp>
#include <audiokv/policy/baselines/streaming_llm.hpp>
#include <audiokv/policy/baselines/tova.hpp>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "baselines/kvpress_fixture.hpp"
#include "common/stream.hpp"

namespace {

using namespace audiokv;
using test::kvpress_fixture;
namespace fs = std::filesystem;

std::vector<std::string> official_files(const std::string& prefix) {
  std::vector<std::string> out;
  if (!fs::is_directory(AUDIOKV_FIXTURE_DIR)) return out;
  for (const auto& entry : fs::directory_iterator(AUDIOKV_FIXTURE_DIR)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> positions_of(const eviction_policy& p) {
  return std::vector<int>(p.positions(), p.positions() + p.num_cells());
}

void evict_if_wanted(eviction_policy& p) {
  if (!p.wants_eviction()) return;
  eviction_plan plan;
  p.plan(plan);
  p.apply(plan);
  EXPECT_LE(p.num_cells(), p.budget());
}

TEST(OfficialGolden, H2ORealDrop) {
  const auto files = official_files("h2o_official_");
  ASSERT_FALSE(files.empty()) << "no h2o_official_* fixture";
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const kvpress_fixture f = test::parse_fixture(path);
    const int hh = std::stoi(f.params.at("hh_size")),
              recent = std::stoi(f.params.at("recent_size"));
    for (int h = 0; h < f.h_kv; ++h) {
      h2o policy(h2o_config{baseline_config{hh + recent, f.n, 1}, recent});
      ASSERT_EQ(policy.hh_size(), hh);
      int next_pos = 0;
      for (const auto& step : f.steps) {
        const int s = std::stoi(step[0]);
        const std::string& kind = step[1];
        const int arg = std::stoi(step[2]);
        const int rows = kind == "prefill" ? arg : 1;
        const auto fr = test::frames(next_pos, kind == "prefill" ? arg : 1);
        next_pos += static_cast<int>(fr.size());
        if (kind == "decode") {
          ASSERT_EQ(fr[0].pos, arg);
        }
        policy.append(fr.data(), static_cast<std::int32_t>(fr.size()));
        EXPECT_EQ(positions_of(policy), f.cols.at({s, h})) << "step " << s;
        for (int i = 0; i < rows; ++i) {
          const auto& row = f.step_attn.at({s, h, i});
          policy.observe(row.data(), static_cast<std::int32_t>(row.size()));
        }
        evict_if_wanted(policy);
        EXPECT_EQ(positions_of(policy), f.step_kept.at({s, h})) << "step " << s << " head " << h;
        const auto& expected = f.step_scores.at({s, h});
        ASSERT_EQ(static_cast<int>(expected.size()), policy.num_cells());
        for (int j = 0; j < policy.num_cells(); ++j) {
          EXPECT_NEAR(policy.accumulated()[j], expected[j], 1e-6) << "step " << s << " cell " << j;
        }
      }
    }
  }
}

TEST(OfficialGolden, StreamingLLMStartRecent) {
  const auto files = official_files("streamingllm_official_");
  ASSERT_FALSE(files.empty()) << "no streamingllm_official_* fixture";
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const kvpress_fixture f = test::parse_fixture(path);
    const int start = std::stoi(f.params.at("start_size"));
    const int recent = std::stoi(f.params.at("recent_size"));
    const bool call_mode = f.params.at("mode") == "call";
    // The evict_for_space driver lets the cache grow past start + recent during generation.
    streaming_llm policy(streaming_llm_config{baseline_config{start + recent, f.n, 1}, start});
    int next_pos = 0;
    for (const auto& step : f.steps) {
      const int s = std::stoi(step[0]);
      const int arg = std::stoi(step[2]);
      if (step[1] == "append") {
        const auto fr = test::frames(next_pos, arg);
        next_pos += arg;
        policy.append(fr.data(), arg);
        if (call_mode) evict_if_wanted(policy);
      } else {
        ASSERT_EQ(step[1], "evict_for_space");
        // evict_for_space(c) == plan_to(max(start, start + recent - c)) when it evicts.
        if (policy.num_cells() + arg > start + recent) {
          eviction_plan plan;
          policy.plan_to(std::max(start, start + recent - arg), plan);
          policy.apply(plan);
        }
      }
      for (int h = 0; h < f.h_kv; ++h) {
        EXPECT_EQ(positions_of(policy), f.step_kept.at({s, h})) << "step " << s;
      }
    }
  }
}

TEST(OfficialGolden, TovaReduce) {
  const auto files = official_files("tova_official_");
  ASSERT_FALSE(files.empty()) << "no tova_official_* fixture";
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const kvpress_fixture f = test::parse_fixture(path);
    const int hq = f.h_kv * f.g;
    tova policy(tova_config{baseline_config{std::stoi(f.params.at("cache_size")), f.n, 1}, false});
    int next_pos = 0;
    for (const auto& step : f.steps) {
      const int s = std::stoi(step[0]);
      const int count = step[1] == "prefill" ? std::stoi(step[2]) : 1;
      const auto fr = test::frames(next_pos, count);
      next_pos += count;
      policy.append(fr.data(), count);
      const int n = policy.num_cells();
      EXPECT_EQ(positions_of(policy), f.cols.at({s, 0})) << "step " << s;
      for (int i = 0; i < count; ++i) {
        std::vector<float> rows;  // [hq, n]: every query head of the layer
        for (int q = 0; q < hq; ++q) {
          const auto& row = f.step_attn.at({s, q, i});
          rows.insert(rows.end(), row.begin(), row.end());
        }
        policy.observe_group(rows.data(), hq, n);
      }
      const auto& expected_scores = f.step_scores.at({s, -1});
      for (int j = 0; j < n; ++j) {
        EXPECT_FLOAT_EQ(policy.last_row()[j], expected_scores[j]) << "step " << s << " cell " << j;
      }
      evict_if_wanted(policy);
      for (int h = 0; h < f.h_kv; ++h) {
        EXPECT_EQ(positions_of(policy), f.step_kept.at({s, h})) << "step " << s;
      }
    }
  }
}

}  // namespace
