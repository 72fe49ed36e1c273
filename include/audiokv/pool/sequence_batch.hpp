// SPDX-License-Identifier: Apache-2.0
/// @file
/// F29: many sequences of different lengths observed, planned and applied in one call each,
/// every sequence with its own state; no sequence's plan depends on another's.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../span.hpp"
#include "../types/eviction_plan.hpp"

namespace audiokv {

/// @brief A batch of independent caches, one per sequence, fed in CSR form.
/// @tparam Policy any eviction_policy implementation (e.g. tiered_cache<>).
///
/// observe() validates the whole batch before it touches any sequence, so a bad score in
/// sequence 3 leaves sequences 0..2 unchanged too.
template <class Policy>
class sequence_batch {
 public:
  /// Adds a sequence; returns its index.
  template <class... Args>
  std::int32_t add_sequence(Args&&... args) {
    sequences_.emplace_back(std::forward<Args>(args)...);
    plans_.emplace_back();
    plans_.back().reserve(sequences_.back().capacity());
    return static_cast<std::int32_t>(sequences_.size()) - 1;
  }

  std::int32_t size() const noexcept { return static_cast<std::int32_t>(sequences_.size()); }
  Policy& operator[](std::int32_t s) { return sequences_[s]; }
  const Policy& operator[](std::int32_t s) const { return sequences_[s]; }
  /// The plan made for sequence s by the last plan_all().
  const eviction_plan& plan(std::int32_t s) const { return plans_[s]; }

  /// Scores of sequence s are scores[indptr[s] .. indptr[s + 1]), one per cached cell. The
  /// lengths are checked before anything is read: indptr.size() == size() + 1 and
  /// scores.size() == indptr[size()] (the offsets themselves are checked against each
  /// sequence's num_cells() first).
  /// @throws audiokv::error naming "indptr.size()", "indptr[s]", "scores.size()" or
  ///         "scores[j]"; no sequence changes.
  void observe(span<const float> scores, span<const std::int64_t> indptr) {
    constexpr const char* where = "sequence_batch::observe";
    AUDIOKV_REQUIRE(indptr.size() == static_cast<std::size_t>(size()) + 1, where, "indptr.size()",
                    indptr.size(),
                    detail::describe("must equal size() + 1 = ", size() + 1).c_str());
    check_offsets(where, indptr.data());
    AUDIOKV_REQUIRE(static_cast<std::int64_t>(scores.size()) == indptr[size()], where,
                    "scores.size()", scores.size(),
                    detail::describe("must equal indptr[size()] = ", indptr[size()]).c_str());
    observe(scores.data(), indptr.data());
  }

  /// The unchecked-length form: reads size() + 1 offsets from `indptr` and indptr[size()]
  /// scores, which the caller guarantees the buffers hold. Prefer the span form.
  /// @param indptr [size() + 1], non-decreasing, indptr[0] == 0.
  void observe(const float* scores, const std::int64_t* indptr) {
    constexpr const char* where = "sequence_batch::observe";
    AUDIOKV_REQUIRE(indptr != nullptr, where, "indptr", "nullptr", "must hold size() + 1 offsets");
    check_offsets(where, indptr);
    for (std::int32_t s = 0; s < size(); ++s) {
      for (std::int64_t j = indptr[s]; j < indptr[s + 1]; ++j) {
        AUDIOKV_REQUIRE(std::isfinite(scores[j]) && scores[j] >= 0.0f, where,
                        detail::indexed("scores", j), scores[j], "must be finite and >= 0");
      }
    }
    for (std::int32_t s = 0; s < size(); ++s) {
      sequences_[s].observe(scores + indptr[s], sequences_[s].num_cells());
    }
  }

  /// Plans every sequence whose trigger fires (the others get empty plans); returns how many
  /// plans evict something.
  std::int32_t plan_all() {
    std::int32_t evicting = 0;
    for (std::int32_t s = 0; s < size(); ++s) {
      sequences_[s].plan(plans_[s]);
      evicting += plans_[s].evict.empty() ? 0 : 1;
    }
    return evicting;
  }

  /// Applies the plans of the last plan_all() (the engine has moved its K/V by then).
  void apply_all() {
    for (std::int32_t s = 0; s < size(); ++s) sequences_[s].apply(plans_[s]);
  }

 private:
  /// indptr[0] == 0 and each sequence's length indptr[s + 1] - indptr[s] == its num_cells().
  void check_offsets(const char* where, const std::int64_t* indptr) const {
    AUDIOKV_REQUIRE(indptr[0] == 0, where, "indptr[0]", indptr[0], "must be 0");
    for (std::int32_t s = 0; s < size(); ++s) {
      const std::int64_t length = indptr[s + 1] - indptr[s];
      AUDIOKV_REQUIRE(length == sequences_[s].num_cells(), where, detail::indexed("indptr", s + 1),
                      indptr[s + 1],
                      detail::describe("must make sequence ", s, "'s length (", length,
                                       ") equal its num_cells() = ", sequences_[s].num_cells())
                          .c_str());
    }
  }

  std::vector<Policy> sequences_;
  std::vector<eviction_plan> plans_;
};

}  // namespace audiokv
