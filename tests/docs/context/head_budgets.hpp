// SPDX-License-Identifier: Apache-2.0
// What the engine has in scope where docs/integration.md's head-budget snippet (`head_budgets`)
// runs: one layer's caches, plans and attention rows (declared, never defined: docs.snippets
// only compiles the snippet).
#pragma once

#include <audiokv/audiokv.hpp>
#include <cstdint>

namespace audiokv_snippet_context::head_budgets {
extern std::int32_t num_heads;              // KV heads of the layer
extern audiokv::tiered_cache<>* caches[8];  // the layer's caches, one per KV head
extern audiokv::eviction_plan plans[8];     // one plan per head, reserved for its capacity
extern const float* probs[8];               // the step's attention of each head, [num_cells]
extern bool observing;                      // the steps before the one-shot compression
extern bool compress_now;                   // the step of the one-shot compression
}  // namespace audiokv_snippet_context::head_budgets
