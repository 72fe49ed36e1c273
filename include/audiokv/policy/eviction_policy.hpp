// SPDX-License-Identifier: Apache-2.0
/// @file
/// The interface every eviction policy implements (AudioKV and the baselines), so engines,
/// the benchmark suite and the ASR example can swap policies at run time. One object manages
/// one (sequence, layer, KV head) cache; cells are kept in time order in slots [0, num_cells()).
#pragma once

#include <cstdint>

#include "../pool/eviction_plan.hpp"
#include "../pool/frame.hpp"
#include "../pool/pool_split.hpp"

namespace audiokv {

/// @brief One decode step's calls: append new frames, observe attention, and when
/// wants_eviction() is true, plan() then apply() (the engine applies the same plan to its K/V).
///
/// Every method validates its arguments first and throws audiokv::error naming the bad one; a
/// call that throws leaves the policy unchanged. plan() and plan_to() are const: they only
/// compute. Not thread-safe per object; distinct objects are independent.
class eviction_policy {
 public:
  virtual ~eviction_policy() = default;

  /// Short stable name ("audiokv", "h2o", ...), used as the benchmark key.
  virtual const char* name() const noexcept = 0;

  /// Appends `count` frames at slots [num_cells(), num_cells() + count).
  /// @throws audiokv::error on a non-increasing position, bad metadata or exceeded capacity.
  virtual void append(const frame_meta* frames, std::int32_t count) = 0;

  /// One decode step's attention probabilities over the cached cells, in slot order.
  /// @param attention [num_cells] finite, >= 0.
  virtual void observe(const float* attention, std::int32_t num_cells) = 0;

  /// True when the policy's trigger fires (e.g. utilisation reached 90% of the budget).
  virtual bool wants_eviction() const noexcept = 0;

  /// The eviction the trigger asks for; an empty plan when it does not fire.
  virtual void plan(eviction_plan& out) const = 0;

  /// An eviction down to exactly min(num_cells(), target_cells) cells (one-shot compression).
  virtual void plan_to(std::int32_t target_cells, eviction_plan& out) const = 0;

  /// Commits a plan made by this object for its current state.
  virtual void apply(const eviction_plan& plan) = 0;

  virtual std::int32_t num_cells() const noexcept = 0;
  /// Target number of cells (the budget B).
  virtual std::int32_t budget() const noexcept = 0;
  /// Physical slots reserved; append() beyond it throws.
  virtual std::int32_t capacity() const noexcept = 0;
  /// [num_cells()] logical positions of the cached cells, ascending.
  virtual const std::int32_t* positions() const noexcept = 0;

  /// [num_cells()] pool of each cell (F1), or null for a policy with a single pool. A K/V
  /// store with an int8 buffer arena (F12) keeps a cell's row in full precision only outside
  /// the buffer pool.
  virtual const pool_tier* tiers() const noexcept { return nullptr; }
};

}  // namespace audiokv
