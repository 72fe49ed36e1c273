// SPDX-License-Identifier: Apache-2.0
/// @file
/// What the llama.cpp adapter captures and how it reduces it (llama_cpp_config), and the time
/// it spends in each part (llama_cpp_timings). Needs no llama.cpp header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../types/frame.hpp"

namespace audiokv::engines {

/// The most KV caches a model's attention layers write to: one, or with sliding-window layers
/// (Gemma 2/3) a full cache and a window cache, each with its own cell indices.
inline constexpr std::int32_t llama_cpp_max_caches = 2;

/// How the query heads of a layer, or the scored layers, are reduced to one score per cell.
enum class score_reduce : std::uint8_t {
  mean = 0,  ///< the mean probability (each token's row still sums to 1)
  max = 1    ///< the largest probability (a cell one head relies on counts in full)
};

/// When llama_cpp_adapter::evict() evicts.
enum class eviction_rule : std::uint8_t {
  /// Whenever the sequence holds more cells than its policy's budget, down to the budget
  /// (plan_to(budget)): after every evict() each policy holds at most its budget, so policies
  /// compared at one budget hold the same memory.
  budget = 0,
  /// When the policy's own trigger fires (plan()): AudioKV evicts at config.trigger (90%) of
  /// its budget, below it by its entropy-driven ratio, so it holds fewer cells than its budget
  /// on average; a baseline evicts above its budget, to it (the same as `budget`).
  trigger = 1
};

/// @brief What the adapter captures and how it reduces it, and when it evicts.
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
  /// Metadata of positions outside every audio span (text tokens): speaker 0, voiced,
  /// frame_flag_text, so the speech rules (coverage floor, alignment frontier) leave text
  /// cells to their scores (a text-only stream is ranked by attention alone). Its `pos` is
  /// ignored.
  frame_meta text_frame{0, 0, 1.0f, frame_flag_text, 0.0f};
  /// When evict() evicts. budget: chosen on the dev text (Exodus 3-14, 1024 tokens, AudioKV at
  /// 128 cells: perplexity 17.64 against 18.18 with the trigger, which held 8-9% fewer cells;
  /// benchmarks/results/llm_dev_text.jsonl).
  eviction_rule eviction = eviction_rule::budget;

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
    AUDIOKV_REQUIRE(eviction == eviction_rule::budget || eviction == eviction_rule::trigger, where,
                    "config.eviction", static_cast<int>(eviction), "must be budget or trigger");
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

}  // namespace audiokv::engines

namespace audiokv {
using engines::eviction_rule;
using engines::llama_cpp_config;
using engines::llama_cpp_timings;
using engines::score_reduce;
}  // namespace audiokv
