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
/// A model's layers write their K/V to one KV cache, or, with sliding-window layers (Gemma
/// 2/3), to two: a full cache and a window cache, each with its own cell indices. Caches are
/// numbered in the order their first layer appears in the graph (cache 0 holds layer 0); which
/// cache a layer writes to is read from its K store (the `cache_k_l<il>` tensor and the index
/// input `attn_inp_k_idxs` of its set_rows node) and must not change from decode to decode.
///
/// Sized once (size()); begin() arms it for a decode of n tokens, the eval callback fills it,
/// end() disarms it; require_complete() then checks that every scored layer and the cell
/// indices of every cache were seen. Reduced rows are kept until the next begin(): row(t, c)
/// is token t's [n_kv(c)] floats over cache c's cells, summed (mean) or maxed (max) over the
/// scored layers of that cache, before the layer mean's division.
class llama_cpp_capture {
 public:
  /// The most KV caches a model's layers write to (a full and a window cache).
  static constexpr std::int32_t max_caches = llama_cpp_max_caches;

  /// Scores the layers config.layers (every layer when empty) of n_layer, reduced as config
  /// says (validated by the caller).
  void select_layers(const llama_cpp_config& config, std::int32_t n_layer) {
    n_layer_ = n_layer;
    head_reduce_ = config.head_reduce;
    layer_reduce_ = config.layer_reduce;
    scored_.assign(static_cast<std::size_t>(n_layer_), config.layers.empty() ? 1 : 0);
    for (std::int32_t l : config.layers) scored_[static_cast<std::size_t>(l)] = 1;
    n_scored_ = static_cast<std::int32_t>(std::count(scored_.begin(), scored_.end(), 1));
    layer_cache_.assign(static_cast<std::size_t>(n_layer_), -1);
  }
  /// A callback already set in the context parameters, called for every tensor too.
  void chain(ggml_backend_sched_eval_callback callback, void* user) noexcept {
    chained_ = callback;
    chained_user_ = user;
  }
  /// Sized once: per cache, a decode's reduced rows [n_ubatch, n_ctx_seq] and the cells of
  /// its tokens.
  void size(std::int32_t n_ctx_seq, std::int32_t n_ubatch) {
    n_ctx_seq_ = n_ctx_seq;
    const auto n_rows = static_cast<std::size_t>(n_ubatch) * static_cast<std::size_t>(n_ctx_seq_);
    for (cache_capture& c : caches_) {
      c.scores.assign(n_rows, 0.0f);
      c.cells.assign(static_cast<std::size_t>(n_ubatch), 0);
    }
    layer_row_.assign(static_cast<std::size_t>(n_ctx_seq_), 0.0f);
  }

  /// Arms the capture for a decode of `n_tokens` tokens.
  void begin(std::int32_t n_tokens) {
    n_tokens_ = n_tokens;
    layers_seen_ = 0;
    error_.clear();
    seconds_ = 0.0;
    for (cache_capture& c : caches_) {
      c.idxs = nullptr;
      c.cells_seen = false;
      c.layers_seen = 0;
      c.n_kv = 0;
    }
  }
  /// Disarms it (the decode returned).
  void end() noexcept { n_tokens_ = 0; }
  /// Throws audiokv::error from `where` naming "capture" unless the decode showed every scored
  /// layer's softmax and every cache's K-store cell indices in the expected form.
  void require_complete(const char* where) const {
    std::int32_t caches_seen = 0;
    bool cells_seen = true;
    for (std::int32_t c = 0; c < n_caches_; ++c) {
      caches_seen += caches_[static_cast<std::size_t>(c)].idxs != nullptr ? 1 : 0;
      cells_seen = cells_seen && caches_[static_cast<std::size_t>(c)].cells_seen;
    }
    const bool complete = error_.empty() && layers_seen_ == n_scored_ && n_caches_ > 0 &&
                          caches_seen == n_caches_ && cells_seen;
    AUDIOKV_REQUIRE(
        complete, where, "capture",
        (error_.empty()
             ? ::audiokv::detail::describe(
                   "saw ", layers_seen_, " of ", n_scored_, " kq_soft_max tensors and ",
                   "the K-store cell indices of ", caches_seen, " of ", n_caches_, " KV caches")
             : error_)
            .c_str(),
        "the graph no longer has the tensors the adapter reads (llama.cpp other "
        "than 0c1e57098, or offloaded attention)");
  }

  /// Token t's reduced row over cache c's cells in the last decode ([n_kv(c)] floats used).
  const float* row(std::int32_t t, std::int32_t c = 0) const noexcept {
    return caches_[static_cast<std::size_t>(c)].scores.data() +
           static_cast<std::size_t>(t) * n_ctx_seq_;
  }
  /// The cell of cache c token t of the last decode was written to.
  std::int32_t cell(std::int32_t t, std::int32_t c = 0) const noexcept {
    return caches_[static_cast<std::size_t>(c)].cells[static_cast<std::size_t>(t)];
  }
  /// Columns of cache c's softmax in the last decode (llama.cpp's n_kv; 0 when no scored
  /// layer writes to cache c).
  std::int32_t n_kv(std::int32_t c = 0) const noexcept {
    return caches_[static_cast<std::size_t>(c)].n_kv;
  }
  /// Whether a scored layer of cache c was reduced into its rows in the last decode.
  bool scored(std::int32_t c) const noexcept {
    return caches_[static_cast<std::size_t>(c)].layers_seen > 0;
  }
  /// KV caches the model's layers write to (known after the first decode; 0 before).
  std::int32_t n_caches() const noexcept { return n_caches_; }
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

  struct cache_capture {
    const ggml_tensor* idxs = nullptr;  // this decode's index input of the cache's K stores
    std::int32_t size = 0;              // the cache's cells per stream
    bool cells_seen = false;
    std::int32_t layers_seen = 0;  // scored layers reduced into `scores` this decode
    std::int32_t n_kv = 0;
    std::vector<float> scores;        // [n_ubatch, n_ctx_seq] reduced rows
    std::vector<std::int32_t> cells;  // [n_ubatch] cell of each token
  };

  // Layer of a "kq_soft_max-<il>" node, or -1.
  static std::int32_t softmax_layer(const ggml_tensor* t) {
    if (t->op != GGML_OP_SOFT_MAX) return -1;
    static constexpr char prefix[] = "kq_soft_max-";
    if (std::strncmp(t->name, prefix, sizeof(prefix) - 1) != 0) return -1;
    return static_cast<std::int32_t>(std::strtol(t->name + sizeof(prefix) - 1, nullptr, 10));
  }
  // The K cache tensor a K-store set_rows node writes to (through the reshape that merges
  // streams), or null when `t` is no K store.
  static const ggml_tensor* k_store_cache(const ggml_tensor* t) {
    if (t->op != GGML_OP_SET_ROWS || t->src[1] == nullptr || t->src[1]->type != GGML_TYPE_I64 ||
        std::strcmp(t->src[1]->name, "attn_inp_k_idxs") != 0 || t->src[2] == nullptr) {
      return nullptr;
    }
    const ggml_tensor* k = t->src[2];  // set_rows(a = cache, b = rows, c = indices): src[2] = a
    if (k->op == GGML_OP_RESHAPE && k->src[0] != nullptr) k = k->src[0];
    return k;
  }
  // Layer of a K cache tensor "cache_k_l<il>", or -1.
  static std::int32_t cache_layer(const ggml_tensor* k) {
    const char* at = std::strstr(k->name, "k_l");
    if (std::strncmp(k->name, "cache_", 6) != 0 || at == nullptr) return -1;
    char* end = nullptr;
    const long il = std::strtol(at + 3, &end, 10);
    return end != at + 3 ? static_cast<std::int32_t>(il) : -1;
  }

  bool on_tensor(ggml_tensor* t, bool ask) {
    bool mine = false;
    if (n_tokens_ > 0) {
      const std::int32_t layer = softmax_layer(t);
      if (layer >= 0) {
        mine = layer < n_layer_ && scored_[static_cast<std::size_t>(layer)] != 0;
      } else if (const ggml_tensor* k = k_store_cache(t)) {
        // Known at the ask: its data is read (once per cache) when the node has run.
        const std::int32_t c = ask ? assign_cache(t, k) : cache_of_store(t);
        mine = c >= 0 && !caches_[static_cast<std::size_t>(c)].cells_seen;
      }
    }
    bool chained = false;
    if (chained_ != nullptr) chained = chained_(t, ask, chained_user_);
    if (ask) return mine || chained;
    if (mine) {
      const auto t0 = clock::now();
      if (t->op == GGML_OP_SET_ROWS) {
        read_cells(t->src[1], cache_of_store(t));
      } else {
        reduce_softmax(t, softmax_layer(t));
      }
      seconds_ += std::chrono::duration<double>(clock::now() - t0).count();
    }
    return true;  // false would stop the graph's computation
  }

  // The cache of the K store `t` (writing to `k`): the one whose index input it shares, or a
  // new one; records it as its layer's cache. -1 (and error_) when it contradicts an earlier
  // decode or a model has more than max_caches caches.
  std::int32_t assign_cache(const ggml_tensor* t, const ggml_tensor* k) {
    const std::int32_t layer = cache_layer(k);
    if (layer < 0 || layer >= n_layer_) {
      error_ = ::audiokv::detail::describe("K store ", k->name, " names no layer of ", n_layer_);
      return -1;
    }
    std::int32_t c = cache_of_store(t);
    if (c < 0) {
      // A cache not seen in this decode: its number from an earlier decode, else the next.
      c = layer_cache_[static_cast<std::size_t>(layer)];
      if (c < 0) c = n_caches_;
      if (c >= max_caches) {
        error_ = "the model's layers write to more than two KV caches";
        return -1;
      }
      cache_capture& cc = caches_[static_cast<std::size_t>(c)];
      if (cc.idxs != nullptr) {
        error_ = ::audiokv::detail::describe("layer ", layer, " changed KV cache");
        return -1;
      }
      cc.idxs = t->src[1];
      cc.size = static_cast<std::int32_t>(k->ne[1]);
      n_caches_ = std::max(n_caches_, c + 1);
    }
    std::int32_t& known = layer_cache_[static_cast<std::size_t>(layer)];
    if (known >= 0 && known != c) {
      error_ = ::audiokv::detail::describe("layer ", layer, " changed KV cache");
      return -1;
    }
    known = c;
    return c;
  }
  std::int32_t cache_of_store(const ggml_tensor* t) const noexcept {
    for (std::int32_t c = 0; c < max_caches; ++c)
      if (caches_[static_cast<std::size_t>(c)].idxs == t->src[1]) return c;
    return -1;
  }

  void read_cells(const ggml_tensor* idxs, std::int32_t c) {
    cache_capture& cc = caches_[static_cast<std::size_t>(c)];
    if (!ggml_backend_buffer_is_host(idxs->buffer) || idxs->ne[0] != n_tokens_ || cc.size < 1 ||
        cc.size > n_ctx_seq_) {
      error_ = "a K-store index input is not a host tensor of n_tokens entries";
      return;
    }
    const auto* v = static_cast<const std::int64_t*>(idxs->data);
    for (std::int32_t i = 0; i < n_tokens_; ++i) {
      // Indices are stream * size + cell; a decode uses one stream (one sequence, or several
      // in a unified cache).
      cc.cells[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(v[i] % cc.size);
    }
    cc.cells_seen = true;
  }

  // Adds (mean) or maxes (max) the layer's head-reduced probabilities into its cache's rows.
  void reduce_softmax(const ggml_tensor* t, std::int32_t layer) {
    const std::int32_t c = layer_cache_[static_cast<std::size_t>(layer)];
    const std::int64_t n_kv = t->ne[0];
    if (c < 0) {
      error_ = ::audiokv::detail::describe(t->name, " came before its layer's K store");
      return;
    }
    cache_capture& cc = caches_[static_cast<std::size_t>(c)];
    if (t->type != GGML_TYPE_F32 || !ggml_backend_buffer_is_host(t->buffer) ||
        t->ne[1] != n_tokens_ || t->ne[3] != 1 || n_kv > cc.size) {
      error_ =
          ::audiokv::detail::describe(t->name, " is not a host F32 tensor of [n_kv <= ", cc.size,
                                      ", ", n_tokens_, ", n_head, 1]");
      return;
    }
    const bool first = cc.layers_seen == 0;
    ++layers_seen_;
    ++cc.layers_seen;
    cc.n_kv = static_cast<std::int32_t>(n_kv);
    last_tokens_ = n_tokens_;
    const std::int64_t n_head = t->ne[2];
    const float head_scale =
        head_reduce_ == score_reduce::mean ? 1.0f / static_cast<float>(n_head) : 1.0f;
    const bool head_max = head_reduce_ == score_reduce::max;
    const bool layer_max = layer_reduce_ == score_reduce::max;
    const char* base = static_cast<const char*>(t->data);
    for (std::int32_t tok = 0; tok < n_tokens_; ++tok) {
      float* out = cc.scores.data() + static_cast<std::size_t>(tok) * n_ctx_seq_;
      // Head 0 initialises the layer's row; the others combine into it.
      float* acc = layer_row_.data();
      for (std::int64_t h = 0; h < n_head; ++h) {
        const auto* p = reinterpret_cast<const float*>(base + tok * t->nb[1] + h * t->nb[2]);
        if (h == 0) {
          for (std::int64_t j = 0; j < n_kv; ++j) acc[j] = p[j];
        } else if (head_max) {
          for (std::int64_t j = 0; j < n_kv; ++j) acc[j] = std::max(acc[j], p[j]);
        } else {
          for (std::int64_t j = 0; j < n_kv; ++j) acc[j] += p[j];
        }
      }
      if (first) {
        for (std::int64_t j = 0; j < n_kv; ++j) out[j] = acc[j] * head_scale;
      } else if (layer_max) {
        for (std::int64_t j = 0; j < n_kv; ++j) out[j] = std::max(out[j], acc[j] * head_scale);
      } else {
        for (std::int64_t j = 0; j < n_kv; ++j) out[j] += acc[j] * head_scale;
      }
    }
  }

  std::int32_t n_layer_ = 0;
  std::int32_t n_ctx_seq_ = 0;
  score_reduce head_reduce_ = score_reduce::max;
  score_reduce layer_reduce_ = score_reduce::mean;
  std::vector<std::uint8_t> scored_;       // [n_layer] 1 = scored
  std::vector<std::int32_t> layer_cache_;  // [n_layer] cache each layer writes to, -1 unknown
  std::int32_t n_scored_ = 0;
  std::int32_t n_caches_ = 0;  // caches seen since construction
  ggml_backend_sched_eval_callback chained_ = nullptr;
  void* chained_user_ = nullptr;
  cache_capture caches_[max_caches];
  std::vector<float> layer_row_;  // [n_ctx_seq] one token's head-reduced row
  std::int32_t n_tokens_ = 0;
  std::int32_t last_tokens_ = 0;
  std::int32_t layers_seen_ = 0;
  double seconds_ = 0.0;
  std::string error_;
};

}  // namespace audiokv::engines
