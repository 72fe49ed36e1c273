// SPDX-License-Identifier: Apache-2.0
/// @file
/// Shared machinery of the baseline streaming policies: configuration, argument validation,
/// the budget trigger and plan/apply on policy::detail::cell_store. A derived policy only scores
/// cells and marks which ones to evict.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "../../core/gqa.hpp"
#include "../../core/selection.hpp"
#include "../../error.hpp"
#include "../../span.hpp"
#include "../../types/cache_limits.hpp"
#include "../../types/eviction_plan.hpp"
#include "../../types/frame.hpp"
#include "../detail/cell_store.hpp"
#include "../detail/mark_lowest.hpp"
#include "../eviction_policy.hpp"

namespace audiokv::policy::baselines {

/// @brief Budget and storage of one baseline-managed (sequence, layer, KV head) cache.
struct baseline_config {
  /// B: the cache is evicted back to B cells whenever it holds more (the official rule of H2O,
  /// TOVA and StreamingLLM: append, attend, then drop); in [1, max_cache_cells].
  std::int32_t budget = 0;
  /// Physical slots (>= budget, at most max_cache_cells); 0 means budget + 1, room for one
  /// decode step's new token.
  std::int32_t capacity = 0;
  /// Frame speaker ids must lie in [0, num_speakers) (validated, not used for scoring).
  std::int32_t num_speakers = 1;

  /// The slots to allocate: capacity, or budget + 1 when capacity is 0.
  std::int32_t reserved_capacity() const { return capacity > 0 ? capacity : budget + 1; }

  /// Throws audiokv::error naming the first invalid field.
  void validate(const char* where) const {
    types::detail::require_cell_count(where, "config.budget", budget, 1);
    types::detail::require_cell_count(where, "config.capacity", capacity, 0);
    AUDIOKV_REQUIRE(capacity == 0 || capacity >= budget, where, "config.capacity", capacity,
                    "must be 0 or >= budget");
    AUDIOKV_REQUIRE(num_speakers >= 1, where, "config.num_speakers", num_speakers, "must be >= 1");
  }
};

/// @brief Base of every baseline policy. Validation happens before any state changes, so a
/// call that throws leaves the policy unchanged; plan() and plan_to() only compute.
///
/// Derived classes implement select_evictions() (mark cells in the evict mask) and, when they
/// keep per-cell state, on_append()/on_observe()/on_apply(). Memory is sized from the capacity
/// at construction; append/observe/apply never allocate, plan() allocates only into `out`.
/// Threads: select_evictions() may use scratch kept in the policy, so at most one thread may
/// plan on one object at a time (see eviction_policy).
class baseline_policy : public eviction_policy {
 public:
  // The span forms of append() and observe() (checked lengths) come from eviction_policy.
  using eviction_policy::append;
  using eviction_policy::observe;

  /// Unique id stamped on this policy's plans; a copy of the policy gets a new one.
  std::uint64_t id() const noexcept override { return store_.id(); }

  /// Appends `count` frames (`frames` points to count of them); see eviction_policy::append.
  void append(const frame_meta* frames, std::int32_t count) final {
    check_append(frames, count);
    const std::int32_t first = store_.size();
    store_.append(frames, count, [](const frame_meta&) { return pool_tier::buffer; });
    on_append(first, count);
  }

  /// One step's attention over the cached cells; `num_cells` is the length read and must equal
  /// num_cells() (checked first).
  void observe(const float* attention, std::int32_t num_cells) final {
    check_group_size(1);
    store_.validate_scores(sites_.observe, attention, num_cells);
    on_observe_rows(attention, 1, gqa_reduce::mean);
    ++steps_;
  }

  /// GQA: the attention of G query heads, [group_size, num_cells] row-major. Policies that
  /// reduce first (H2O, LRU, TOVA, ...) combine rows per cell by `mode`; SnapKV keeps the rows
  /// apart (it pools before the group mean, as kvpress does). TOVA passes all query heads of
  /// the layer here. Never allocates.
  ///
  /// Checks, in order and before reading any score: group_size >= 1 (and equal to the
  /// policy's required group size, if any), num_cells == num_cells(), attention.size() ==
  /// group_size * num_cells; then each score ("attention[row][cell]" names a bad one).
  void observe_group(span<const float> attention, std::int32_t group_size, std::int32_t num_cells,
                     gqa_reduce mode = gqa_reduce::mean) {
    AUDIOKV_REQUIRE(group_size >= 1, sites_.observe, "group_size", group_size, "must be >= 1");
    check_group_size(group_size);
    store_.validate_group(sites_.observe, attention, group_size, num_cells);
    on_observe_rows(attention.data(), group_size, mode);
    ++steps_;
  }

  /// The unchecked-length form: reads exactly group_size * num_cells floats from `attention`,
  /// which the caller guarantees it holds. Prefer the span form (std::vector converts to it).
  void observe_group(const float* attention, std::int32_t group_size, std::int32_t num_cells,
                     gqa_reduce mode = gqa_reduce::mean) {
    observe_group(policy::detail::group_rows(attention, group_size, num_cells), group_size,
                  num_cells, mode);
  }

  bool wants_eviction() const noexcept override { return store_.size() > budget_; }

  void plan(eviction_plan& out) const final {
    if (!wants_eviction()) {
      store_.build_empty_plan(out);
      return;
    }
    plan_down_to(budget_, out);
  }

  void plan_to(std::int32_t target_cells, eviction_plan& out) const final {
    AUDIOKV_REQUIRE(target_cells >= 0, sites_.plan, "target_cells", target_cells, "must be >= 0");
    if (target_cells >= store_.size()) {
      store_.build_empty_plan(out);
      return;
    }
    plan_down_to(target_cells, out);
  }

  /// Builds a plan that evicts exactly the cells marked in `evict_mask` (1 = evict), for hosts
  /// or group planners (adakv_group) that select cells themselves.
  /// @throws audiokv::error naming "evict_mask.size()" unless it equals num_cells().
  void plan_evicting(span<const std::uint8_t> evict_mask, eviction_plan& out) const final {
    AUDIOKV_REQUIRE(
        evict_mask.size() == static_cast<std::size_t>(store_.size()), sites_.plan,
        "evict_mask.size()", evict_mask.size(),
        ::audiokv::detail::describe("must equal num_cells() = ", store_.size()).c_str());
    std::uint8_t* mask = store_.clear_evict_mask(out);
    for (std::int32_t j = 0; j < store_.size(); ++j) mask[j] = evict_mask[j] != 0;
    finish_plan(out);
  }

  /// The unchecked-length form: reads num_cells() flags from `evict_mask`.
  void plan_evicting(const std::uint8_t* evict_mask, eviction_plan& out) const {
    AUDIOKV_REQUIRE(store_.size() == 0 || evict_mask != nullptr, sites_.plan, "evict_mask",
                    "nullptr", "must point to num_cells() flags");
    plan_evicting(span<const std::uint8_t>(evict_mask, static_cast<std::size_t>(store_.size())),
                  out);
  }

  /// Throws exactly as append() would, without appending.
  void check_append(const frame_meta* frames, std::int32_t count) const {
    store_.validate_append(sites_.append, frames, count);
    validate_append_extra(frames, count);
  }

  /// Throws exactly as apply() would, without applying.
  void check_plan(const eviction_plan& plan) const { store_.validate_plan(sites_.apply, plan); }

  void apply(const eviction_plan& plan) final {
    store_.validate_plan(sites_.apply, plan);
    on_apply(plan);
    store_.apply(plan);
    cells_evicted_ += static_cast<std::int64_t>(plan.evict.size());
  }

  std::int32_t num_cells() const noexcept override { return store_.size(); }
  std::int32_t budget() const noexcept override { return budget_; }
  std::int32_t capacity() const noexcept override { return store_.capacity(); }
  const std::int32_t* positions() const noexcept override { return store_.pos(); }

  /// Identifies the cell set; changes on every append and apply.
  std::uint64_t generation() const noexcept { return store_.generation(); }
  /// observe()/observe_group() calls so far.
  std::int64_t steps() const noexcept { return steps_; }
  /// Cells evicted by applied plans so far.
  std::int64_t cells_evicted() const noexcept { return cells_evicted_; }
  /// [num_cells()] frame flags of the cached cells.
  const std::uint8_t* flags() const noexcept { return store_.flags(); }

 protected:
  /// Validates `config` and allocates the cell store; `policy_name` prefixes error locations.
  /// @throws audiokv::error naming the first invalid field of `config`.
  baseline_policy(const char* policy_name, const baseline_config& config)
      : sites_(policy_name),
        store_((config.validate(policy_name), config.reserved_capacity()), config.num_speakers),
        budget_(config.budget) {}

  /// A copy is another cache with the same cells and history (and a new id()).
  baseline_policy(const baseline_policy&) = default;
  /// Copy assignment (a new id()).
  baseline_policy& operator=(const baseline_policy&) = default;
  /// Moves the policy (cells, history and id()). The moved-from policy is valid and empty, as
  /// tiered_cache's: no cells, capacity() 0, a new id(), zero counters, the same name, budget
  /// and configuration; readers report zero cells, observe() takes 0 cells, plan() and
  /// plan_to() give empty plans, and append() of any frame is rejected. A derived policy's own
  /// per-cell arrays move with it (empty, for capacity 0).
  baseline_policy(baseline_policy&& other) noexcept
      : sites_(other.sites_),
        store_(std::move(other.store_)),
        budget_(other.budget_),
        steps_(std::exchange(other.steps_, 0)),
        cells_evicted_(std::exchange(other.cells_evicted_, 0)) {}
  /// Move assignment, with the moved-from state of the move constructor.
  baseline_policy& operator=(baseline_policy&& other) noexcept {
    if (this != &other) {
      sites_ = other.sites_;
      store_ = std::move(other.store_);
      budget_ = other.budget_;
      steps_ = std::exchange(other.steps_, 0);
      cells_evicted_ = std::exchange(other.cells_evicted_, 0);
    }
    return *this;
  }
  ~baseline_policy() override = default;

  /// Extra checks of an append (after the common ones); must not change state.
  virtual void validate_append_extra(const frame_meta*, std::int32_t) const {}
  /// Required group size of observe_group (observe() counts as 1); 0 accepts any.
  virtual std::int32_t required_group_size() const noexcept { return 0; }
  /// Cells [first, first + count) were appended.
  virtual void on_append(std::int32_t, std::int32_t) {}
  /// Validated rows [rows, num_cells()] of one step (rows == 1 for observe()).
  virtual void on_observe_rows(const float* attention, std::int32_t rows, gqa_reduce mode) = 0;
  /// Marks exactly num_cells() - target cells in `mask`; throws audiokv::error if the policy
  /// cannot go that low (e.g. below its sinks). target < num_cells().
  virtual void select_evictions(std::int32_t target, std::uint8_t* mask) const = 0;
  /// Compacts per-cell state by a validated plan, before the metadata. Must not throw.
  virtual void on_apply(const eviction_plan&) {}

  /// The cached cells' metadata, for the derived policy's selection.
  const policy::detail::cell_store& store() const noexcept { return store_; }
  /// Error location of plan() ("<name>::plan").
  const char* where_plan() const noexcept { return sites_.plan; }
  /// Changes the budget (adakv's per-head share); the caller keeps it valid.
  void set_budget(std::int32_t budget) noexcept { budget_ = budget; }

  /// Reduces `rows` rows of attention to one score per cell into `out` [num_cells()].
  void reduce_rows(const float* attention, std::int32_t rows, gqa_reduce mode, float* out) const {
    const std::int32_t n = store_.size();
    if (rows == 1) {
      for (std::int32_t j = 0; j < n; ++j) out[j] = attention[j];
      return;
    }
    for (std::int32_t j = 0; j < n; ++j) out[j] = core::reduce_group(attention, rows, n, j, mode);
  }

  /// Marks the `count` lowest (score, position) cells among order[0..size) in `mask`: a
  /// partition (std::nth_element) in the core::evicts_before order. Returns the count marked.
  std::int32_t evict_lowest_by_partition(const float* score, std::int32_t* order, std::int32_t size,
                                         std::int32_t count, std::uint8_t* mask) const {
    return policy::detail::mark_lowest(score, store_.pos(), order, size, count, mask);
  }

 private:
  void check_group_size(std::int32_t rows) const {
    const std::int32_t required = required_group_size();
    AUDIOKV_REQUIRE(required == 0 || rows == required, sites_.observe, "group_size", rows,
                    ::audiokv::detail::describe("must equal config.group_size = ", required,
                                                " (use observe_group for GQA rows)")
                        .c_str());
  }

  void plan_down_to(std::int32_t target, eviction_plan& out) const {
    std::uint8_t* mask = store_.clear_evict_mask(out);
    select_evictions(target, mask);
    finish_plan(out);
  }

  void finish_plan(eviction_plan& out) const {
    store_.build_plan(out);
    out.scores.clear();
    out.ratio = 0.0f;
    out.normalized_entropy = 1.0f;
    out.protections_released = 0;
  }

  /// The error locations "<policy>::append", ... in fixed arrays: a copy or a move keeps them
  /// without allocating.
  struct call_sites {
    char append[64], observe[64], plan[64], apply[64];
    explicit call_sites(const char* policy) noexcept {
      std::snprintf(append, sizeof append, "%s::append", policy);
      std::snprintf(observe, sizeof observe, "%s::observe", policy);
      std::snprintf(plan, sizeof plan, "%s::plan", policy);
      std::snprintf(apply, sizeof apply, "%s::apply", policy);
    }
  };

  call_sites sites_;
  policy::detail::cell_store store_;
  std::int32_t budget_;
  std::int64_t steps_ = 0;
  std::int64_t cells_evicted_ = 0;
};

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::baseline_config;
using policy::baselines::baseline_policy;
}  // namespace audiokv
