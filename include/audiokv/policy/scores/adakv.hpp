// SPDX-License-Identifier: Apache-2.0
/// @file
/// kvpress AdaKVPress (head-adaptive budgets): every head keeps its top n_safe tokens, then the
/// globally lowest scores over all heads of the layer are pruned until H * n_kept remain.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "../../core/selection.hpp"
#include "../../error.hpp"
#include "budget.hpp"

namespace audiokv::policy::scores {

/// @brief The AdaKV pruning step over heads of possibly different lengths.
///
/// Head h owns entries [offsets[h], offsets[h+1]) of `scores` (its tokens in time order). Each
/// head's top min(n_safe, n_h) entries are raised to FLT_MAX (kvpress uses finfo.max), then the
/// `n_prune` lowest entries of the flattened array are marked in `evict` (1 = pruned). Ties:
/// lower score, then lower index within the head, then lower head, is pruned first.
/// @param scores  [offsets[H]] modified in place (the safeguard), NaN rejected by the caller.
/// @param order   [offsets[H]] scratch. Never allocates.
inline void adakv_prune(float* scores, const std::int64_t* offsets, std::int32_t num_heads,
                        std::int64_t n_safe, std::int64_t n_prune, std::uint8_t* evict,
                        std::int64_t* order) {
  const std::int64_t total = offsets[num_heads];
  for (std::int32_t h = 0; h < num_heads; ++h) {
    const std::int64_t first = offsets[h], n_h = offsets[h + 1] - offsets[h];
    const std::int64_t safe = std::min(n_safe, n_h);
    if (safe <= 0) continue;
    for (std::int64_t j = 0; j < n_h; ++j) order[j] = first + j;
    auto keeps_before = [scores](std::int64_t a, std::int64_t b) {
      return scores[a] > scores[b] || (scores[a] == scores[b] && a > b);
    };
    if (safe < n_h) std::nth_element(order, order + safe - 1, order + n_h, keeps_before);
    for (std::int64_t i = 0; i < safe; ++i) scores[order[i]] = std::numeric_limits<float>::max();
  }
  for (std::int64_t i = 0; i < total; ++i) evict[i] = 0;
  n_prune = std::min(n_prune, total);
  if (n_prune <= 0) return;
  // Rank flattened entries by (score, index within head, head).
  const std::int64_t* off = offsets;
  auto head_of = [off, num_heads](std::int64_t i) {
    return static_cast<std::int32_t>(std::upper_bound(off, off + num_heads + 1, i) - off - 1);
  };
  for (std::int64_t i = 0; i < total; ++i) order[i] = i;
  auto prunes_before = [&](std::int64_t a, std::int64_t b) {
    if (scores[a] != scores[b]) return scores[a] < scores[b];
    const std::int32_t ha = head_of(a), hb = head_of(b);
    const std::int64_t ja = a - off[ha], jb = b - off[hb];
    return ja != jb ? ja < jb : ha < hb;
  };
  if (n_prune < total) std::nth_element(order, order + n_prune - 1, order + total, prunes_before);
  for (std::int64_t i = 0; i < n_prune; ++i) evict[order[i]] = 1;
}

/// @brief kvpress AdaKVPress on [num_heads, n] inner scores at compression ratio r.
///
///   n_kept = kvpress_n_kept(n, r); n_safe = adakv_n_safe(n_kept, alpha)
///   prune the global bottom num_heads * (n - n_kept) after forcing each head's top n_safe.
///
/// @param scores    [num_heads, n] inner press scores (e.g. snapkv_scores), not modified.
/// @param kept      [num_heads, n] output: 1 = kept, 0 = pruned (kvpress masks pruned keys).
/// @param ws_scores [num_heads * n] scratch; @param ws_order [num_heads * n] scratch.
/// @return the total number kept, num_heads * n_kept. Never allocates.
inline std::int64_t adakv_select(const float* scores, std::int32_t num_heads, std::int32_t n,
                                 double compression_ratio, double alpha_safeguard,
                                 std::uint8_t* kept, float* ws_scores, std::int64_t* ws_order) {
  constexpr const char* where = "scores::adakv_select";
  AUDIOKV_REQUIRE(num_heads >= 1, where, "num_heads", num_heads, "must be >= 1");
  AUDIOKV_REQUIRE(n >= 1, where, "n", n, "must be >= 1");
  const std::int64_t total = static_cast<std::int64_t>(num_heads) * n;
  AUDIOKV_REQUIRE(
      scores != nullptr && kept != nullptr && ws_scores != nullptr && ws_order != nullptr, where,
      "scores", "nullptr", "scores, kept and workspaces must be provided");
  for (std::int64_t i = 0; i < total; ++i) {
    AUDIOKV_REQUIRE(!std::isnan(scores[i]), where, ::audiokv::detail::indexed("scores", i),
                    scores[i], "must not be NaN");
  }
  const std::int64_t n_kept = kvpress_n_kept(n, compression_ratio);
  const std::int64_t n_safe = adakv_n_safe(n_kept, alpha_safeguard);
  constexpr std::int32_t max_heads = 256;
  AUDIOKV_REQUIRE(num_heads <= max_heads, where, "num_heads", num_heads, "must be <= 256");
  std::int64_t offsets[max_heads + 1];  // heads of equal length: head h owns [h n, (h+1) n)
  for (std::int32_t h = 0; h <= num_heads; ++h) offsets[h] = static_cast<std::int64_t>(h) * n;
  for (std::int64_t i = 0; i < total; ++i) ws_scores[i] = scores[i];
  adakv_prune(ws_scores, offsets, num_heads, n_safe, num_heads * (n - n_kept), kept, ws_order);
  std::int64_t kept_total = 0;
  for (std::int64_t i = 0; i < total; ++i) {
    kept[i] = kept[i] ? 0 : 1;
    kept_total += kept[i];
  }
  return kept_total;
}

}  // namespace audiokv::policy::scores

namespace audiokv {
namespace scores = policy::scores;
}  // namespace audiokv
