// SPDX-License-Identifier: Apache-2.0
/// @file
/// One sequence of the llama.cpp adapter: its policy, the map policy slot -> KV cell (one per
/// KV cache), the audio frames the engine marked, and the position ranges a plan removes from
/// the context.
/// Needs llama.h (for llama_seq_id and llama_pos).
#pragma once

#include <llama.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../registry.hpp"
#include "../span.hpp"
#include "llama_cpp_config.hpp"

namespace audiokv::engines {

/// @brief A sequence under an eviction policy: the policy (time-ordered slots), the KV cell of
/// each slot in each of the model's KV caches, and the buffers of its decode and eviction
/// steps, sized once for the policy's capacity.
struct llama_cpp_sequence {
  /// Takes `policy` for sequence `seq_id`; sizes every buffer for policy->capacity(), and the
  /// cells' writers for `n_cells` cells per cache (llama_n_ctx_seq).
  llama_cpp_sequence(llama_seq_id seq_id, std::unique_ptr<eviction_policy> p, std::int32_t n_cells)
      : id(seq_id), policy(std::move(p)) {
    for (auto& c : cells) c.assign(static_cast<std::size_t>(policy->capacity()), -1);
    for (auto& w : writer) w.assign(static_cast<std::size_t>(n_cells), -1);
    gather.assign(static_cast<std::size_t>(policy->capacity()), 0.0f);
    plan.reserve(policy->capacity());
    ranges.reserve(static_cast<std::size_t>(policy->capacity()));
  }

  llama_seq_id id = 0;                      ///< the sequence
  std::unique_ptr<eviction_policy> policy;  ///< its policy
  /// [cache][capacity] the KV cell of each slot in each cache (llama_cpp_max_caches)
  std::vector<std::int32_t> cells[llama_cpp_max_caches];
  /// [cache][cell] the position of this sequence written to each cell last, -1 none: a slot
  /// reads its cell only while it is the writer (a window cache reuses the cells of positions
  /// that left the window; another sequence's token in a shared cell is masked in this
  /// sequence's rows anyway).
  std::vector<llama_pos> writer[llama_cpp_max_caches];
  std::vector<float> gather;                            ///< [capacity] a row in slot order
  std::int32_t gathered = 0;                            ///< slots of the last row gathered
  eviction_plan plan;                                   ///< the plan being carried out
  std::vector<std::pair<llama_pos, llama_pos>> ranges;  ///< [p0, p1) the plan removes
  std::vector<frame_meta> audio;                        ///< marked frames, ascending positions
  std::size_t audio_next = 0;                           ///< first marked frame not yet decoded
  llama_pos pos_max = -1;                               ///< newest decoded position
  llama_pos deferred = -1;  ///< newest position a plan dropped, removed after the next decode

  /// Checks `frames` (ascending positions beyond every decoded or marked one, voice in [0, 1],
  /// speaker >= 0; throws from `where` naming "frames[i].pos" / ".voice" / ".speaker", nothing
  /// marked then), then marks them.
  void mark_audio(const char* where, span<const frame_meta> frames) {
    llama_pos last = std::max(pos_max, audio.empty() ? -1 : audio.back().pos);
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
    audio.insert(audio.end(), frames.begin(), frames.end());
  }

  /// Checks this sequence's tokens of a batch (those whose seq_id is `id`; `first` the index
  /// of the first, `count` how many): the context's newest position `mem_max` equal to
  /// pos_max, positions (when given) consecutive from pos_max + 1 in batch order, and room in
  /// the policy; throws from `where` naming "batch.seq_id[first]", "batch.pos[i]" or "batch".
  void check_tokens(const char* where, const llama_batch& batch, std::int32_t first,
                    std::int32_t count, llama_pos mem_max) const {
    AUDIOKV_REQUIRE(mem_max == pos_max, where, ::audiokv::detail::indexed("batch.seq_id", first),
                    id,
                    ::audiokv::detail::describe("the context holds positions up to ", mem_max,
                                                " but the adapter decoded up to ", pos_max,
                                                ": the sequence was changed outside the adapter")
                        .c_str());
    if (batch.pos != nullptr) {
      llama_pos next = pos_max + 1;
      for (std::int32_t i = first; i < batch.n_tokens; ++i) {
        if (batch.seq_id != nullptr && batch.seq_id[i][0] != id) continue;
        AUDIOKV_REQUIRE(batch.pos[i] == next, where, ::audiokv::detail::indexed("batch.pos", i),
                        batch.pos[i],
                        ::audiokv::detail::describe("must be ", next,
                                                    " (consecutive from seq_pos_max + 1 in "
                                                    "batch order; positions never change)")
                            .c_str());
        ++next;
      }
    }
    const std::int64_t room = static_cast<std::int64_t>(policy->capacity()) - policy->num_cells();
    AUDIOKV_REQUIRE(
        count <= room, where, "batch", count,
        ::audiokv::detail::describe("tokens of sequence ", id, " exceed its policy's free slots (",
                                    room, " of capacity ", policy->capacity(),
                                    "): call evict() first or raise the capacity")
            .c_str());
  }

  /// The frame of position `pos` (ascending from call to call): the marked frame there, else
  /// `text_frame` at that position.
  frame_meta next_frame(const frame_meta& text_frame, llama_pos pos) {
    while (audio_next < audio.size() && audio[audio_next].pos < pos) ++audio_next;
    frame_meta f = text_frame;
    if (audio_next < audio.size() && audio[audio_next].pos == pos) f = audio[audio_next++];
    f.pos = pos;
    return f;
  }

  /// Fills `ranges` with the position ranges `plan` removes from the context now: one per run
  /// of consecutive evicted slots (the positions between two neighbouring slots are no longer
  /// in the context), without the newest position, which stays until the next decode.
  /// @return false when the plan evicts nothing.
  bool plan_ranges() {
    ranges.clear();
    if (plan.evict.empty()) return false;
    const std::int32_t n = policy->num_cells();
    const std::int32_t* pos = policy->positions();
    std::size_t i = 0;
    while (i < plan.evict.size()) {
      std::size_t j = i;
      while (j + 1 < plan.evict.size() && plan.evict[j + 1] == plan.evict[j] + 1) ++j;
      std::int32_t last = plan.evict[j];
      if (last == n - 1) --last;  // the newest position stays in the context (deferred)
      if (last >= plan.evict[i]) ranges.emplace_back(pos[plan.evict[i]], pos[last] + 1);
      i = j + 1;
    }
    return true;
  }

  /// Applies `plan` to the policy and moves each kept slot's cells in the first `n_caches`
  /// caches by the plan's move map.
  void apply_plan(std::int32_t n_caches) {
    const std::int32_t n = policy->num_cells();
    policy->apply(plan);
    for (std::int32_t c = 0; c < n_caches; ++c) {
      std::vector<std::int32_t>& cell = cells[c];
      for (std::int32_t k = 0; k < n; ++k) {
        const std::int32_t to = plan.move_to[static_cast<std::size_t>(k)];
        if (to >= 0) cell[static_cast<std::size_t>(to)] = cell[static_cast<std::size_t>(k)];
      }
    }
  }
};

}  // namespace audiokv::engines
