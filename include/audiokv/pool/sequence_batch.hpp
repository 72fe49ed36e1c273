// SPDX-License-Identifier: Apache-2.0
/// @file
/// Batching: many sequences of different lengths observed, planned and applied in one call each,
/// every sequence with its own state; no sequence's plan depends on another's. Sequences are
/// slots, like a serving engine's request slots: a finished sequence is removed and its slot
/// (index and reserved plan) is reused by the next one added.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "../core/importance.hpp"
#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../span.hpp"
#include "../types/eviction_plan.hpp"
#include "../types/frame_table.hpp"

namespace audiokv::pool {

/// @brief A batch of independent caches, one per sequence, fed in CSR form.
/// @tparam Policy any eviction_policy implementation (e.g. tiered_cache<>).
///
/// observe() validates the whole batch before it touches any sequence, so a bad score in
/// sequence 3 leaves sequences 0..2 unchanged too. Indices are stable: removing sequence s
/// leaves the others' indices as they are, and s becomes a free slot (zero cells in observe's
/// indptr, an empty plan in plan_all, skipped by apply_all) until add_sequence reuses it.
template <class Policy>
class sequence_batch {
 public:
  sequence_batch() = default;
  /// A copy of every sequence (each a copy of its policy) and slot.
  sequence_batch(const sequence_batch&) = default;
  /// Copy assignment: see the copy constructor.
  sequence_batch& operator=(const sequence_batch&) = default;
  /// Takes every sequence and slot; `other` is left an empty batch (no slots, no sequences),
  /// valid for every call, which add_sequence() fills again.
  sequence_batch(sequence_batch&& other) noexcept
      : sequences_(std::move(other.sequences_)),
        plans_(std::move(other.plans_)),
        active_(std::exchange(other.active_, 0)) {
    other.sequences_.clear();
    other.plans_.clear();
  }
  /// Move assignment, with the moved-from state of the move constructor.
  sequence_batch& operator=(sequence_batch&& other) noexcept {
    if (this != &other) {
      sequences_ = std::move(other.sequences_);
      plans_ = std::move(other.plans_);
      active_ = std::exchange(other.active_, 0);
      other.sequences_.clear();
      other.plans_.clear();
    }
    return *this;
  }
  ~sequence_batch() = default;

  /// Adds a sequence built from `args` (the Policy's constructor arguments) in the lowest free
  /// slot, or in a new slot at the end; returns its index. Allocates (admission, not a step).
  template <class... Args>
  std::int32_t add_sequence(Args&&... args) {
    std::int32_t s = 0;
    while (s < size() && sequences_[s].has_value()) ++s;
    const bool grow = s == size();
    if (grow) {
      sequences_.emplace_back();
      plans_.emplace_back();
    }
    try {
      sequences_[s].emplace(std::forward<Args>(args)...);
    } catch (...) {  // a rejected configuration leaves the batch as it was
      if (grow) {
        sequences_.pop_back();
        plans_.pop_back();
      }
      throw;
    }
    clear_plan(plans_[s]);  // no plan of the previous occupant survives; its memory does
    plans_[s].reserve(sequences_[s]->capacity());
    ++active_;
    return s;
  }

  /// @brief Removes sequence s (it finished or was preempted): its policy and state are
  /// destroyed; the slot and its plan's reserved memory wait for the next add_sequence.
  /// @throws audiokv::error naming "s" unless s is an active sequence; nothing changes then.
  void remove_sequence(std::int32_t s) {
    AUDIOKV_REQUIRE(
        s >= 0 && s < size() && sequences_[s].has_value(), "sequence_batch::remove_sequence", "s",
        s,
        ::audiokv::detail::describe("must be an active sequence of [0, size()) = [0, ", size(), ")")
            .c_str());
    sequences_[s].reset();
    clear_plan(plans_[s]);
    --active_;
  }

  /// @brief Holds the frame metadata of sequence s in `table` (Policy::share_frames, e.g.
  /// tiered_cache::share_frames) instead of per cell, shared with every other cache of the
  /// sequence attached to the same table: an engine with one batch per (layer, KV head) gives
  /// slot s of each batch sequence s's table. The table lives as long as a cache holds it;
  /// remove_sequence() releases the sequence's rows, and a sequence added to the slot later
  /// holds its metadata itself until attached. Allocates (admission, not a step).
  /// @throws audiokv::error naming "s" unless s is an active sequence; nothing changes then.
  void share_frames(std::int32_t s, std::shared_ptr<frame_table> table) {
    AUDIOKV_REQUIRE(
        s >= 0 && s < size() && sequences_[s].has_value(), "sequence_batch::share_frames", "s", s,
        ::audiokv::detail::describe("must be an active sequence of [0, size()) = [0, ", size(), ")")
            .c_str());
    sequences_[s]->share_frames(std::move(table));
  }

  /// Slots, active or free (indices run over [0, size())).
  std::int32_t size() const noexcept { return static_cast<std::int32_t>(sequences_.size()); }
  /// Active sequences.
  std::int32_t num_active() const noexcept { return active_; }
  /// True when slot s holds a sequence.
  bool active(std::int32_t s) const noexcept {
    return s >= 0 && s < size() && sequences_[s].has_value();
  }
  /// Sequence s (precondition: active(s)).
  Policy& operator[](std::int32_t s) { return *sequences_[s]; }
  /// Sequence s, read-only (precondition: active(s)).
  const Policy& operator[](std::int32_t s) const { return *sequences_[s]; }
  /// The plan made for sequence s by the last plan_all().
  const eviction_plan& plan(std::int32_t s) const { return plans_[s]; }

  /// Scores of sequence s are scores[indptr[s] .. indptr[s + 1]), one per cached cell (none for
  /// a free slot). The
  /// lengths are checked before anything is read: indptr.size() == size() + 1 and
  /// scores.size() == indptr[size()] (the offsets themselves are checked against each
  /// sequence's num_cells() first).
  /// @throws audiokv::error naming "indptr.size()", "indptr[s]", "scores.size()" or
  ///         "scores[j]"; no sequence changes.
  void observe(span<const float> scores, span<const std::int64_t> indptr) {
    constexpr const char* where = "sequence_batch::observe";
    AUDIOKV_REQUIRE(indptr.size() == static_cast<std::size_t>(size()) + 1, where, "indptr.size()",
                    indptr.size(),
                    ::audiokv::detail::describe("must equal size() + 1 = ", size() + 1).c_str());
    check_offsets(where, indptr.data());
    AUDIOKV_REQUIRE(
        static_cast<std::int64_t>(scores.size()) == indptr[size()], where, "scores.size()",
        scores.size(),
        ::audiokv::detail::describe("must equal indptr[size()] = ", indptr[size()]).c_str());
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
        AUDIOKV_REQUIRE(core::is_valid_attention(scores[j]), where,
                        ::audiokv::detail::indexed("scores", j), scores[j],
                        "must be finite and >= 0");
      }
    }
    for (std::int32_t s = 0; s < size(); ++s) {
      if (sequences_[s]) sequences_[s]->observe(scores + indptr[s], sequences_[s]->num_cells());
    }
  }

  /// Plans every sequence whose trigger fires (the others, and free slots, get empty plans);
  /// returns how many plans evict something.
  std::int32_t plan_all() {
    std::int32_t evicting = 0;
    for (std::int32_t s = 0; s < size(); ++s) {
      if (!sequences_[s]) {
        clear_plan(plans_[s]);
        continue;
      }
      sequences_[s]->plan(plans_[s]);
      evicting += plans_[s].evict.empty() ? 0 : 1;
    }
    return evicting;
  }

  /// Applies the plans of the last plan_all() (the engine has moved its K/V by then); free
  /// slots are skipped.
  void apply_all() {
    for (std::int32_t s = 0; s < size(); ++s)
      if (sequences_[s]) sequences_[s]->apply(plans_[s]);
  }

 private:
  /// An empty plan (its reserved memory kept).
  static void clear_plan(eviction_plan& p) {
    p.evict.clear();
    p.move_to.clear();
    p.promote.clear();
    p.demote.clear();
    p.scores.clear();
    p.n_kv_before = 0;
    p.n_kv_after = 0;
    p.generation = 0;
    p.cache_id = 0;
  }

  /// indptr[0] == 0 and each sequence's length indptr[s + 1] - indptr[s] == its num_cells()
  /// (0 for a free slot).
  void check_offsets(const char* where, const std::int64_t* indptr) const {
    AUDIOKV_REQUIRE(indptr[0] == 0, where, "indptr[0]", indptr[0], "must be 0");
    for (std::int32_t s = 0; s < size(); ++s) {
      const std::int64_t length = indptr[s + 1] - indptr[s];
      const std::int32_t cells = sequences_[s] ? sequences_[s]->num_cells() : 0;
      AUDIOKV_REQUIRE(length == cells, where, ::audiokv::detail::indexed("indptr", s + 1),
                      indptr[s + 1],
                      ::audiokv::detail::describe("must make sequence ", s, "'s length (", length,
                                                  ") equal its num_cells() = ", cells,
                                                  sequences_[s] ? "" : " (a free slot)")
                          .c_str());
    }
  }

  std::vector<std::optional<Policy>> sequences_;  // [size()] empty = free slot
  std::vector<eviction_plan> plans_;              // [size()] reserved, reused with the slot
  std::int32_t active_ = 0;
};

}  // namespace audiokv::pool

namespace audiokv {
using pool::sequence_batch;
}  // namespace audiokv
