// SPDX-License-Identifier: Apache-2.0
/// @file
/// Generic top-k selection for one-shot scorers: the kept index set, ascending. Ties follow
/// core::evicts_before (equal scores evict the lower index first, so the newer one is kept).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../../core/selection.hpp"
#include "../../error.hpp"

namespace audiokv::policy::scores {

/// @brief Writes the indices of the `n_kept` highest scores to `kept`, ascending.
/// @param scores    [n] higher means keep; NaN is rejected (+-inf allowed).
/// @param workspace [n] caller-provided scratch.
/// @param kept      [min(n_kept, n)] output, ascending index order.
/// @return the number of kept indices, min(n_kept, n). Never allocates.
/// kvpress leaves its cache in descending-score order; only the set is defined, so sets compare.
inline std::int32_t select_top_k(const float* scores, std::int32_t n, std::int32_t n_kept,
                                 std::int32_t* workspace, std::int32_t* kept) {
  constexpr const char* where = "scores::select_top_k";
  AUDIOKV_REQUIRE(n >= 0, where, "n", n, "must be >= 0");
  AUDIOKV_REQUIRE(n_kept >= 0, where, "n_kept", n_kept, "must be >= 0");
  AUDIOKV_REQUIRE(n == 0 || (scores != nullptr && workspace != nullptr), where, "scores", "nullptr",
                  "scores and workspace must point to n values");
  for (std::int32_t j = 0; j < n; ++j) {
    AUDIOKV_REQUIRE(!std::isnan(scores[j]), where, ::audiokv::detail::indexed("scores", j),
                    scores[j], "must not be NaN");
  }
  const std::int32_t count = std::min(n_kept, n);
  if (count == 0) return 0;
  for (std::int32_t j = 0; j < n; ++j) workspace[j] = j;
  // keep-first order: the reverse of the eviction order.
  auto keeps_before = [scores](std::int32_t a, std::int32_t b) {
    return core::evicts_before(scores[b], b, scores[a], a);
  };
  if (count < n) std::nth_element(workspace, workspace + count - 1, workspace + n, keeps_before);
  std::sort(workspace, workspace + count);
  for (std::int32_t i = 0; i < count; ++i) kept[i] = workspace[i];
  return count;
}

/// Convenience overload: the ascending kept index set of the `n_kept` highest scores.
inline std::vector<std::int32_t> select_top_k(const std::vector<float>& scores,
                                              std::int64_t n_kept) {
  const auto n = static_cast<std::int32_t>(scores.size());
  AUDIOKV_REQUIRE(n_kept >= 0, "scores::select_top_k", "n_kept", n_kept, "must be >= 0");
  const auto k = static_cast<std::int32_t>(std::min<std::int64_t>(n_kept, n));
  std::vector<std::int32_t> workspace(scores.size());
  std::vector<std::int32_t> kept(k);
  select_top_k(scores.data(), n, k, workspace.data(), kept.data());
  return kept;
}

}  // namespace audiokv::policy::scores

namespace audiokv {
namespace scores = policy::scores;
}  // namespace audiokv
