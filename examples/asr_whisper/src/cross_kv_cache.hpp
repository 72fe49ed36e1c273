// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <audiokv/cpu/head_kv_store.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "asr_error.hpp"
#include "kv_eviction_hook.hpp"
#include "tensor_ops.hpp"

namespace asr {

/// @brief Memory features of the cross-attention cache (shared rows, int8 rows); all off keeps the
/// dense float cache alone.
struct kv_store_options {
  bool share_rows = false;       ///< Shared rows: runs of matching frames share one row
  float share_tolerance = 0.0f;  ///< Shared rows: relative max-abs tolerance of a match
  bool int8_buffer = false;  ///< Int8 buffer rows: buffer-pool rows as int8 with a per-row scale
  int full_rows = 0;         ///< Int8 buffer rows: full-precision rows per head (0: every cell)
  bool enabled() const { return share_rows || int8_buffer; }
};

/// @brief Decoder cross-attention KV over audio frames, per (layer, head).
///
/// Storage per layer: K and V as [heads, capacity, head_dim] contiguous floats, so each head's
/// kept rows are one dense block. Each (layer, head) has its own occupancy n_kv and the original
/// frame index of every kept row, so different heads can keep different frames.
/// Invariants: 0 <= n_kv <= capacity; pos[0..n_kv) strictly increasing.
class cross_kv_cache {
 public:
  /// Copies frames [0, visible) of every layer's K/V ([n_audio_ctx, d], head h in columns
  /// h*head_dim..) into the per-head layout; all heads start with n_kv = visible. Frames
  /// [visible, n_frames) come later through reveal() (streaming), read from `k` and `v`, which
  /// must outlive the cache. visible < 0 means n_frames.
  void load(const std::vector<mat_rm>& k, const std::vector<mat_rm>& v, int n_heads, int n_frames,
            int visible = -1) {
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
    visible_ = visible < 0 ? n_frames : std::min(std::max(visible, 1), n_frames);
    src_k_ = &k;
    src_v_ = &v;
    const size_t per_layer = static_cast<size_t>(n_heads) * capacity_ * head_dim_;
    k_.assign(static_cast<size_t>(n_layers_) * per_layer, 0.0f);
    v_.assign(k_.size(), 0.0f);
    pos_.assign(static_cast<size_t>(n_layers_) * n_heads * capacity_, 0);
    n_kv_.assign(static_cast<size_t>(n_layers_) * n_heads, 0);
    const int count = visible_;
    visible_ = 0;
    reveal(count);
  }

  /// Streaming: appends frames [visible(), visible() + count) (clamped to n_frames) to every
  /// head after its kept cells. The caller makes room first (capacity is n_frames per head).
  void reveal(int count) {
    if (has_store()) throw asr_error("cross_kv_cache: reveal() with a K/V store");
    count = std::max(0, std::min(count, capacity_ - visible_));
    for (int l = 0; l < n_layers_; ++l) {
      for (int h = 0; h < n_heads_; ++h) {
        int& n = n_kv_[idx(l, h)];
        if (n + count > capacity_) throw asr_error("cross_kv_cache: reveal beyond capacity");
        float* kd = k_ptr(l, h);
        float* vd = v_ptr(l, h);
        int32_t* pd = pos_ptr(l, h);
        for (int t = visible_; t < visible_ + count; ++t, ++n) {
          std::memcpy(kd + static_cast<size_t>(n) * head_dim_, &(*src_k_)[l](t, h * head_dim_),
                      sizeof(float) * head_dim_);
          std::memcpy(vd + static_cast<size_t>(n) * head_dim_, &(*src_v_)[l](t, h * head_dim_),
                      sizeof(float) * head_dim_);
          pd[n] = t;
        }
      }
    }
    visible_ += count;
  }
  /// Frames revealed so far (offline: n_frames).
  int visible() const { return visible_; }

  /// Streaming: the window's last `count` frames (rows [rows - count, rows) of the encoder
  /// output, for Whisper the encoding of the padding after the audio) become fixed cells that
  /// every head attends to from the first step and no policy manages. Whisper's decoder was
  /// trained on padded 30 s windows and parks attention on them; without them, a partly
  /// revealed window reads as audio that stops mid-word. Call after load(); n_frames must
  /// leave them out (n_frames <= rows - count).
  void set_window_sinks(int count) {
    const int rows = static_cast<int>((*src_k_)[0].rows());
    if (count < 0 || capacity_ > rows - count) {
      throw asr_error("cross_kv_cache: " + std::to_string(count) + " window sinks overlap the " +
                      std::to_string(capacity_) + " revealed frames of a " + std::to_string(rows) +
                      "-frame window");
    }
    n_sinks_ = count;
    sink_k_.assign(static_cast<size_t>(n_layers_) * n_heads_ * count * head_dim_, 0.0f);
    sink_v_.assign(sink_k_.size(), 0.0f);
    for (int l = 0; l < n_layers_; ++l) {
      for (int h = 0; h < n_heads_; ++h) {
        for (int t = 0; t < count; ++t) {
          const size_t at = (idx(l, h) * count + t) * head_dim_;
          std::memcpy(&sink_k_[at], &(*src_k_)[l](rows - count + t, h * head_dim_),
                      sizeof(float) * head_dim_);
          std::memcpy(&sink_v_[at], &(*src_v_)[l](rows - count + t, h * head_dim_),
                      sizeof(float) * head_dim_);
        }
      }
    }
  }
  /// Fixed window-sink cells per (layer, head) (0 unless set_window_sinks()).
  int n_sinks() const { return n_sinks_; }
  /// [n_sinks, head_dim] K and V of the window sinks of (l, h).
  const float* sink_k(int l, int h) const {
    return sink_k_.data() + idx(l, h) * n_sinks_ * head_dim_;
  }
  const float* sink_v(int l, int h) const {
    return sink_v_.data() + idx(l, h) * n_sinks_ * head_dim_;
  }

  /// Builds one audiokv::cpu::head_kv_store per (layer, head) from the loaded rows; attention
  /// then reads the stores, and the dense rows stay as the float reference that measures the
  /// stores' attention error.
  void enable_store(const kv_store_options& o) {
    stores_.clear();
    stores_.reserve(static_cast<size_t>(n_layers_) * n_heads_);
    audiokv::cpu::head_kv_store_config c;
    c.cell_capacity = capacity_;
    c.head_dim = head_dim_;
    c.share_rows = o.share_rows;
    c.share_tolerance = o.share_tolerance;
    c.int8_buffer = o.int8_buffer;
    c.full_rows = o.int8_buffer ? o.full_rows : 0;
    for (int l = 0; l < n_layers_; ++l) {
      for (int h = 0; h < n_heads_; ++h) {
        stores_.emplace_back(c);
        for (int t = 0; t < n_kv(l, h); ++t) {
          stores_.back().append(k_ptr(l, h) + static_cast<size_t>(t) * head_dim_,
                                v_ptr(l, h) + static_cast<size_t>(t) * head_dim_);
        }
      }
    }
  }
  bool has_store() const { return !stores_.empty(); }
  const audiokv::cpu::head_kv_store& store(int l, int h) const { return stores_[idx(l, h)]; }

  /// K/V bytes attention reads: the stores' rows and slot tables, else the dense rows.
  long kv_bytes_held() const {
    if (!has_store()) return dense_kv_bytes();
    long bytes = 0;
    for (const auto& s : stores_) bytes += static_cast<long>(s.kv_bytes() + s.table_bytes());
    return bytes;
  }
  /// Bytes of the kept cells and the window sinks as dense float K and V.
  long dense_kv_bytes() const {
    return total_cells() * 2L * head_dim_ * static_cast<long>(sizeof(float));
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

  /// Sum of n_kv plus the window sinks over all (layer, head).
  long total_cells() const {
    long s = static_cast<long>(n_sinks_) * static_cast<long>(n_kv_.size());
    for (int n : n_kv_) s += n;
    return s;
  }

  /// Applies a move map: move_to[i] = new slot of cell i, -1 = evict. Kept cells must map to
  /// 0, 1, 2, ... in order (time order kept), so every target j <= i and an in-order sweep
  /// never overwrites a row before it is read. Rows move by memcpy (byte-exact).
  /// Applies a move map, and the same plan to the store of (l, h) with the policy's pools
  /// after it (`tiers`, null for single-pool policies).
  void apply_move(int l, int h, const std::vector<int32_t>& move_to,
                  const audiokv::pool_tier* tiers) {
    const int n = n_kv(l, h);
    apply_dense_move(l, h, move_to);
    if (has_store()) stores_[idx(l, h)].apply(move_to.data(), n, tiers);
  }

 private:
  void apply_dense_move(int l, int h, const std::vector<int32_t>& move_to) {
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

  size_t idx(int l, int h) const { return static_cast<size_t>(l) * n_heads_ + h; }
  size_t block(int l, int h) const { return idx(l, h) * capacity_ * head_dim_; }

  int n_layers_ = 0, n_heads_ = 0, head_dim_ = 0, capacity_ = 0, visible_ = 0, n_sinks_ = 0;
  const std::vector<mat_rm>* src_k_ = nullptr;  // encoder K/V the frames are revealed from
  const std::vector<mat_rm>* src_v_ = nullptr;
  std::vector<float> k_, v_;
  std::vector<float> sink_k_, sink_v_;  // [layers * heads, n_sinks, head_dim]
  std::vector<int32_t> pos_;
  std::vector<int> n_kv_;
  std::vector<audiokv::cpu::head_kv_store> stores_;  // [layers * heads] when enabled
};

}  // namespace asr
