// SPDX-License-Identifier: Apache-2.0
/// @file
/// Parser of tests/fixtures/kvpress/*.txt (format: tests/fixtures/README.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
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
  /// AdaKV: the tie at the boundary of the flattened top H * n_kept (indices h * N + j), by r.
  std::map<std::string, std::pair<int, std::vector<int>>> tied_flat;
  /// AdaKV: the tie at head h's safeguard boundary (its n_safe-th score), by (r, head).
  std::map<std::pair<std::string, int>, std::pair<int, std::vector<int>>> tied_safe;
  std::vector<std::vector<std::string>> steps;  // "step s <kind> <arg>"
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
    } else if (k == "tied_flat") {
      f.tied_flat[t[2]] = {std::stoi(t[4]), to_ints(vals)};
    } else if (k == "tied_safe") {
      f.tied_safe[{t[2], std::stoi(t[4])}] = {std::stoi(t[6]), to_ints(vals)};
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

/// True iff `chosen` is a set that top-k over `ref` returns under some order of equal scores once
/// every chosen score is raised by `eps`: |chosen| = k (no duplicates, all in range) and
///   min_{i in chosen} ref[i] + eps >= max_{i not in chosen} ref[i].
/// With eps = 0 and a valid reference set B this holds iff chosen and B have the same size, the
/// same multiset of scores, and every cell in which they differ scores exactly the k-th largest
/// score, however many swaps there are.
inline bool topk_valid(const std::vector<int>& chosen, const std::vector<float>& ref, int k,
                       double eps) {
  const std::set<int> in(chosen.begin(), chosen.end());
  if (static_cast<int>(in.size()) != k || in.size() != chosen.size()) return false;
  if (!in.empty() && (*in.begin() < 0 || *in.rbegin() >= static_cast<int>(ref.size())))
    return false;
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < static_cast<int>(ref.size()); ++i) {
    if (in.count(i)) {
      lo = std::min(lo, static_cast<double>(ref[i]));
    } else {
      hi = std::max(hi, static_cast<double>(ref[i]));
    }
  }
  return lo + eps >= hi;
}

/// True iff kvpress's AdaKV rule on `ref` ([H][N] inner scores) keeps exactly `chosen` (per head)
/// under some order of equal scores, once every chosen score is raised by `eps`. The rule:
/// each head's top n_safe scores become +inf (kvpress: finfo.max), then the flattened top
/// H * n_kept are kept. Both top-k steps here break ties in favour of `chosen`; if any tie order
/// yields `chosen` this one does, and whatever it yields is a possible output of the rule.
inline bool adakv_valid(const std::vector<std::vector<int>>& chosen,
                        const std::vector<std::vector<float>>& ref, int n_kept, int n_safe,
                        double eps) {
  const int hkv = static_cast<int>(ref.size());
  if (static_cast<int>(chosen.size()) != hkv) return false;
  const int n = hkv == 0 ? 0 : static_cast<int>(ref[0].size());
  std::vector<double> s(static_cast<std::size_t>(hkv) * n);
  std::vector<char> in(s.size(), 0);
  std::size_t count = 0;
  for (int h = 0; h < hkv; ++h) {
    for (int j : chosen[h]) {
      if (j < 0 || j >= n || in[static_cast<std::size_t>(h) * n + j]) return false;
      in[static_cast<std::size_t>(h) * n + j] = 1;
      ++count;
    }
    for (int j = 0; j < n; ++j) {
      const std::size_t i = static_cast<std::size_t>(h) * n + j;
      s[i] = static_cast<double>(ref[h][j]) + (in[i] ? eps : 0.0);
    }
  }
  auto keeps_first = [&](std::size_t a, std::size_t b) {
    return s[a] != s[b] ? s[a] > s[b] : in[a] > in[b];
  };
  std::vector<std::size_t> order;
  for (int h = 0; h < hkv; ++h) {
    order.clear();
    for (int j = 0; j < n; ++j) order.push_back(static_cast<std::size_t>(h) * n + j);
    std::stable_sort(order.begin(), order.end(), keeps_first);
    for (int i = 0; i < std::min(n_safe, n); ++i)
      s[order[i]] = std::numeric_limits<double>::infinity();
  }
  order.clear();
  for (std::size_t i = 0; i < s.size(); ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), keeps_first);
  const std::size_t total = std::min(s.size(), static_cast<std::size_t>(hkv) * n_kept);
  if (count != total) return false;
  for (std::size_t i = 0; i < total; ++i) {
    if (!in[order[i]]) return false;
  }
  return true;
}

/// exact: the sets are equal; tie: `valid(0)` (another resolution of exactly equal scores);
/// near_tie: `valid(tolerance)` only (the sets differ where the scores are within tolerance);
/// else mismatch.
template <class Valid>
set_match classify_kept(bool equal, Valid&& valid, double tolerance) {
  if (equal) return set_match::exact;
  if (valid(0.0)) return set_match::tie;
  if (valid(tolerance)) return set_match::near_tie;
  return set_match::mismatch;
}

}  // namespace audiokv::test
