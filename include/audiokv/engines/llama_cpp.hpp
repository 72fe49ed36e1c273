// SPDX-License-Identifier: Apache-2.0
/// @file
/// audiokv inside llama.cpp: decode-time eviction of a llama.cpp context's KV cells by any
/// audiokv policy. Needs llama.h (CMake: audiokv::llama_cpp); written against llama.cpp
/// 0c1e57098 (the tree vendored in llama-cpp-python 0.3.36), whose graph tensor names it reads.
///
/// How it works, per llama_decode (one sequence per call):
///  - Scores. The context's eval callback sees every layer's attention probabilities, the
///    tensor `kq_soft_max-<layer>` (F32, ne = [n_kv, n_tokens, n_head, n_stream]; it exists
///    only with flash attention disabled). Its columns are KV *cell indices*, not positions.
///    The adapter reduces the chosen layers and query heads to one probability per cell and
///    token (llama_cpp_config::head_reduce, layer_reduce), in place on the host.
///  - Cells. The cell each new token is written to is read from the K store's index input
///    (`attn_inp_k_idxs`, src[1] of the layer's set_rows node). Per sequence the adapter keeps
///    the map policy slot (time order) -> position -> cell; llama.cpp fills freed cells lowest
///    first, so n_ctx need only be the budget plus a margin, not the stream length.
///  - Policy. One eviction_policy per sequence (any make_policy() name). After the decode
///    each token is appended (position, and the frame metadata of an audio span when the
///    engine marked one) and observes its attention row over the policy's cells.
///  - Eviction. evict() plans when the policy's trigger fires and removes the evicted
///    positions with llama_memory_seq_rm, one call per run of consecutive cached positions.
///    Positions never change (no seq_add). The newest position is never removed: llama.cpp
///    requires the next batch to start at seq_pos_max + 1, so when a plan drops the newest
///    cell, the cell leaves the policy at once and llama.cpp's cache after the next decode.
///
/// Scope: models whose memory is one KV cache of full-attention layers. Recurrent and hybrid
/// memories (llama_memory_seq_rm refuses partial removal) and models with sliding-window
/// layers (llama_model_n_swa() > 0: Gemma 2/3 keep a second, window cache whose cells and
/// softmax columns are another index space) are rejected at construction, as are contexts
/// with flash attention not disabled (no softmax tensor) or with pooled embeddings only.
#pragma once

#include <llama.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../registry.hpp"

namespace audiokv::engines {

/// How the query heads of a layer, or the scored layers, are reduced to one score per cell.
enum class score_reduce : std::uint8_t {
  mean = 0,  ///< the mean probability (each token's row still sums to 1)
  max = 1    ///< the largest probability (a cell one head relies on counts in full)
};

/// @brief What the adapter captures and how it reduces it.
struct llama_cpp_config {
  /// Layers whose attention probabilities score the cells; empty: every layer.
  std::vector<std::int32_t> layers;
  /// Reduction over the query heads of one layer (GQA: all query heads, whatever KV head).
  /// max: chosen on the dev text (Exodus, 768 tokens, AudioKV at 128 cells: perplexity 34.73
  /// with max, 35.16 with mean, 35.98 with the mean of the last 12 layers only;
  /// benchmarks/results/llm_dev.jsonl).
  score_reduce head_reduce = score_reduce::max;
  /// Reduction over the scored layers.
  score_reduce layer_reduce = score_reduce::mean;
  /// Metadata of positions outside every audio span (text tokens): speaker 0, voiced, no
  /// flags. Its `pos` is ignored.
  frame_meta text_frame{};

  /// Throws audiokv::error naming the first invalid field.
  void validate(std::int32_t n_layer) const {
    constexpr const char* where = "llama_cpp_config";
    for (std::size_t i = 0; i < layers.size(); ++i) {
      AUDIOKV_REQUIRE(
          layers[i] >= 0 && layers[i] < n_layer, where,
          ::audiokv::detail::indexed("config.layers", static_cast<long long>(i)), layers[i],
          ::audiokv::detail::describe("must lie in [0, n_layer = ", n_layer, ")").c_str());
      for (std::size_t j = 0; j < i; ++j) {
        AUDIOKV_REQUIRE(layers[j] != layers[i], where,
                        ::audiokv::detail::indexed("config.layers", static_cast<long long>(i)),
                        layers[i], "must not repeat a layer");
      }
    }
    AUDIOKV_REQUIRE(head_reduce == score_reduce::mean || head_reduce == score_reduce::max, where,
                    "config.head_reduce", static_cast<int>(head_reduce), "must be mean or max");
    AUDIOKV_REQUIRE(layer_reduce == score_reduce::mean || layer_reduce == score_reduce::max, where,
                    "config.layer_reduce", static_cast<int>(layer_reduce), "must be mean or max");
    AUDIOKV_REQUIRE(text_frame.voice >= 0.0f && text_frame.voice <= 1.0f, where,
                    "config.text_frame.voice", text_frame.voice, "must be in [0, 1]");
    AUDIOKV_REQUIRE(text_frame.speaker >= 0, where, "config.text_frame.speaker", text_frame.speaker,
                    "must be >= 0");
  }
};

/// @brief Time spent in each part of the adapter since construction (or reset_timings()),
/// in seconds, with the counts that divide them.
struct llama_cpp_timings {
  double decode = 0.0;         ///< llama_decode wall time (includes capture)
  double capture = 0.0;        ///< inside the eval callback: reading and reducing the softmax
  double observe = 0.0;        ///< policy append + observe (with the gather to the policy's order)
  double plan = 0.0;           ///< policy plan / plan_to + apply and the cell-map update
  double seq_rm = 0.0;         ///< llama_memory_seq_rm calls
  std::int64_t decodes = 0;    ///< decode() calls that ran llama_decode successfully
  std::int64_t tokens = 0;     ///< tokens they decoded
  std::int64_t evictions = 0;  ///< evict() / compress() calls that removed cells
  std::int64_t ranges = 0;     ///< llama_memory_seq_rm calls
  std::int64_t evicted = 0;    ///< cells the policies evicted
};

/// @brief One llama.cpp context whose KV cells audiokv policies evict, one per sequence.
///
/// Lifetime: the adapter creates and owns the llama_context (it must install its eval
/// callback in the context parameters), and frees it in its destructor; the model must
/// outlive it. Not copyable or movable (llama.cpp holds a pointer to it).
///
/// Errors: every call validates first and throws audiokv::error naming the argument; a call
/// that throws leaves the adapter and the context unchanged, except where a method says so.
/// Threads: one thread at a time (llama_decode is not reentrant on one context either).
class llama_cpp_adapter {
 public:
  /// @brief Creates the context for `model` with `params`, capturing attention through its
  /// eval callback (a callback already set in params is still called, for every tensor).
  /// @throws audiokv::error naming "params.flash_attn_type" unless it is
  ///         LLAMA_FLASH_ATTN_TYPE_DISABLED (AUTO turns flash attention on for the CPU and the
  ///         softmax tensor disappears), "params.embeddings" when set (pooled outputs skip the
  ///         logits graph), "model" for a recurrent or hybrid model or one with sliding-window
  ///         layers, "config.*" for a bad configuration, and "llama_init_from_model" when
  ///         llama.cpp cannot create the context.
  llama_cpp_adapter(llama_model* model, llama_context_params params, llama_cpp_config config = {})
      : model_(model), config_(std::move(config)) {
    constexpr const char* where = "llama_cpp_adapter";
    AUDIOKV_REQUIRE(model != nullptr, where, "model", "null", "must be a loaded llama_model");
    AUDIOKV_REQUIRE(!llama_model_is_recurrent(model) && !llama_model_is_hybrid(model), where,
                    "model", "recurrent or hybrid",
                    "llama_memory_seq_rm cannot remove single positions from a recurrent state; "
                    "only attention-only models can be evicted");
    AUDIOKV_REQUIRE(llama_model_n_swa(model) == 0, where, "model",
                    ::audiokv::detail::describe("n_swa = ", llama_model_n_swa(model)).c_str(),
                    "models with sliding-window layers (Gemma 2/3 style: a full and a window KV "
                    "cache) are not supported; audiokv governs one full-attention KV cache");
    AUDIOKV_REQUIRE(params.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_DISABLED, where,
                    "params.flash_attn_type", llama_flash_attn_type_name(params.flash_attn_type),
                    "must be LLAMA_FLASH_ATTN_TYPE_DISABLED: with flash attention (AUTO enables "
                    "it on the CPU) llama.cpp builds no kq_soft_max tensor to score cells from");
    AUDIOKV_REQUIRE(!params.embeddings, where, "params.embeddings", "true",
                    "must be false (the adapter serves decoding)");
    n_layer_ = llama_model_n_layer(model);
    n_head_ = llama_model_n_head(model);
    config_.validate(n_layer_);
    scored_.assign(static_cast<std::size_t>(n_layer_), config_.layers.empty() ? 1 : 0);
    for (std::int32_t l : config_.layers) scored_[static_cast<std::size_t>(l)] = 1;
    n_scored_ = static_cast<std::int32_t>(std::count(scored_.begin(), scored_.end(), 1));

    chained_ = params.cb_eval;
    chained_user_ = params.cb_eval_user_data;
    params.cb_eval = &llama_cpp_adapter::eval_callback;
    params.cb_eval_user_data = this;
    ctx_ = llama_init_from_model(model, params);
    AUDIOKV_REQUIRE(ctx_ != nullptr, where, "llama_init_from_model", "null",
                    "llama.cpp could not create the context (see its log)");
    n_ctx_ = static_cast<std::int32_t>(llama_n_ctx(ctx_));
    n_ctx_seq_ = static_cast<std::int32_t>(llama_n_ctx_seq(ctx_));
    n_ubatch_ = static_cast<std::int32_t>(llama_n_ubatch(ctx_));
    // Sized once: a decode's reduced rows [n_ubatch, n_ctx_seq] and the cells of its tokens.
    scores_.assign(static_cast<std::size_t>(n_ubatch_) * static_cast<std::size_t>(n_ctx_seq_),
                   0.0f);
    cells_in_.assign(static_cast<std::size_t>(n_ubatch_), 0);
    layer_row_.assign(static_cast<std::size_t>(n_ctx_seq_), 0.0f);
  }

  llama_cpp_adapter(const llama_cpp_adapter&) = delete;
  llama_cpp_adapter& operator=(const llama_cpp_adapter&) = delete;
  ~llama_cpp_adapter() {
    if (ctx_ != nullptr) llama_free(ctx_);
  }

  /// The context (for llama_get_logits_ith, samplers, ...). Changing its memory other than
  /// through this adapter desynchronises the cell map (decode() then throws).
  llama_context* context() const noexcept { return ctx_; }
  /// The model.
  llama_model* model() const noexcept { return model_; }
  /// The configuration.
  const llama_cpp_config& config() const noexcept { return config_; }

  /// @brief Puts sequence `seq` under `policy`, which must be empty (nothing appended).
  /// The sequence must be empty in the context too. Allocates the sequence's map and plan.
  /// @throws audiokv::error naming "seq" (negative, beyond n_seq_max, already managed, or not
  ///         empty in the context), "policy" (null or not empty) or "policy.capacity()" when the
  ///         capacities of the managed sequences, plus one cell each for a deferred newest
  ///         cell, exceed the context's cells (n_ctx, or n_ctx_seq per sequence).
  void add_sequence(llama_seq_id seq, std::unique_ptr<eviction_policy> policy) {
    constexpr const char* where = "llama_cpp_adapter::add_sequence";
    AUDIOKV_REQUIRE(
        seq >= 0 && seq < static_cast<llama_seq_id>(llama_n_seq_max(ctx_)), where, "seq", seq,
        ::audiokv::detail::describe("must lie in [0, n_seq_max = ", llama_n_seq_max(ctx_), ")")
            .c_str());
    AUDIOKV_REQUIRE(find(seq) == nullptr, where, "seq", seq, "is already managed");
    AUDIOKV_REQUIRE(llama_memory_seq_pos_max(llama_get_memory(ctx_), seq) < 0, where, "seq", seq,
                    "must be empty in the context (llama_memory_seq_rm it first)");
    AUDIOKV_REQUIRE(policy != nullptr, where, "policy", "null", "must be a policy");
    AUDIOKV_REQUIRE(policy->num_cells() == 0, where, "policy.num_cells()", policy->num_cells(),
                    "must be 0 (a fresh policy)");
    const std::int64_t need = static_cast<std::int64_t>(policy->capacity()) + 1;
    std::int64_t total = need;
    for (const auto& s : seqs_) total += static_cast<std::int64_t>(s->policy->capacity()) + 1;
    AUDIOKV_REQUIRE(
        need <= n_ctx_seq_ && total <= n_ctx_, where, "policy.capacity()", policy->capacity(),
        ::audiokv::detail::describe(
            "plus 1 (a deferred newest cell) must fit the context: n_ctx_seq = ", n_ctx_seq_,
            ", n_ctx = ", n_ctx_, " for all managed sequences (", total,
            " needed); raise n_ctx to budget + margin")
            .c_str());
    auto s = std::make_unique<sequence>();
    s->id = seq;
    s->cells.assign(static_cast<std::size_t>(policy->capacity()), -1);
    s->gather.assign(static_cast<std::size_t>(policy->capacity()), 0.0f);
    s->plan.reserve(policy->capacity());
    s->ranges.reserve(static_cast<std::size_t>(policy->capacity()));
    s->policy = std::move(policy);
    seqs_.push_back(std::move(s));
  }

  /// add_sequence() with make_policy(name, options).
  /// @throws audiokv::error from make_policy() (naming "name" for an unknown policy) or from
  ///         add_sequence().
  void add_sequence(llama_seq_id seq, std::string_view name, const policy_options& options) {
    add_sequence(seq, make_policy(name, options));
  }

  /// @brief Stops managing `seq` and removes its cells from the context.
  /// @throws audiokv::error naming "seq" when it is not managed.
  void remove_sequence(llama_seq_id seq) {
    sequence& s = require(seq, "llama_cpp_adapter::remove_sequence");
    llama_memory_seq_rm(llama_get_memory(ctx_), seq, -1, -1);
    seqs_.erase(std::find_if(seqs_.begin(), seqs_.end(),
                             [&](const std::unique_ptr<sequence>& p) { return p.get() == &s; }));
  }

  /// @brief Marks positions of `seq` as audio: each frame's speaker, voice and flags (phoneme
  /// boundary, segment start, ...) are what the policy sees when its position is decoded, as
  /// a speech LLM's prompt marks the span its audio encoder filled. Positions outside every
  /// marked frame get config().text_frame. Text-only runs mark none.
  /// @param frames ascending positions, all beyond those already marked or decoded.
  /// @throws audiokv::error naming "seq" or "frames[i].pos" / ".voice" / ".speaker"; nothing
  ///         is marked then. Allocates.
  void mark_audio(llama_seq_id seq, span<const frame_meta> frames) {
    constexpr const char* where = "llama_cpp_adapter::mark_audio";
    sequence& s = require(seq, where);
    llama_pos last = std::max(s.pos_max, s.audio.empty() ? -1 : s.audio.back().pos);
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const frame_meta& f = frames[i];
      const std::string at = ::audiokv::detail::indexed("frames", static_cast<long long>(i));
      AUDIOKV_REQUIRE(f.pos > last, where, at + ".pos", f.pos,
                      ::audiokv::detail::describe("must exceed ", last,
                                                  " (ascending, after every decoded or marked "
                                                  "position)")
                          .c_str());
      AUDIOKV_REQUIRE(f.voice >= 0.0f && f.voice <= 1.0f, where, at + ".voice", f.voice,
                      "must be in [0, 1]");
      AUDIOKV_REQUIRE(f.speaker >= 0, where, at + ".speaker", f.speaker, "must be >= 0");
      last = f.pos;
    }
    s.audio.insert(s.audio.end(), frames.begin(), frames.end());
  }

  /// @brief llama_decode(batch), then every token is appended to its sequence's policy and
  /// observes its attention row. All tokens belong to one managed sequence, at consecutive
  /// positions from seq_pos_max + 1 (batch.pos may be null: llama.cpp then numbers them so),
  /// at most n_ubatch of them (each token's softmax row is captured: one ubatch per call).
  /// Does not evict; call evict() between decodes. No allocation.
  /// @return llama_decode's result; on a non-zero result nothing changed in the adapter.
  /// @throws audiokv::error naming "batch.n_tokens", "batch.seq_id[i]", "batch.pos[i]" or
  ///         "batch" (the policy has no room: evict first or raise its capacity) before
  ///         decoding; after a successful llama_decode, naming "capture" when the softmax of a
  ///         scored layer or the tokens' cells were not seen (the adapter's map is then out of
  ///         step with the context: remove the sequence).
  std::int32_t decode(const llama_batch& batch) {
    constexpr const char* where = "llama_cpp_adapter::decode";
    AUDIOKV_REQUIRE(batch.n_tokens >= 1 && batch.n_tokens <= n_ubatch_, where, "batch.n_tokens",
                    batch.n_tokens,
                    ::audiokv::detail::describe("must lie in [1, n_ubatch = ", n_ubatch_,
                                                "]: every token's attention row is captured")
                        .c_str());
    const llama_seq_id seq =
        (batch.seq_id != nullptr && batch.n_seq_id != nullptr) ? batch.seq_id[0][0] : 0;
    sequence* s = find(seq);
    AUDIOKV_REQUIRE(s != nullptr, where, "batch.seq_id[0]", seq, "is not a managed sequence");
    for (std::int32_t i = 0; i < batch.n_tokens; ++i) {
      if (batch.seq_id == nullptr || batch.n_seq_id == nullptr) break;
      AUDIOKV_REQUIRE(batch.n_seq_id[i] == 1 && batch.seq_id[i][0] == seq, where,
                      ::audiokv::detail::indexed("batch.seq_id", i), batch.seq_id[i][0],
                      ::audiokv::detail::describe("every token must belong to sequence ", seq,
                                                  " alone (one sequence per decode)")
                          .c_str());
    }
    const llama_pos mem_max = llama_memory_seq_pos_max(llama_get_memory(ctx_), seq);
    AUDIOKV_REQUIRE(mem_max == s->pos_max, where, "batch.seq_id[0]", seq,
                    ::audiokv::detail::describe("the context holds positions up to ", mem_max,
                                                " but the adapter decoded up to ", s->pos_max,
                                                ": the sequence was changed outside the adapter")
                        .c_str());
    if (batch.pos != nullptr) {
      for (std::int32_t i = 0; i < batch.n_tokens; ++i) {
        AUDIOKV_REQUIRE(batch.pos[i] == s->pos_max + 1 + i, where,
                        ::audiokv::detail::indexed("batch.pos", i), batch.pos[i],
                        ::audiokv::detail::describe("must be ", s->pos_max + 1 + i,
                                                    " (consecutive from seq_pos_max + 1; "
                                                    "positions never change)")
                            .c_str());
      }
    }
    const std::int64_t room =
        static_cast<std::int64_t>(s->policy->capacity()) - s->policy->num_cells();
    AUDIOKV_REQUIRE(batch.n_tokens <= room, where, "batch", batch.n_tokens,
                    ::audiokv::detail::describe("tokens exceed the policy's free slots (", room,
                                                " of capacity ", s->policy->capacity(),
                                                "): call evict() first or raise the capacity")
                        .c_str());

    n_tokens_ = batch.n_tokens;
    layers_seen_ = 0;
    idxs_seen_ = false;
    capture_error_.clear();
    n_kv_ = 0;
    const auto t0 = clock::now();
    capture_seconds_ = 0.0;
    const std::int32_t rc = llama_decode(ctx_, batch);
    const auto t1 = clock::now();
    n_tokens_ = 0;
    if (rc != 0) return rc;
    timings_.decode += seconds(t0, t1);
    timings_.capture += capture_seconds_;
    ++timings_.decodes;
    timings_.tokens += batch.n_tokens;
    AUDIOKV_REQUIRE(
        capture_error_.empty() && layers_seen_ == n_scored_ && idxs_seen_, where, "capture",
        (capture_error_.empty()
             ? ::audiokv::detail::describe("saw ", layers_seen_, " of ", n_scored_,
                                           " kq_soft_max tensors and ", idxs_seen_ ? "the" : "no",
                                           " K-store cell indices")
             : capture_error_)
            .c_str(),
        "the graph no longer has the tensors the adapter reads (llama.cpp other "
        "than 0c1e57098, or offloaded attention)");

    const auto t2 = clock::now();
    eviction_policy& p = *s->policy;
    const float layer_scale =
        config_.layer_reduce == score_reduce::mean ? 1.0f / static_cast<float>(n_scored_) : 1.0f;
    for (std::int32_t t = 0; t < batch.n_tokens; ++t) {
      frame_meta f = next_frame(*s, s->pos_max + 1);
      p.append(&f, 1);
      const std::int32_t n = p.num_cells();
      s->cells[static_cast<std::size_t>(n - 1)] = cells_in_[static_cast<std::size_t>(t)];
      const float* row = scores_.data() + static_cast<std::size_t>(t) * n_ctx_seq_;
      for (std::int32_t j = 0; j < n; ++j) {
        s->gather[static_cast<std::size_t>(j)] =
            row[s->cells[static_cast<std::size_t>(j)]] * layer_scale;
      }
      p.observe(s->gather.data(), n);
      s->pos_max += 1;
    }
    const auto t3 = clock::now();
    timings_.observe += seconds(t2, t3);
    if (s->deferred >= 0) {
      // The newest cell a plan dropped: a newer position now exists, so it can go.
      remove_range(*s, s->deferred, s->deferred + 1);
      s->deferred = -1;
    }
    return 0;
  }

  /// @brief When `seq`'s policy wants an eviction: plan(), remove the evicted positions from
  /// the context (llama_memory_seq_rm per run of consecutive cached positions) and apply().
  /// No allocation (the plan and range list are reserved).
  /// @return the number of cells evicted (0 when the trigger did not fire).
  /// @throws audiokv::error naming "seq" when it is not managed.
  std::int32_t evict(llama_seq_id seq) {
    sequence& s = require(seq, "llama_cpp_adapter::evict");
    if (!s.policy->wants_eviction()) return 0;
    const auto t0 = clock::now();
    s.policy->plan(s.plan);
    timings_.plan += seconds(t0, clock::now());
    return carry_out(s);
  }

  /// @brief One-shot compression of `seq` to at most `target` cells (policy plan_to(); the
  /// kvpress setting: compress a prefilled prompt once). The newest cell is deferred as in
  /// evict().
  /// @return the number of cells evicted.
  /// @throws audiokv::error naming "seq" or "target" (negative).
  std::int32_t compress(llama_seq_id seq, std::int32_t target) {
    sequence& s = require(seq, "llama_cpp_adapter::compress");
    AUDIOKV_REQUIRE(target >= 0, "llama_cpp_adapter::compress", "target", target, "must be >= 0");
    const auto t0 = clock::now();
    s.policy->plan_to(target, s.plan);
    timings_.plan += seconds(t0, clock::now());
    return carry_out(s);
  }

  /// The policy of `seq`. @throws audiokv::error naming "seq" when it is not managed.
  const eviction_policy& policy(llama_seq_id seq) const {
    return *require(seq, "llama_cpp_adapter::policy").policy;
  }
  /// [policy(seq).num_cells()] the KV cell of each policy slot (time order), parallel to
  /// policy(seq).positions(). @throws audiokv::error naming "seq".
  span<const std::int32_t> cells(llama_seq_id seq) const {
    const sequence& s = require(seq, "llama_cpp_adapter::cells");
    return span<const std::int32_t>(s.cells.data(),
                                    static_cast<std::size_t>(s.policy->num_cells()));
  }
  /// The [p0, p1) ranges the last evict()/compress() of `seq` passed to llama_memory_seq_rm
  /// (a deferred newest cell is removed later and is not among them).
  /// @throws audiokv::error naming "seq".
  span<const std::pair<llama_pos, llama_pos>> last_ranges(llama_seq_id seq) const {
    const sequence& s = require(seq, "llama_cpp_adapter::last_ranges");
    return span<const std::pair<llama_pos, llama_pos>>(s.ranges.data(), s.ranges.size());
  }
  /// The newest position of `seq` that a plan evicted and the context still holds until the
  /// next decode, or -1. @throws audiokv::error naming "seq".
  llama_pos deferred(llama_seq_id seq) const {
    return require(seq, "llama_cpp_adapter::deferred").deferred;
  }
  /// The newest decoded position of `seq` (-1 before the first decode).
  /// @throws audiokv::error naming "seq".
  llama_pos pos_max(llama_seq_id seq) const {
    return require(seq, "llama_cpp_adapter::pos_max").pos_max;
  }
  /// The last decode's reduced attention row of token `t` over the context's cells:
  /// [n_kv()] floats, before the layer mean's division (rows of a mean sum to the number of
  /// scored layers). For tests and diagnostics.
  /// @throws audiokv::error naming "t" outside the last decode's tokens.
  span<const float> last_row(std::int32_t t) const {
    AUDIOKV_REQUIRE(t >= 0 && t < last_tokens_, "llama_cpp_adapter::last_row", "t", t,
                    ::audiokv::detail::describe("must lie in [0, ", last_tokens_, ")").c_str());
    return span<const float>(scores_.data() + static_cast<std::size_t>(t) * n_ctx_seq_,
                             static_cast<std::size_t>(n_kv_));
  }
  /// Columns of the last decode's softmax (llama.cpp's n_kv: used cells rounded up to 256).
  std::int32_t n_kv() const noexcept { return n_kv_; }
  /// Number of layers whose softmax is captured.
  std::int32_t scored_layers() const noexcept { return n_scored_; }
  /// Accumulated timings.
  const llama_cpp_timings& timings() const noexcept { return timings_; }
  /// Zeroes the timings.
  void reset_timings() noexcept { timings_ = llama_cpp_timings{}; }

 private:
  using clock = std::chrono::steady_clock;
  static double seconds(clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }

  struct sequence {
    llama_seq_id id = 0;
    std::unique_ptr<eviction_policy> policy;
    std::vector<std::int32_t> cells;  // [capacity] KV cell of each policy slot
    std::vector<float> gather;        // [capacity] one attention row in the policy's order
    eviction_plan plan;
    std::vector<std::pair<llama_pos, llama_pos>> ranges;
    std::vector<frame_meta> audio;  // marked audio frames, ascending positions
    std::size_t audio_next = 0;
    llama_pos pos_max = -1;
    llama_pos deferred = -1;
  };

  sequence* find(llama_seq_id seq) const {
    for (const auto& s : seqs_)
      if (s->id == seq) return s.get();
    return nullptr;
  }
  sequence& require(llama_seq_id seq, const char* where) const {
    sequence* s = find(seq);
    AUDIOKV_REQUIRE(s != nullptr, where, "seq", seq, "is not a managed sequence");
    return *s;
  }

  frame_meta next_frame(sequence& s, llama_pos pos) const {
    while (s.audio_next < s.audio.size() && s.audio[s.audio_next].pos < pos) ++s.audio_next;
    frame_meta f = config_.text_frame;
    if (s.audio_next < s.audio.size() && s.audio[s.audio_next].pos == pos) {
      f = s.audio[s.audio_next++];
    }
    f.pos = pos;
    return f;
  }

  void remove_range(sequence& s, llama_pos p0, llama_pos p1) {
    const auto t0 = clock::now();
    const bool ok = llama_memory_seq_rm(llama_get_memory(ctx_), s.id, p0, p1);
    timings_.seq_rm += seconds(t0, clock::now());
    ++timings_.ranges;
    // Attention-only memories always remove; the constructor rejected the others.
    AUDIOKV_REQUIRE(ok, "llama_cpp_adapter", "llama_memory_seq_rm",
                    ::audiokv::detail::describe("[", p0, ", ", p1, ")").c_str(),
                    "the context refused a partial removal");
  }

  // Removes s.plan's evicted cells from the context and applies the plan.
  std::int32_t carry_out(sequence& s) {
    eviction_plan& plan = s.plan;
    s.ranges.clear();
    const std::int32_t n = s.policy->num_cells();
    const std::int32_t n_evicted = static_cast<std::int32_t>(plan.evict.size());
    if (n_evicted == 0) return 0;
    const std::int32_t* pos = s.policy->positions();
    // Runs of consecutive slots are runs of consecutive cached positions: the positions
    // between two neighbouring slots are no longer in the context.
    std::size_t i = 0;
    while (i < plan.evict.size()) {
      std::size_t j = i;
      while (j + 1 < plan.evict.size() && plan.evict[j + 1] == plan.evict[j] + 1) ++j;
      std::int32_t last = plan.evict[j];
      if (last == n - 1) --last;  // the newest position stays in the context (deferred)
      if (last >= plan.evict[i]) s.ranges.emplace_back(pos[plan.evict[i]], pos[last] + 1);
      i = j + 1;
    }
    const bool newest = plan.evict.back() == n - 1;
    const llama_pos newest_pos = pos[n - 1];
    for (const auto& r : s.ranges) remove_range(s, r.first, r.second);
    const auto t0 = clock::now();
    s.policy->apply(plan);
    for (std::int32_t k = 0; k < n; ++k) {
      const std::int32_t to = plan.move_to[static_cast<std::size_t>(k)];
      if (to >= 0) s.cells[static_cast<std::size_t>(to)] = s.cells[static_cast<std::size_t>(k)];
    }
    timings_.plan += seconds(t0, clock::now());
    if (newest) s.deferred = newest_pos;
    ++timings_.evictions;
    timings_.evicted += n_evicted;
    return n_evicted;
  }

  static bool eval_callback(ggml_tensor* t, bool ask, void* user) {
    return static_cast<llama_cpp_adapter*>(user)->on_tensor(t, ask);
  }

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
      capture_seconds_ += seconds(t0, clock::now());
    }
    return true;  // false would stop the graph's computation
  }

  void read_cells(const ggml_tensor* idxs) {
    if (!ggml_backend_buffer_is_host(idxs->buffer) || idxs->ne[0] != n_tokens_) {
      capture_error_ = "the K-store index input is not a host tensor of n_tokens entries";
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
      capture_error_ =
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
        config_.head_reduce == score_reduce::mean ? 1.0f / static_cast<float>(n_head) : 1.0f;
    const bool head_max = config_.head_reduce == score_reduce::max;
    const bool layer_max = config_.layer_reduce == score_reduce::max;
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

  llama_model* model_ = nullptr;
  llama_context* ctx_ = nullptr;
  llama_cpp_config config_;
  std::int32_t n_layer_ = 0;
  std::int32_t n_head_ = 0;
  std::int32_t n_ctx_ = 0;
  std::int32_t n_ctx_seq_ = 0;
  std::int32_t n_ubatch_ = 0;
  std::vector<std::uint8_t> scored_;  // [n_layer] 1 = scored
  std::int32_t n_scored_ = 0;
  ggml_backend_sched_eval_callback chained_ = nullptr;
  void* chained_user_ = nullptr;
  std::vector<std::unique_ptr<sequence>> seqs_;

  // Capture state of the decode in flight.
  std::vector<float> scores_;           // [n_ubatch, n_ctx_seq] reduced rows
  std::vector<float> layer_row_;        // [n_ctx_seq] one token's head-reduced row
  std::vector<std::int32_t> cells_in_;  // [n_ubatch] cell of each token
  std::int32_t n_tokens_ = 0;
  std::int32_t last_tokens_ = 0;
  std::int32_t n_kv_ = 0;
  std::int32_t layers_seen_ = 0;
  bool idxs_seen_ = false;
  double capture_seconds_ = 0.0;
  std::string capture_error_;
  llama_cpp_timings timings_;
};

}  // namespace audiokv::engines

namespace audiokv {
using engines::llama_cpp_adapter;
using engines::llama_cpp_config;
using engines::llama_cpp_timings;
using engines::score_reduce;
}  // namespace audiokv
