// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <audiokv/types/pool_split.hpp>
#include <cstdint>
#include <vector>

namespace asr {

/// @brief What a hook learns once per clip, before the first decode step.
struct clip_context {
  int n_layers = 0;
  int n_heads = 0;
  int head_dim = 0;
  int n_frames = 0;                   ///< cached frames = initial cells per head
  int n_speech_frames = 0;            ///< N_a = ceil(50 * duration): frames that carry audio
  int n_audio_ctx = 0;                ///< encoder positions of the window (1500)
  const uint8_t* is_voice = nullptr;  ///< [n_frames], 1 where the energy VAD found voice (0 on
                                      ///< padding)
  /// Alignment heads from config.json, (layer, head) pairs: the heads that track word timing.
  const std::vector<std::pair<int, int>>* alignment_heads = nullptr;
};

/// @brief Read-only view of one (layer, head) of the cross-attention cache.
/// Invariant: pos[0..n_kv) is strictly increasing (kept cells stay in time order) and each
/// pos is an original encoder frame index in [0, n_frames).
struct head_view {
  int layer = 0;
  int head = 0;
  int n_kv = 0;  ///< cells currently kept
  int head_dim = 0;
  const float* k = nullptr;      ///< [n_kv, head_dim] row-major
  const float* v = nullptr;      ///< [n_kv, head_dim]
  const int32_t* pos = nullptr;  ///< [n_kv] original frame index of each cell
};

/// @brief One decode step as seen by one (layer, head).
struct step_view {
  head_view cache;
  int step = 0;              ///< decoder position of the input token (0 = <|startoftranscript|>)
  bool is_prompt = false;    ///< the input token belongs to the fixed prompt
  const float* q = nullptr;  ///< [head_dim] query of this head, unscaled
  const float* probs = nullptr;  ///< [n_kv] softmax(q K^T / sqrt(head_dim)) over kept cells
};

/// @brief Eviction hook over the decoder's cross-attention KV, one decision per (layer, head).
///
/// Call order per clip: on_clip_start(clip); on_head_start(view) for every (layer, head);
/// then for every decoder step and layer, for each head h = 0..n_heads-1: the attention output
/// is computed with the current cells, then on_step(view, move_to). If it returns true,
/// `move_to` (size n_kv) gives the new slot of each cell or -1 to evict it; the kept cells must
/// map to 0, 1, 2, ... in their current order (time order is preserved). The cache then
/// compacts K, V and pos rows with byte-exact copies; the next step sees the smaller cache.
/// A move map that keeps every cell in place reports pool changes only (see tiers()).
/// After the last head of the layer, for each head h = 0..n_heads-1: on_layer_step(layer, h,
/// move_to), with the same contract as on_step's move map (a hook that plans a layer's heads
/// together hands out their moves there). Every move map returned by on_step, on_layer_step or
/// on_reveal is followed by on_move for that (layer, head), then by the compaction.
/// on_token(step, token) follows each step whose logits chose a token; on_clip_end() ends a clip.
class kv_eviction_hook {
 public:
  virtual ~kv_eviction_hook() = default;
  virtual void on_clip_start(const clip_context& /*clip*/) {}
  virtual void on_head_start(const head_view& /*view*/) {}
  virtual bool on_step(const step_view& view, std::vector<int32_t>& move_to) = 0;
  /// After every head of `layer` ran on_step at this step (their attention outputs are
  /// computed), once per head in head order: return true with a move map for (layer, head), as
  /// on_step would, to evict cells planned for the layer as a whole. Default: none.
  virtual bool on_layer_step(int /*layer*/, int /*head*/, std::vector<int32_t>& /*move_to*/) {
    return false;
  }
  /// Streaming: `incoming` frames are about to enter (layer, head); return true with a move
  /// map (as on_step) to evict first, so the policy's budget holds at every moment.
  virtual bool on_reveal(const head_view& /*view*/, int /*incoming*/,
                         std::vector<int32_t>& /*move_to*/) {
    return false;
  }
  /// After on_step, on_layer_step or on_reveal returned true and before the cache compacts (layer,
  /// head): the hook may rewrite the K/V rows in their current slots (merge on evict folds evicted
  /// rows into the kept rows that stand for them). k, v: [n_kv, head_dim]; pos: [n_kv].
  virtual void on_move(int /*layer*/, int /*head*/, float* /*k*/, float* /*v*/,
                       const int32_t* /*pos*/, int /*n_kv*/, int /*head_dim*/) {}
  /// Streaming: frames at slots [view.n_kv - count, view.n_kv) were appended (positions from
  /// `first`).
  virtual void on_append(const head_view& /*view*/, int /*first*/, int /*count*/) {}
  /// [n_kv] pool of each cell of (layer, head) after the last on_step, or null when the policy
  /// has a single pool; an int8 buffer arena keeps rows in full precision only outside the
  /// buffer pool.
  virtual const audiokv::pool_tier* tiers(int /*layer*/, int /*head*/) const { return nullptr; }
  /// [n_kv] additive attention-logit bias of the cells of (layer, head) (log of the cells
  /// each kept cell stands for), or null for none.
  virtual const float* logit_bias(int /*layer*/, int /*head*/) const { return nullptr; }
  virtual void on_token(int /*step*/, int32_t /*token*/) {}
  virtual void on_clip_end() {}
};

/// @brief The full-cache reference: never evicts.
class keep_all_hook final : public kv_eviction_hook {
 public:
  bool on_step(const step_view& /*view*/, std::vector<int32_t>& /*move_to*/) override {
    return false;
  }
};

}  // namespace asr
