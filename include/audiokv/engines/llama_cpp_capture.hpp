// SPDX-License-Identifier: Apache-2.0
/// @file
/// The attention capture of the llama.cpp adapter: through the context's eval callback, the
/// scored layers' `kq_soft_max-<layer>` tensors reduced to one row per token over the KV cells
/// (llama_cpp_config::head_reduce, layer_reduce), and the cell each token is written to, read
/// from the K store's index input. Needs llama.h; written against llama.cpp 0c1e57098.
#pragma once

#include <llama.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../detail/describe.hpp"
#include "../error.hpp"
#include "llama_cpp_config.hpp"

namespace audiokv::engines {

/// @brief One decode's attention and cells, captured from llama.cpp's graph while it runs.
///
/// Sized once (size()); begin() arms it for a decode of n tokens, the eval callback fills it,
/// end() disarms it; require_complete() then checks that every scored layer and the cell
/// indices were seen. Reduced rows are kept until the next begin(): row(t) is token t's
/// [n_kv()] floats over the context's cells, before the layer mean's division.
class llama_cpp_capture {
 public:
  /// Scores the layers config.layers (every layer when empty) of n_layer, reduced as config
  /// says (validated by the caller).
  void select_layers(const llama_cpp_config& config, std::int32_t n_layer) {
    n_layer_ = n_layer;
    head_reduce_ = config.head_reduce;
    layer_reduce_ = config.layer_reduce;
    scored_.assign(static_cast<std::size_t>(n_layer_), config.layers.empty() ? 1 : 0);
    for (std::int32_t l : config.layers) scored_[static_cast<std::size_t>(l)] = 1;
    n_scored_ = static_cast<std::int32_t>(std::count(scored_.begin(), scored_.end(), 1));
  }
  /// A callback already set in the context parameters, called for every tensor too.
  void chain(ggml_backend_sched_eval_callback callback, void* user) noexcept {
    chained_ = callback;
    chained_user_ = user;
  }
  /// Sized once: a decode's reduced rows [n_ubatch, n_ctx_seq] and the cells of its tokens.
  void size(std::int32_t n_ctx_seq, std::int32_t n_ubatch) {
    n_ctx_seq_ = n_ctx_seq;
    scores_.assign(static_cast<std::size_t>(n_ubatch) * static_cast<std::size_t>(n_ctx_seq_), 0.0f);
    cells_in_.assign(static_cast<std::size_t>(n_ubatch), 0);
    layer_row_.assign(static_cast<std::size_t>(n_ctx_seq_), 0.0f);
  }

  /// Arms the capture for a decode of `n_tokens` tokens.
  void begin(std::int32_t n_tokens) {
    n_tokens_ = n_tokens;
    layers_seen_ = 0;
    idxs_seen_ = false;
    error_.clear();
    n_kv_ = 0;
    seconds_ = 0.0;
  }
  /// Disarms it (the decode returned).
  void end() noexcept { n_tokens_ = 0; }
  /// Throws audiokv::error from `where` naming "capture" unless the decode showed every scored
  /// layer's softmax and the K-store cell indices in the expected form.
  void require_complete(const char* where) const {
    AUDIOKV_REQUIRE(
        error_.empty() && layers_seen_ == n_scored_ && idxs_seen_, where, "capture",
        (error_.empty() ? ::audiokv::detail::describe(
                              "saw ", layers_seen_, " of ", n_scored_, " kq_soft_max tensors and ",
                              idxs_seen_ ? "the" : "no", " K-store cell indices")
                        : error_)
            .c_str(),
        "the graph no longer has the tensors the adapter reads (llama.cpp other "
        "than 0c1e57098, or offloaded attention)");
  }

  /// Token t's reduced row of the last decode ([n_kv()] floats used).
  const float* row(std::int32_t t) const noexcept {
    return scores_.data() + static_cast<std::size_t>(t) * n_ctx_seq_;
  }
  /// The KV cell token t of the decode was written to.
  std::int32_t cell(std::int32_t t) const noexcept {
    return cells_in_[static_cast<std::size_t>(t)];
  }
  /// Columns of the last decode's softmax (llama.cpp's n_kv).
  std::int32_t n_kv() const noexcept { return n_kv_; }
  /// Tokens of the last decode whose rows were reduced.
  std::int32_t last_tokens() const noexcept { return last_tokens_; }
  /// Number of scored layers.
  std::int32_t scored_layers() const noexcept { return n_scored_; }
  /// Seconds spent in the callback reading and reducing since begin().
  double seconds() const noexcept { return seconds_; }

  /// The eval callback llama.cpp calls for every graph tensor; `user` is the capture.
  static bool eval_callback(ggml_tensor* t, bool ask, void* user) {
    return static_cast<llama_cpp_capture*>(user)->on_tensor(t, ask);
  }

 private:
  using clock = std::chrono::steady_clock;

  // Layer of a "kq_soft_max-<il>" node, or -1.
  static std::int32_t softmax_layer(const ggml_tensor* t) {
    if (t->op != GGML_OP_SOFT_MAX) return -1;
    static constexpr char prefix[] = "kq_soft_max-";
    if (std::strncmp(t->name, prefix, sizeof(prefix) - 1) != 0) return -1;
    return static_cast<std::int32_t>(std::strtol(t->name + sizeof(prefix) - 1, nullptr, 10));
  }
  static bool is_k_store(const ggml_tensor* t) {
    return t->op == GGML_OP_SET_ROWS && t->src[1] != nullptr && t->src[1]->type == GGML_TYPE_I64 &&
           std::strcmp(t->src[1]->name, "attn_inp_k_idxs") == 0;
  }

  bool on_tensor(ggml_tensor* t, bool ask) {
    bool mine = false;
    if (n_tokens_ > 0) {
      const std::int32_t layer = softmax_layer(t);
      if (layer >= 0) {
        mine = layer < n_layer_ && scored_[static_cast<std::size_t>(layer)] != 0;
      } else if (!idxs_seen_ && is_k_store(t)) {
        mine = true;
      }
    }
    bool chained = false;
    if (chained_ != nullptr) chained = chained_(t, ask, chained_user_);
    if (ask) return mine || chained;
    if (mine) {
      const auto t0 = clock::now();
      if (t->op == GGML_OP_SET_ROWS) {
        read_cells(t->src[1]);
      } else {
        reduce_softmax(t);
      }
      seconds_ += std::chrono::duration<double>(clock::now() - t0).count();
    }
    return true;  // false would stop the graph's computation
  }

  void read_cells(const ggml_tensor* idxs) {
    if (!ggml_backend_buffer_is_host(idxs->buffer) || idxs->ne[0] != n_tokens_) {
      error_ = "the K-store index input is not a host tensor of n_tokens entries";
      return;
    }
    const auto* v = static_cast<const std::int64_t*>(idxs->data);
    for (std::int32_t i = 0; i < n_tokens_; ++i) {
      // Indices are stream * kv_size + cell; one sequence per decode uses one stream.
      cells_in_[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(v[i] % n_ctx_seq_);
    }
    idxs_seen_ = true;
  }

  // Adds (mean) or maxes (max) the layer's head-reduced probabilities into scores_.
  void reduce_softmax(const ggml_tensor* t) {
    const std::int64_t n_kv = t->ne[0];
    if (t->type != GGML_TYPE_F32 || !ggml_backend_buffer_is_host(t->buffer) ||
        t->ne[1] != n_tokens_ || t->ne[3] != 1 || n_kv > n_ctx_seq_) {
      error_ =
          ::audiokv::detail::describe(t->name, " is not a host F32 tensor of [n_kv <= ", n_ctx_seq_,
                                      ", ", n_tokens_, ", n_head, 1]");
      return;
    }
    const bool first = layers_seen_ == 0;
    ++layers_seen_;
    n_kv_ = static_cast<std::int32_t>(n_kv);
    last_tokens_ = n_tokens_;
    const std::int64_t n_head = t->ne[2];
    const float head_scale =
        head_reduce_ == score_reduce::mean ? 1.0f / static_cast<float>(n_head) : 1.0f;
    const bool head_max = head_reduce_ == score_reduce::max;
    const bool layer_max = layer_reduce_ == score_reduce::max;
    const char* base = static_cast<const char*>(t->data);
    for (std::int32_t tok = 0; tok < n_tokens_; ++tok) {
      float* out = scores_.data() + static_cast<std::size_t>(tok) * n_ctx_seq_;
      // Head 0 initialises the layer's row; the others combine into it.
      float* acc = layer_row_.data();
      for (std::int64_t h = 0; h < n_head; ++h) {
        const auto* p = reinterpret_cast<const float*>(base + tok * t->nb[1] + h * t->nb[2]);
        if (h == 0) {
          for (std::int64_t c = 0; c < n_kv; ++c) acc[c] = p[c];
        } else if (head_max) {
          for (std::int64_t c = 0; c < n_kv; ++c) acc[c] = std::max(acc[c], p[c]);
        } else {
          for (std::int64_t c = 0; c < n_kv; ++c) acc[c] += p[c];
        }
      }
      if (first) {
        for (std::int64_t c = 0; c < n_kv; ++c) out[c] = acc[c] * head_scale;
      } else if (layer_max) {
        for (std::int64_t c = 0; c < n_kv; ++c) out[c] = std::max(out[c], acc[c] * head_scale);
      } else {
        for (std::int64_t c = 0; c < n_kv; ++c) out[c] += acc[c] * head_scale;
      }
    }
  }

  std::int32_t n_layer_ = 0;
  std::int32_t n_ctx_seq_ = 0;
  score_reduce head_reduce_ = score_reduce::max;
  score_reduce layer_reduce_ = score_reduce::mean;
  std::vector<std::uint8_t> scored_;  // [n_layer] 1 = scored
  std::int32_t n_scored_ = 0;
  ggml_backend_sched_eval_callback chained_ = nullptr;
  void* chained_user_ = nullptr;
  std::vector<float> scores_;           // [n_ubatch, n_ctx_seq] reduced rows
  std::vector<float> layer_row_;        // [n_ctx_seq] one token's head-reduced row
  std::vector<std::int32_t> cells_in_;  // [n_ubatch] cell of each token
  std::int32_t n_tokens_ = 0;
  std::int32_t last_tokens_ = 0;
  std::int32_t n_kv_ = 0;
  std::int32_t layers_seen_ = 0;
  bool idxs_seen_ = false;
  double seconds_ = 0.0;
  std::string error_;
};

}  // namespace audiokv::engines
