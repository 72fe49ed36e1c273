// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "asr_error.hpp"
#include "kv_eviction_hook.hpp"
#include "tensor_ops.hpp"

namespace asr {

/// @brief Decoder cross-attention KV over audio frames, per (layer, head).
///
/// Storage per layer: K and V as [heads, capacity, head_dim] contiguous floats, so each head's
/// kept rows are one dense block. Each (layer, head) has its own occupancy n_kv and the original
/// frame index of every kept row, so different heads can keep different frames.
/// Invariants: 0 <= n_kv <= capacity; pos[0..n_kv) strictly increasing.
class cross_kv_cache {
 public:
  /// Copies frames [0, n_frames) of every layer's K/V ([n_audio_ctx, d], head h in columns
  /// h*head_dim..) into the per-head layout; all heads start with n_kv = n_frames.
  void load(const std::vector<mat_rm>& k, const std::vector<mat_rm>& v, int n_heads, int n_frames) {
    n_layers_ = static_cast<int>(k.size());
    n_heads_ = n_heads;
    if (n_layers_ == 0 || v.size() != k.size() || n_heads <= 0) {
      throw asr_error("cross_kv_cache: empty or mismatched K/V");
    }
    const int d = static_cast<int>(k[0].cols());
    head_dim_ = d / n_heads;
    if (n_frames <= 0 || n_frames > k[0].rows()) {
      throw asr_error("cross_kv_cache: n_frames " + std::to_string(n_frames) + " outside [1, " +
                      std::to_string(k[0].rows()) + "]");
    }
    capacity_ = n_frames;
    const size_t per_layer = static_cast<size_t>(n_heads) * capacity_ * head_dim_;
    k_.assign(static_cast<size_t>(n_layers_) * per_layer, 0.0f);
    v_.assign(k_.size(), 0.0f);
    pos_.assign(static_cast<size_t>(n_layers_) * n_heads * capacity_, 0);
    n_kv_.assign(static_cast<size_t>(n_layers_) * n_heads, n_frames);
    for (int l = 0; l < n_layers_; ++l) {
      for (int h = 0; h < n_heads; ++h) {
        float* kd = k_ptr(l, h);
        float* vd = v_ptr(l, h);
        int32_t* pd = pos_ptr(l, h);
        for (int t = 0; t < n_frames; ++t) {
          std::memcpy(kd + static_cast<size_t>(t) * head_dim_, &k[l](t, h * head_dim_),
                      sizeof(float) * head_dim_);
          std::memcpy(vd + static_cast<size_t>(t) * head_dim_, &v[l](t, h * head_dim_),
                      sizeof(float) * head_dim_);
          pd[t] = t;
        }
      }
    }
  }

  int n_layers() const { return n_layers_; }
  int n_heads() const { return n_heads_; }
  int head_dim() const { return head_dim_; }
  int capacity() const { return capacity_; }
  int n_kv(int l, int h) const { return n_kv_[idx(l, h)]; }

  float* k_ptr(int l, int h) { return k_.data() + block(l, h); }
  float* v_ptr(int l, int h) { return v_.data() + block(l, h); }
  const float* k_ptr(int l, int h) const { return k_.data() + block(l, h); }
  const float* v_ptr(int l, int h) const { return v_.data() + block(l, h); }
  int32_t* pos_ptr(int l, int h) { return pos_.data() + idx(l, h) * capacity_; }
  const int32_t* pos_ptr(int l, int h) const { return pos_.data() + idx(l, h) * capacity_; }

  head_view view(int l, int h) const {
    head_view hv;
    hv.layer = l;
    hv.head = h;
    hv.n_kv = n_kv(l, h);
    hv.head_dim = head_dim_;
    hv.k = k_ptr(l, h);
    hv.v = v_ptr(l, h);
    hv.pos = pos_ptr(l, h);
    return hv;
  }

  /// Sum of n_kv over all (layer, head).
  long total_cells() const {
    long s = 0;
    for (int n : n_kv_) s += n;
    return s;
  }

  /// Applies a move map: move_to[i] = new slot of cell i, -1 = evict. Kept cells must map to
  /// 0, 1, 2, ... in order (time order kept), so every target j <= i and an in-order sweep
  /// never overwrites a row before it is read. Rows move by memcpy (byte-exact).
  void apply_move(int l, int h, const std::vector<int32_t>& move_to) {
    const int n = n_kv(l, h);
    if (static_cast<int>(move_to.size()) != n) {
      throw asr_error("eviction hook returned a move map of size " +
                      std::to_string(move_to.size()) + " for layer " + std::to_string(l) +
                      " head " + std::to_string(h) + " with n_kv " + std::to_string(n));
    }
    int next = 0;
    for (int i = 0; i < n; ++i) {
      if (move_to[i] == -1) continue;
      if (move_to[i] != next) {
        throw asr_error("eviction hook move map is not an order-preserving compaction: cell " +
                        std::to_string(i) + " -> " + std::to_string(move_to[i]) + ", expected " +
                        std::to_string(next) + " (layer " + std::to_string(l) + " head " +
                        std::to_string(h) + ")");
      }
      ++next;
    }
    if (next == 0) {
      throw asr_error("eviction hook evicted every cell of layer " + std::to_string(l) + " head " +
                      std::to_string(h) + "; at least one must stay");
    }
    float* kd = k_ptr(l, h);
    float* vd = v_ptr(l, h);
    int32_t* pd = pos_ptr(l, h);
    const size_t row = sizeof(float) * head_dim_;
    for (int i = 0; i < n; ++i) {
      const int j = move_to[i];
      if (j < 0 || j == i) continue;
      std::memcpy(kd + static_cast<size_t>(j) * head_dim_, kd + static_cast<size_t>(i) * head_dim_,
                  row);
      std::memcpy(vd + static_cast<size_t>(j) * head_dim_, vd + static_cast<size_t>(i) * head_dim_,
                  row);
      pd[j] = pd[i];
    }
    n_kv_[idx(l, h)] = next;
  }

 private:
  size_t idx(int l, int h) const { return static_cast<size_t>(l) * n_heads_ + h; }
  size_t block(int l, int h) const { return idx(l, h) * capacity_ * head_dim_; }

  int n_layers_ = 0, n_heads_ = 0, head_dim_ = 0, capacity_ = 0;
  std::vector<float> k_, v_;
  std::vector<int32_t> pos_;
  std::vector<int> n_kv_;
};

}  // namespace asr
