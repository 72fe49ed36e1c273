// SPDX-License-Identifier: Apache-2.0
/// @file
/// audiokv inside llama.cpp: decode-time eviction of a llama.cpp context's KV cells by any
/// audiokv policy. Needs llama.h (CMake: audiokv::llama_cpp); written against llama.cpp
/// 0c1e57098 (the tree vendored in llama-cpp-python 0.3.36), whose graph tensor names it reads.
///
/// How it works, per llama_decode (one sequence per call, or several in a unified cache):
///  - Scores. The context's eval callback sees every layer's attention probabilities, the
///    tensor `kq_soft_max-<layer>` (F32, ne = [n_kv, n_tokens, n_head, n_stream]; it exists
///    only with flash attention disabled). Its columns are KV *cell indices*, not positions.
///    The adapter reduces the chosen layers and query heads to one probability per cell and
///    token (llama_cpp_config::head_reduce, layer_reduce), in place on the host.
///  - Cells. The cell each new token is written to is read from the K store's index input
///    (`attn_inp_k_idxs`, src[1] of the layer's set_rows node). Per sequence the adapter keeps
///    the map policy slot (time order) -> position -> cell; llama.cpp fills freed cells lowest
///    first, so n_ctx need only be the budget plus a margin, not the stream length.
///  - Sliding-window models (Gemma 2/3: llama_model_n_swa() > 0). llama.cpp keeps two KV
///    caches, a full one for the global layers and a window one for the others, each with its
///    own cell indices; the window cache reuses the cells of positions that left the window.
///    The adapter keeps each position's cell in both, scores a position from every scored
///    layer's softmax in that layer's own cache (a window layer contributes to the positions
///    its window still holds, 0 to the others), and evicts a position from both caches at once
///    (llama_memory_seq_rm removes it from each). The budget governs the full cache; the window
///    cache stays llama.cpp's (its size is set by n_swa, not by the budget).
///  - Policy. One eviction_policy per sequence (any make_policy() name). After the decode
///    each token is appended (position, and the frame metadata of an audio span when the
///    engine marked one) and observes its attention row over the policy's cells.
///  - Eviction. evict() plans when the sequence holds more than its policy's budget (or, with
///    llama_cpp_config::eviction = trigger, when the policy's trigger fires) and removes the
///    evicted positions with llama_memory_seq_rm, one call per run of consecutive cached positions.
///    Positions never change (no seq_add). The newest position is never removed: llama.cpp
///    requires the next batch to start at seq_pos_max + 1, so when a plan drops the newest
///    cell, the cell leaves the policy at once and llama.cpp's cache after the next decode.
///
/// Scope: models whose memory is KV caches of attention layers (one, or a full and a window
/// cache). Recurrent and hybrid memories (llama_memory_seq_rm refuses partial removal) are
/// rejected at construction, as are contexts with flash attention not disabled (no softmax
/// tensor) or with pooled embeddings only.
#pragma once

#include <llama.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../registry.hpp"
#include "../span.hpp"
#include "llama_cpp_capture.hpp"
#include "llama_cpp_config.hpp"
#include "llama_cpp_sequence.hpp"

namespace audiokv::engines {

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
  ///         logits graph), "model" for a recurrent or hybrid model, "config.*" for a bad
  ///         configuration, and "llama_init_from_model" when
  ///         llama.cpp cannot create the context.
  llama_cpp_adapter(llama_model* model, llama_context_params params, llama_cpp_config config = {})
      : model_(model), config_(std::move(config)) {
    constexpr const char* where = "llama_cpp_adapter";
    AUDIOKV_REQUIRE(model != nullptr, where, "model", "null", "must be a loaded llama_model");
    AUDIOKV_REQUIRE(!llama_model_is_recurrent(model) && !llama_model_is_hybrid(model), where,
                    "model", "recurrent or hybrid",
                    "llama_memory_seq_rm cannot remove single positions from a recurrent state; "
                    "only attention-only models can be evicted");
    AUDIOKV_REQUIRE(params.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_DISABLED, where,
                    "params.flash_attn_type", llama_flash_attn_type_name(params.flash_attn_type),
                    "must be LLAMA_FLASH_ATTN_TYPE_DISABLED: with flash attention (AUTO enables "
                    "it on the CPU) llama.cpp builds no kq_soft_max tensor to score cells from");
    AUDIOKV_REQUIRE(!params.embeddings, where, "params.embeddings", "true",
                    "must be false (the adapter serves decoding)");
    n_layer_ = llama_model_n_layer(model);
    n_head_ = llama_model_n_head(model);
    config_.validate(n_layer_);
    capture_.select_layers(config_, n_layer_);
    capture_.chain(params.cb_eval, params.cb_eval_user_data);
    params.cb_eval = &llama_cpp_capture::eval_callback;
    params.cb_eval_user_data = &capture_;
    ctx_ = llama_init_from_model(model, params);
    AUDIOKV_REQUIRE(ctx_ != nullptr, where, "llama_init_from_model", "null",
                    "llama.cpp could not create the context (see its log)");
    n_ctx_ = static_cast<std::int32_t>(llama_n_ctx(ctx_));
    n_ctx_seq_ = static_cast<std::int32_t>(llama_n_ctx_seq(ctx_));
    n_ubatch_ = static_cast<std::int32_t>(llama_n_ubatch(ctx_));
    capture_.size(n_ctx_seq_, n_ubatch_);
    one_stream_ = params.kv_unified || llama_n_seq_max(ctx_) <= 1;
    token_seq_.assign(static_cast<std::size_t>(n_ubatch_), nullptr);
    batch_seqs_.reserve(llama_n_seq_max(ctx_));
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
    seqs_.push_back(std::make_unique<sequence>(seq, std::move(policy), n_ctx_seq_));
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
    require(seq, where).mark_audio(where, frames);
  }

  /// @brief llama_decode(batch), then every token is appended to its sequence's policy and
  /// observes its attention row. Each token belongs to one managed sequence, and each
  /// sequence's tokens lie at consecutive positions from its seq_pos_max + 1 in batch order
  /// (batch.pos may be null: llama.cpp then numbers them so); at most n_ubatch tokens (each
  /// token's softmax row is captured: one ubatch per call). Several sequences may share a
  /// decode when the context has one KV stream (params.kv_unified, or n_seq_max 1): llama.cpp
  /// then keeps the batch's order in one ubatch, and each token's row is scored over its own
  /// sequence's cells (the mask gives the others' cells probability 0).
  /// Does not evict; call evict() between decodes. No allocation.
  /// @return llama_decode's result; on a non-zero result nothing changed in the adapter.
  /// @throws audiokv::error naming "batch.n_tokens", "batch.seq_id[i]", "batch.pos[i]" or
  ///         "batch" (a policy has no room: evict first or raise its capacity) before
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
    check_batch(where, batch);

    capture_.begin(batch.n_tokens);
    const auto t0 = clock::now();
    const std::int32_t rc = llama_decode(ctx_, batch);
    const auto t1 = clock::now();
    capture_.end();
    if (rc != 0) return rc;
    timings_.decode += seconds(t0, t1);
    timings_.capture += capture_.seconds();
    ++timings_.decodes;
    timings_.tokens += batch.n_tokens;
    capture_.require_complete(where);

    const auto t2 = clock::now();
    for (std::int32_t t = 0; t < batch.n_tokens; ++t) {
      sequence& s = *token_seq_[static_cast<std::size_t>(t)];
      eviction_policy& p = *s.policy;
      frame_meta f = s.next_frame(config_.text_frame, s.pos_max + 1);
      p.append(&f, 1);
      const std::int32_t n = p.num_cells();
      for (std::int32_t c = 0; c < capture_.n_caches(); ++c) {
        const std::int32_t cell = capture_.cell(t, c);
        s.cells[c][static_cast<std::size_t>(n - 1)] = cell;
        s.writer[c][static_cast<std::size_t>(cell)] = s.pos_max + 1;
      }
      gather_row(s, t, n);
      p.observe(s.gather.data(), n);
      s.gathered = n;
      s.pos_max += 1;
    }
    const auto t3 = clock::now();
    timings_.observe += seconds(t2, t3);
    for (const batch_sequence& b : batch_seqs_) {
      sequence& s = *b.seq;
      if (s.deferred < 0) continue;
      // The newest cell a plan dropped: a newer position now exists, so it can go.
      remove_range(s, s.deferred, s.deferred + 1);
      s.deferred = -1;
    }
    return 0;
  }

  /// @brief When `seq` holds more cells than its policy's budget (llama_cpp_config::eviction
  /// budget: plan_to(budget)) or its policy's trigger fires (trigger: plan()), plans, removes
  /// the evicted positions from the context (llama_memory_seq_rm per run of consecutive cached
  /// positions) and apply(). No allocation (the plan and range list are reserved).
  /// @return the number of cells evicted (0 when there was nothing to evict).
  /// @throws audiokv::error naming "seq" when it is not managed.
  std::int32_t evict(llama_seq_id seq) {
    sequence& s = require(seq, "llama_cpp_adapter::evict");
    const bool by_budget = config_.eviction == eviction_rule::budget;
    if (by_budget ? s.policy->num_cells() <= s.policy->budget() : !s.policy->wants_eviction())
      return 0;
    const auto t0 = clock::now();
    if (by_budget) {
      s.policy->plan_to(s.policy->budget(), s.plan);
    } else {
      s.policy->plan(s.plan);
    }
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
  /// [policy(seq).num_cells()] the cell in KV cache `cache` of each policy slot (time order),
  /// parallel to policy(seq).positions(). A model with sliding-window layers has two caches
  /// (n_caches()); cache 0 holds layer 0. In the window cache a slot's cell may since hold a
  /// newer position (llama.cpp reuses the cells of positions that left the window).
  /// @throws audiokv::error naming "seq", or "cache" outside [0, n_caches()).
  span<const std::int32_t> cells(llama_seq_id seq, std::int32_t cache = 0) const {
    constexpr const char* where = "llama_cpp_adapter::cells";
    const sequence& s = require(seq, where);
    require_cache(cache, where);
    return span<const std::int32_t>(s.cells[cache].data(),
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
  /// The last decode's reduced attention row of token `t` over the cells of KV cache `cache`:
  /// [n_kv(cache)] floats, before the layer mean's division (with head mean, a row sums to
  /// the number of scored layers writing to that cache). For tests and diagnostics.
  /// @throws audiokv::error naming "t" outside the last decode's tokens, or "cache".
  span<const float> last_row(std::int32_t t, std::int32_t cache = 0) const {
    constexpr const char* where = "llama_cpp_adapter::last_row";
    const std::int32_t tokens = capture_.last_tokens();
    AUDIOKV_REQUIRE(t >= 0 && t < tokens, where, "t", t,
                    ::audiokv::detail::describe("must lie in [0, ", tokens, ")").c_str());
    require_cache(cache, where);
    return span<const float>(capture_.row(t, cache),
                             static_cast<std::size_t>(capture_.n_kv(cache)));
  }
  /// The scores the policy of `seq` observed for the last token decoded: one per slot, in the
  /// slot order of that moment (before any evict() since). For tests and diagnostics.
  /// @throws audiokv::error naming "seq".
  span<const float> last_scores(llama_seq_id seq) const {
    const sequence& s = require(seq, "llama_cpp_adapter::last_scores");
    return span<const float>(s.gather.data(), static_cast<std::size_t>(s.gathered));
  }
  /// Columns of cache `cache`'s softmax in the last decode (llama.cpp's n_kv: used cells
  /// rounded up to 256; 0 when no scored layer writes to it).
  std::int32_t n_kv(std::int32_t cache = 0) const noexcept {
    return cache >= 0 && cache < capture_.n_caches() ? capture_.n_kv(cache) : 0;
  }
  /// KV caches the model's attention layers write to: 1, or 2 with sliding-window layers (a
  /// full and a window cache). Known after the first decode (0 before).
  std::int32_t n_caches() const noexcept { return capture_.n_caches(); }
  /// Number of layers whose softmax is captured.
  std::int32_t scored_layers() const noexcept { return capture_.scored_layers(); }
  /// Accumulated timings.
  const llama_cpp_timings& timings() const noexcept { return timings_; }
  /// Zeroes the timings.
  void reset_timings() noexcept { timings_ = llama_cpp_timings{}; }

 private:
  using clock = std::chrono::steady_clock;
  using sequence = llama_cpp_sequence;
  static double seconds(clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }

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

  void require_cache(std::int32_t cache, const char* where) const {
    AUDIOKV_REQUIRE(
        cache >= 0 && cache < capture_.n_caches(), where, "cache", cache,
        ::audiokv::detail::describe("must lie in [0, n_caches() = ", capture_.n_caches(), ")")
            .c_str());
  }

  // Fills token_seq_ and batch_seqs_ for `batch` and checks it before decoding: every token
  // in one managed sequence, several sequences only in one KV stream, and each sequence's
  // tokens by llama_cpp_sequence::check_tokens.
  void check_batch(const char* where, const llama_batch& batch) {
    const bool ids = batch.seq_id != nullptr && batch.n_seq_id != nullptr;
    batch_seqs_.clear();
    // AUDIOKV_REQUIRE evaluates the argument's name only when the check fails: no allocation.
    for (std::int32_t t = 0; t < batch.n_tokens; ++t) {
      AUDIOKV_REQUIRE(!ids || batch.n_seq_id[t] == 1, where,
                      ::audiokv::detail::indexed("batch.seq_id", t), batch.n_seq_id[t],
                      "each token must belong to one sequence (a token shared by several has "
                      "one cell, which no single policy may evict)");
      const llama_seq_id id = ids ? batch.seq_id[t][0] : 0;
      sequence* s = find(id);
      AUDIOKV_REQUIRE(s != nullptr, where, ::audiokv::detail::indexed("batch.seq_id", t), id,
                      "is not a managed sequence");
      auto in_batch = std::find_if(batch_seqs_.begin(), batch_seqs_.end(),
                                   [s](const batch_sequence& b) { return b.seq == s; });
      if (in_batch == batch_seqs_.end()) {
        AUDIOKV_REQUIRE(batch_seqs_.empty() || one_stream_, where,
                        ::audiokv::detail::indexed("batch.seq_id", t), id,
                        "several sequences in one decode need one KV stream "
                        "(params.kv_unified): with a stream per sequence llama.cpp reorders "
                        "the batch's tokens");
        in_batch = batch_seqs_.insert(batch_seqs_.end(), batch_sequence{s, t, 0});
      }
      ++in_batch->count;
      token_seq_[static_cast<std::size_t>(t)] = s;
    }
    llama_memory_t mem = llama_get_memory(ctx_);
    for (const batch_sequence& b : batch_seqs_)
      b.seq->check_tokens(where, batch, b.first, b.count, llama_memory_seq_pos_max(mem, b.seq->id));
  }

  // s.gather[j] = slot j's score from token t's rows: per cache, the row at the slot's cell
  // while the slot's position is its writer (the window cache reuses cells of positions that
  // left the window) and the cell lies among the softmax's columns; over the caches the sum of
  // row / scored layers (layer mean) or the max (layer max).
  void gather_row(sequence& s, std::int32_t t, std::int32_t n) {
    const bool layer_max = config_.layer_reduce == score_reduce::max;
    const float layer_scale =
        layer_max ? 1.0f : 1.0f / static_cast<float>(capture_.scored_layers());
    const std::int32_t* pos = s.policy->positions();
    std::fill(s.gather.begin(), s.gather.begin() + n, 0.0f);
    for (std::int32_t c = 0; c < capture_.n_caches(); ++c) {
      if (!capture_.scored(c)) continue;
      const float* row = capture_.row(t, c);
      const std::int32_t n_kv = capture_.n_kv(c);
      const std::int32_t* cell = s.cells[c].data();
      const llama_pos* writer = s.writer[c].data();
      for (std::int32_t j = 0; j < n; ++j) {
        const std::int32_t x = cell[j];
        if (x >= n_kv || writer[x] != pos[j]) continue;
        float& g = s.gather[static_cast<std::size_t>(j)];
        g = layer_max ? std::max(g, row[x]) : g + row[x] * layer_scale;
      }
    }
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
    const std::int32_t n_evicted = static_cast<std::int32_t>(s.plan.evict.size());
    if (!s.plan_ranges()) return 0;
    const std::int32_t n = s.policy->num_cells();
    const bool newest = s.plan.evict.back() == n - 1;
    const llama_pos newest_pos = s.policy->positions()[n - 1];
    for (const auto& r : s.ranges) remove_range(s, r.first, r.second);
    const auto t0 = clock::now();
    s.apply_plan(capture_.n_caches());
    timings_.plan += seconds(t0, clock::now());
    if (newest) s.deferred = newest_pos;
    ++timings_.evictions;
    timings_.evicted += n_evicted;
    return n_evicted;
  }

  llama_model* model_ = nullptr;
  llama_context* ctx_ = nullptr;
  llama_cpp_config config_;
  std::int32_t n_layer_ = 0;
  std::int32_t n_head_ = 0;
  std::int32_t n_ctx_ = 0;
  std::int32_t n_ctx_seq_ = 0;
  std::int32_t n_ubatch_ = 0;
  std::vector<std::unique_ptr<sequence>> seqs_;
  // One KV stream (a unified cache, or one sequence): llama.cpp then keeps a batch's tokens in
  // order in one ubatch, so one decode may carry several sequences.
  bool one_stream_ = true;
  // A sequence of the decode in flight: its first token's index and how many it has.
  struct batch_sequence {
    sequence* seq;
    std::int32_t first;
    std::int32_t count;
  };
  std::vector<sequence*> token_seq_;        // [n_ubatch] the sequence of each token
  std::vector<batch_sequence> batch_seqs_;  // [n_seq_max] the decode's sequences, first first
  llama_cpp_capture capture_;               // the attention and cells of the decode in flight

  llama_cpp_timings timings_;
};

}  // namespace audiokv::engines

namespace audiokv {
using engines::llama_cpp_adapter;
}  // namespace audiokv
