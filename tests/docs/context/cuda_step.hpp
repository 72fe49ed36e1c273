// SPDX-License-Identifier: Apache-2.0
// What the engine has in scope where docs/cuda.md's device snippet (`cuda_step`) runs (declared,
// never defined: docs.snippets only compiles the snippet).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace audiokv_snippet_context::cuda_step {
extern cudaStream_t stream;            // the engine's decode stream
extern const float* probs;             // device, [rows x group, probs_row_stride]
extern std::int64_t probs_row_stride;  // floats between rows of probs (>= capacity)
extern void* k;                        // device K, [rows x capacity x head_dim]
extern void* v;                        // device V, same shape
}  // namespace audiokv_snippet_context::cuda_step
