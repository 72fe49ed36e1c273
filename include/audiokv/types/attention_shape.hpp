// SPDX-License-Identifier: Apache-2.0
/// @file
/// The shape of one decode-attention step, shared by the CPU (cpu::decode_attention) and CUDA
/// (cuda::decode_attention) backends.
#pragma once

#include <cstdint>

#include "../error.hpp"

namespace audiokv::types {

/// @brief Shape of one decode-attention step of one layer and one sequence: query heads, KV
/// heads (GQA: num_q_heads is a multiple of num_kv_heads and query head h reads KV head
/// h / group_size()), head dimension and cells. Plain data; thread-safe to read.
struct attention_shape {
  std::int32_t num_q_heads = 0;   ///< query heads
  std::int32_t num_kv_heads = 0;  ///< KV heads (>= 1)
  std::int32_t head_dim = 0;      ///< elements per row (the CUDA kernels support 64 and 128)
  /// Cells of the step; on the device, the capacity that fixes the grid and the probs stride.
  std::int32_t num_cells = 0;

  /// Query heads per KV head. Requires num_kv_heads >= 1.
  std::int32_t group_size() const { return num_q_heads / num_kv_heads; }

  /// Checks the shape; never allocates unless it throws.
  /// @throws audiokv::error naming `shape.<field>` for the first invalid field.
  void validate(const char* where) const {
    AUDIOKV_REQUIRE(num_kv_heads >= 1, where, "shape.num_kv_heads", num_kv_heads, "must be >= 1");
    AUDIOKV_REQUIRE(num_q_heads >= num_kv_heads && num_q_heads % num_kv_heads == 0, where,
                    "shape.num_q_heads", num_q_heads, "must be a multiple of num_kv_heads");
    AUDIOKV_REQUIRE(head_dim >= 1, where, "shape.head_dim", head_dim, "must be >= 1");
    AUDIOKV_REQUIRE(num_cells >= 0, where, "shape.num_cells", num_cells, "must be >= 0");
  }
};

}  // namespace audiokv::types

namespace audiokv {
using types::attention_shape;
}  // namespace audiokv
