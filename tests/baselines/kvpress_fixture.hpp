// SPDX-License-Identifier: Apache-2.0
/// @file
/// Parser of tests/fixtures/kvpress/*.txt (format: tests/fixtures/README.md).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace audiokv::test {

/// One fixture file. Keys follow the README: ratios stay strings (parse with strtod).
struct kvpress_fixture {
  using sel_key = std::tuple<std::string, int, int>;  // (r, layer, head)
  std::string path, press;
  std::map<std::string, std::string> params;
  int n = 0, h_kv = 0, g = 1, d = 0, layers = 1, units = 0;
  std::vector<std::string> ratios;
  std::string attn_from;
  std::map<std::pair<int, int>, std::vector<float>> attn;             // (q head, row)
  std::map<std::tuple<int, int, int>, std::vector<float>> step_attn;  // (step, head, row)
  std::map<std::pair<int, int>, std::vector<float>> key;              // (kv head, token)
  std::map<std::pair<std::string, int>, std::vector<float>> scores;   // ("" or r, head)
  std::map<std::pair<int, int>, std::vector<float>> step_scores;      // (step, head or -1)
  std::map<std::pair<std::string, int>, long long> budget;            // (r, layer)
  std::map<std::string, long long> safeguard;                         // r
  std::map<sel_key, std::vector<int>> kept;
  std::map<std::pair<int, int>, std::vector<int>> step_kept;  // (step, head)
  std::map<std::pair<int, int>, std::vector<int>> cols;       // (step, head)
  std::map<sel_key, double> gap;
  std::map<sel_key, std::pair<int, std::vector<int>>> tied;  // need, indices
  std::vector<std::vector<std::string>> steps;               // "step s <kind> <arg>"
};

inline std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

inline std::vector<float> to_floats(const std::vector<std::string>& v) {
  std::vector<float> out;
  for (const auto& s : v) out.push_back(std::strtof(s.c_str(), nullptr));
  return out;
}

inline std::vector<int> to_ints(const std::vector<std::string>& v) {
  std::vector<int> out;
  for (const auto& s : v) out.push_back(std::atoi(s.c_str()));
  return out;
}

/// Parses one file; throws std::runtime_error on an unknown line.
inline kvpress_fixture parse_fixture(const std::string& path) {
  kvpress_fixture f;
  f.path = path;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto colon = line.find(" : ");
    const std::vector<std::string> t = split_words(line.substr(0, colon));
    const std::vector<std::string> vals = colon == std::string::npos
                                              ? std::vector<std::string>{}
                                              : split_words(line.substr(colon + 3));
    const std::string& k = t[0];
    if (k == "press") {
      f.press = t[1];
      for (std::size_t i = 2; i + 1 < t.size(); i += 2) f.params[t[i]] = t[i + 1];
    } else if (k == "N") {
      f.n = std::stoi(t[1]);
      f.h_kv = std::stoi(t[3]);
      f.g = std::stoi(t[5]);
      f.d = std::stoi(t[7]);
      f.layers = std::stoi(t[9]);
    } else if (k == "ratios") {
      f.ratios.assign(t.begin() + 1, t.end());
    } else if (k == "attn_from") {
      f.attn_from = t[1];
    } else if (k == "units") {
      f.units = std::stoi(t[1]);
    } else if (k == "attn" && t[1] == "head") {
      f.attn[{std::stoi(t[2]), std::stoi(t[4])}] = to_floats(vals);
    } else if (k == "attn" && t[1] == "step") {
      f.step_attn[{std::stoi(t[2]), std::stoi(t[4]), std::stoi(t[6])}] = to_floats(vals);
    } else if (k == "key") {
      f.key[{std::stoi(t[2]), std::stoi(t[4])}] = to_floats(vals);
    } else if (k == "scores" && t[1] == "head") {
      f.scores[{"", std::stoi(t[2])}] = to_floats(vals);
    } else if (k == "scores" && t[1] == "r") {
      f.scores[{t[2], std::stoi(t[4])}] = to_floats(vals);
    } else if (k == "scores" && t[1] == "step") {
      f.step_scores[{std::stoi(t[2]), t.size() > 3 ? std::stoi(t[4]) : -1}] = to_floats(vals);
    } else if (k == "budget") {
      f.budget[{t[2], std::stoi(t[4])}] = std::stoll(vals.at(0));
    } else if (k == "safeguard") {
      f.safeguard[t[2]] = std::stoll(vals.at(0));
    } else if (k == "kept" && t[1] == "r") {
      f.kept[{t[2], std::stoi(t[4]), std::stoi(t[6])}] = to_ints(vals);
    } else if (k == "kept" && t[1] == "step") {
      f.step_kept[{std::stoi(t[2]), std::stoi(t[6])}] = to_ints(vals);
    } else if (k == "gap") {
      f.gap[{t[2], std::stoi(t[4]), std::stoi(t[6])}] = std::strtod(vals.at(0).c_str(), nullptr);
    } else if (k == "tied") {
      f.tied[{t[2], std::stoi(t[4]), std::stoi(t[6])}] = {std::stoi(t[8]), to_ints(vals)};
    } else if (k == "step") {
      f.steps.emplace_back(t.begin() + 1, t.end());
    } else if (k == "cols") {
      f.cols[{std::stoi(t[2]), std::stoi(t[4])}] = to_ints(vals);
    } else {
      throw std::runtime_error(path + ": unknown line " + line.substr(0, 60));
    }
  }
  if (!f.attn_from.empty()) {
    const auto slash = path.find_last_of('/');
    const kvpress_fixture src = parse_fixture(path.substr(0, slash + 1) + f.attn_from);
    f.attn = src.attn;
  }
  return f;
}

/// How a computed kept set matched the fixture.
enum class set_match { exact, tie, near_tie, mismatch };

/// README comparison rule: exact; or equal outside a recorded tie with `need` picked from it;
/// or (gap below `tolerance`) a single boundary swap.
inline set_match compare_kept(const std::vector<int>& mine, const std::vector<int>& expected,
                              double gap, const std::pair<int, std::vector<int>>* tied,
                              double tolerance) {
  const std::set<int> a(mine.begin(), mine.end()), b(expected.begin(), expected.end());
  if (a == b) return set_match::exact;
  if (tied != nullptr) {
    const std::set<int> tie(tied->second.begin(), tied->second.end());
    std::set<int> a_sure, b_sure;
    int picked = 0;
    for (int x : a) {
      if (tie.count(x)) {
        ++picked;
      } else {
        a_sure.insert(x);
      }
    }
    for (int x : b) {
      if (!tie.count(x)) b_sure.insert(x);
    }
    if (a_sure == b_sure && picked == tied->first && a.size() == b.size()) return set_match::tie;
  }
  if (gap <= tolerance && a.size() == b.size()) {
    int diff = 0;
    for (int x : a) diff += b.count(x) ? 0 : 1;
    if (diff == 1) return set_match::near_tie;
  }
  return set_match::mismatch;
}

}  // namespace audiokv::test
