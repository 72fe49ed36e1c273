// SPDX-License-Identifier: Apache-2.0
/// @file
/// The reference cost every CPU benchmark is compared with: one Eigen decode-attention step
/// (q.K^T, softmax, .V, and the per-cell probabilities) over float K/V in [heads, cells, dim]
/// layout, one query head per KV head, with normally distributed inputs (seed 1).
#pragma once

#include <audiokv/eigen.hpp>
#include <cstdint>
#include <random>
#include <vector>

namespace audiokv::bench {

/// @brief K, V, q and the outputs of one step, allocated once; run() is the timed work.
class attention_step {
 public:
  attention_step(std::int32_t cells, std::int32_t kv_heads, std::int32_t head_dim)
      : cells_(cells),
        heads_(kv_heads),
        dim_(head_dim),
        k_(static_cast<std::size_t>(kv_heads) * cells * head_dim),
        v_(k_.size()),
        q_(static_cast<std::size_t>(kv_heads) * head_dim),
        out_(q_.size()),
        probs_(static_cast<std::size_t>(kv_heads) * cells) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (auto& x : k_) x = normal(rng);
    for (auto& x : v_) x = normal(rng);
    for (auto& x : q_) x = normal(rng);
  }

  /// One decode step; returns the output so the caller can keep the optimiser from dropping it.
  const float* run() {
    const layout_hnd layout{{cells_, heads_, dim_}};
    const kv_view<const float, layout_hnd> keys(k_.data(), layout), values(v_.data(), layout);
    cpu::decode_attention(q_.data(), keys, values, {heads_, heads_, dim_, cells_}, out_.data(),
                          probs_.data());
    return out_.data();
  }

 private:
  std::int32_t cells_, heads_, dim_;
  std::vector<float> k_, v_, q_, out_, probs_;
};

}  // namespace audiokv::bench
