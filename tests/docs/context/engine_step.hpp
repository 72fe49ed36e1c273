// SPDX-License-Identifier: Apache-2.0
// What the engine has in scope where the README's engine snippet (`engine_step`) runs: declared,
// never defined, since docs.snippets only compiles the snippet. Only the headers these
// declarations need are included, so the snippet's own #include must bring in the rest.
#pragma once

#include <audiokv/core/kv_layout.hpp>
#include <audiokv/core/kv_view.hpp>
#include <cstdint>

namespace audiokv_snippet_context::engine_step {
extern std::int32_t step;        // the decode step: the new frame's position
extern float vad;                // the host's voice activity for the frame, in [0, 1]
extern const float* probs;       // the step's attention, [group_size, num_cells]
extern std::int32_t group_size;  // query heads of the KV head's GQA group
extern std::int32_t head;        // the KV head's index in the K/V tensors
extern audiokv::kv_view<float, audiokv::layout_hnd> k_view;  // the layer's K rows
extern audiokv::kv_view<float, audiokv::layout_hnd> v_view;  // the layer's V rows
}  // namespace audiokv_snippet_context::engine_step
