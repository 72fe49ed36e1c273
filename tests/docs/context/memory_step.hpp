// SPDX-License-Identifier: Apache-2.0
// What the engine has in scope where docs/integration.md's K/V store snippet (`memory_step`)
// runs: the README snippet's cache and plan, and the step's rows and buffers (declared, never
// defined: docs.snippets only compiles the snippet).
#pragma once

#include <audiokv/audiokv.hpp>

namespace audiokv_snippet_context::memory_step {
extern audiokv::tiered_cache<> cache;  // the (layer, KV head)'s cache, as in the README
extern audiokv::eviction_plan plan;    // reserved for cache.capacity()
extern const float* k_row;             // the step's new K row, [head_dim]
extern const float* v_row;             // the step's new V row, [head_dim]
extern const float* q;                 // the step's query, [head_dim]
extern float* out;                     // attention output, [head_dim]
extern float* probs;                   // per-cell probabilities, [cell_capacity]
}  // namespace audiokv_snippet_context::memory_step
