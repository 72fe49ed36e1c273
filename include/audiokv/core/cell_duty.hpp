// SPDX-License-Identifier: Apache-2.0
/// @file
/// What a rewrite of a plan (pool/page_granular.hpp: pages; pool/layer_plan.hpp: one keep-set
/// for a layer's heads) owes a cell, from the plan that made it and the cache's protection
/// (tiered_cache::is_protected). One rule for both rewrites:
///  - *due*: protected and evicted by the plan. The plan's own rules licensed it: the emergency
///    pool's overflow (oldest first, F20) or a boundary protection released because the target
///    could not be met otherwise (plan.protections_released). A rewrite always evicts it, so
///    the emergency pool stays at its nominal size;
///  - *locked*: protected and kept by the plan. A rewrite never evicts it;
///  - *free*: unprotected. A rewrite may evict it or keep it.
/// Several plans judging one cell (the heads of a layer, each with its own plan and
/// protection) give it the highest of their duties in the order free < due < locked
/// (merge_duty): a cell locked by any plan stays, one due in some plan and locked in none goes.
#pragma once

#include <cstdint>

#include "../config.hpp"

namespace audiokv::core {

/// A cell's duty in a plan rewrite, ordered free < due < locked (merge_duty takes the highest).
enum class cell_duty : std::uint8_t {
  free = 0,    ///< unprotected: the rewrite may evict it or keep it
  due = 1,     ///< protected and evicted by its plan: the rewrite evicts it
  locked = 2,  ///< protected and kept by its plan: the rewrite keeps it
};

/// Duty of a cell that is `is_protected` (e.g. tiered_cache::is_protected) and that its plan
/// evicts (`evicted`, move_to == evicted_slot) or keeps.
AUDIOKV_HOST_DEVICE constexpr cell_duty duty_of(bool is_protected, bool evicted) {
  return !is_protected ? cell_duty::free : evicted ? cell_duty::due : cell_duty::locked;
}

/// Duty of a cell judged by two plans (two heads of a layer): the higher one, so a cell locked
/// in either stays and one due in either and locked in neither goes.
AUDIOKV_HOST_DEVICE constexpr cell_duty merge_duty(cell_duty a, cell_duty b) {
  return static_cast<std::uint8_t>(a) >= static_cast<std::uint8_t>(b) ? a : b;
}

}  // namespace audiokv::core
