// SPDX-License-Identifier: Apache-2.0
// What the engine has in scope where docs/integration.md's head-budget snippet (`head_budgets`)
// runs: one layer's configuration, plans and attention rows (declared, never defined:
// docs.snippets only compiles the snippet).
#pragma once

#include <audiokv/audiokv.hpp>
#include <cstdint>

namespace audiokv_snippet_context::head_budgets {
extern audiokv::audiokv_config config;   // every head's configuration
extern std::int32_t num_heads;           // KV heads of the layer
extern std::int32_t target_per_head;     // T: the layer keeps num_heads * T cells
extern audiokv::eviction_plan plans[8];  // one plan per head, reserved for its capacity
extern const float* probs[8];            // the step's attention of each head, [num_cells]
extern bool observing;                   // the steps before the one-shot compression
extern bool compress_now;                // the step of the one-shot compression
}  // namespace audiokv_snippet_context::head_budgets
