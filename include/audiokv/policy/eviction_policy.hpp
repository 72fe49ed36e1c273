// SPDX-License-Identifier: Apache-2.0
/// @file
/// The interface every eviction policy implements (AudioKV and the baselines), so engines,
/// the benchmark suite and the ASR example can swap policies at run time. One object manages
/// one (sequence, layer, KV head) cache; cells are kept in time order in slots [0, num_cells()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../span.hpp"
#include "../types/eviction_plan.hpp"
#include "../types/frame.hpp"
#include "../types/pool_split.hpp"

namespace audiokv::policy {

/// @brief One decode step's calls: append new frames, observe attention, and when
/// wants_eviction() is true, plan() then apply() (the engine applies the same plan to its K/V).
///
/// Every method validates its arguments first and throws audiokv::error naming the bad one; a
/// call that throws leaves the policy unchanged. Buffers: each entry point that reads a
/// caller's buffer takes its length with it, either as a span (checked: the length must match
/// before anything is read) or as (pointer, count) where the count is the length (append,
/// observe); std::vector and arrays convert to the span forms.
///
/// Plans: plan(), plan_to() and plan_evicting() are const and write only into `out`; apply()
/// accepts only a
/// plan made by this object (eviction_plan::cache_id == id()) for its current state
/// (eviction_plan::generation).
///
/// Threads: mutating calls (append, observe, apply, reserve) need exclusive access. For
/// tiered_cache every const call is read-only, so any number of threads may plan (each into
/// its own eviction_plan) and read (num_cells, positions, tiers, is_protected, ...) at once.
/// The baseline policies keep planning scratch in the object: at most one thread may run
/// plan()/plan_to() on one baseline object at a time. Distinct objects are independent.
class eviction_policy {
 public:
  virtual ~eviction_policy() = default;

  /// Short stable name ("audiokv", "h2o", ...), used as the benchmark key.
  virtual const char* name() const noexcept = 0;

  /// Appends `count` frames at slots [num_cells(), num_cells() + count).
  /// @param frames [count] frames; `count` is the length read.
  /// @throws audiokv::error on a non-increasing position, bad metadata or exceeded capacity.
  virtual void append(const frame_meta* frames, std::int32_t count) = 0;

  /// append() of every frame in `frames` (its length is the count).
  /// @throws audiokv::error naming "frames.size()" when it exceeds INT32_MAX, else as append().
  void append(span<const frame_meta> frames) {
    AUDIOKV_REQUIRE(frames.size() <= static_cast<std::size_t>(INT32_MAX),
                    (std::string(name()) + "::append").c_str(), "frames.size()", frames.size(),
                    "must be <= INT32_MAX");
    append(frames.data(), static_cast<std::int32_t>(frames.size()));
  }

  /// One decode step's attention probabilities over the cached cells, in slot order.
  /// @param attention [num_cells] finite, >= 0; `num_cells` is the length read and must equal
  ///        num_cells() (checked before any element is read).
  virtual void observe(const float* attention, std::int32_t num_cells) = 0;

  /// observe() of one row whose length is checked: attention.size() must equal num_cells().
  /// @throws audiokv::error naming "attention.size()" (with the expected length), else as
  ///         observe().
  void observe(span<const float> attention) {
    AUDIOKV_REQUIRE(
        attention.size() == static_cast<std::size_t>(num_cells()),
        (std::string(name()) + "::observe").c_str(), "attention.size()", attention.size(),
        ::audiokv::detail::describe("must equal the number of cached cells (", num_cells(), ")")
            .c_str());
    observe(attention.data(), num_cells());
  }

  /// True when the policy's trigger fires (e.g. utilisation reached 90% of the budget).
  virtual bool wants_eviction() const noexcept = 0;

  /// The eviction the trigger asks for; an empty plan when it does not fire.
  virtual void plan(eviction_plan& out) const = 0;

  /// An eviction down to min(num_cells(), target_cells) cells (one-shot compression), or as
  /// far as the policy's hard protections allow: the baselines always reach the target (their
  /// windows shrink to it); tiered_cache stops at its protected_cells(). The plan's n_kv_after
  /// says where it ends. Throws for a negative target, and where a policy documents it (knorm
  /// without the key norms of a cell).
  virtual void plan_to(std::int32_t target_cells, eviction_plan& out) const = 0;

  /// The plan that evicts exactly the cells marked in `evict_mask` (nonzero = evict), for an
  /// eviction chosen outside the policy: the engine's own selection, or a wrapper that decides
  /// the keep set from this policy's scores. apply() of it makes the policy follow the engine's
  /// memory. No protection applies: the engine has already dropped (or is dropping) the cells.
  /// Const like plan(): writes only into `out`.
  /// @throws audiokv::error naming "evict_mask.size()" unless it equals num_cells().
  virtual void plan_evicting(span<const std::uint8_t> evict_mask, eviction_plan& out) const = 0;

  /// Commits a plan made by this object for its current state.
  /// @throws audiokv::error naming "plan.cache_id" for another cache's plan (both ids in the
  ///         message), "plan.generation" for a stale one, or the malformed field.
  virtual void apply(const eviction_plan& plan) = 0;

  /// Cells currently cached (the K/V rows the engine must hold for this head).
  virtual std::int32_t num_cells() const noexcept = 0;
  /// Target number of cells (the budget B).
  virtual std::int32_t budget() const noexcept = 0;
  /// Physical slots reserved; append() beyond it throws.
  virtual std::int32_t capacity() const noexcept = 0;
  /// [num_cells()] logical positions of the cached cells, ascending.
  virtual const std::int32_t* positions() const noexcept = 0;

  /// [num_cells()] pool of each cell, or null for a policy with a single pool. A K/V
  /// store with an int8 buffer arena keeps a cell's row in full precision only outside
  /// the buffer pool.
  virtual const pool_tier* tiers() const noexcept { return nullptr; }

  /// The process-wide unique id stamped on this policy's plans (eviction_plan::cache_id). A
  /// copy of a policy is another cache with a new id; a move keeps it.
  virtual std::uint64_t id() const noexcept = 0;
};

}  // namespace audiokv::policy

namespace audiokv {
using policy::eviction_policy;
}  // namespace audiokv
