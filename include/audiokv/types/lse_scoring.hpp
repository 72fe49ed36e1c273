// SPDX-License-Identifier: Apache-2.0
/// @file
/// One call of LSE scoring (core/lse.hpp): the decode queries of a batch of sequences, the
/// log-sum-exp the engine's attention kernel returned for each query row, and where each
/// sequence's cached K lives. Shared by the CPU driver (cpu/lse_scores.hpp) and the CUDA
/// launcher (cuda/launch/lse.cuh).
#pragma once

#include <cmath>
#include <cstdint>

#include "../core/gqa.hpp"
#include "../core/lse.hpp"
#include "../core/paged.hpp"
#include "../error.hpp"
#include "attention_shape.hpp"

namespace audiokv::types {

/// @brief Arguments of one LSE scoring call over `batch` sequences, one decode query row each.
/// Query head h of a sequence reads KV head h / shape.group_size() (GQA without repeating K).
/// Outputs, rows `stride()` floats apart: scores [batch, num_kv_heads, stride()] (each KV head's
/// group-reduced probability of its cells) and optionally probs [batch, num_q_heads, stride()].
/// Cells at and beyond a sequence's count are not written. Plain data; thread-safe to read.
struct lse_scoring {
  /// Heads and head_dim; num_cells is the capacity: the most cells any sequence may hold.
  attention_shape shape;
  /// Sequences (one query row each); 0 is a no-op.
  std::int32_t batch = 0;
  /// [batch, num_q_heads, head_dim] fp32 queries, RoPE already applied (as the kernel saw them).
  const float* q = nullptr;
  /// [batch, num_q_heads] fp32 log-sum-exp of each query row in `base`.
  const float* lse = nullptr;
  /// Where the K rows of each sequence live (paged CSR or contiguous).
  core::kv_batch_addressing kv{};
  /// Logit scale: s_j = scale * (q . k_j). Must be the scale the kernel used (usually
  /// core::attention_scale(head_dim)); 0 is refused, never replaced by a default.
  float scale = 0.0f;
  /// Base of `lse`. Value-initialised to no valid base: the caller must state it.
  core::lse_base base{};
  /// How a GQA group's query-head probabilities reduce to one score per cell.
  core::gqa_reduce mode = core::gqa_reduce::mean;
  /// Floats between output rows; 0 means shape.num_cells.
  std::int64_t row_stride = 0;

  /// Floats between output rows.
  std::int64_t stride() const { return row_stride == 0 ? shape.num_cells : row_stride; }

  /// Checks everything that can be checked without reading the arrays (which may live in device
  /// memory): shape, batch, pointers, scale, base, mode, strides and the layout form.
  /// @throws audiokv::error naming the first invalid field.
  void validate(const char* where) const {
    shape.validate(where);
    AUDIOKV_REQUIRE(batch >= 0, where, "batch", batch, "must be >= 0");
    AUDIOKV_REQUIRE(std::isfinite(scale) && scale > 0.0f, where, "scale", scale,
                    "must be finite and > 0 (the scale the attention kernel used; "
                    "core::attention_scale(head_dim) is 1/sqrt(head_dim))");
    AUDIOKV_REQUIRE(core::is_valid_base(base), where, "base", static_cast<int>(base),
                    "must be lse_base::natural or lse_base::two (the base of the kernel's LSE; "
                    "FlashInfer's FA2-style kernels return base two)");
    AUDIOKV_REQUIRE(mode == core::gqa_reduce::mean || mode == core::gqa_reduce::max, where, "mode",
                    static_cast<int>(mode), "must be gqa_reduce::mean or gqa_reduce::max");
    AUDIOKV_REQUIRE(row_stride == 0 || row_stride >= shape.num_cells, where, "row_stride",
                    row_stride, "must be 0 or >= shape.num_cells");
    AUDIOKV_REQUIRE(kv.entry_stride > 0, where, "kv.entry_stride", kv.entry_stride, "must be > 0");
    AUDIOKV_REQUIRE(kv.head_stride >= 0 && (shape.num_kv_heads == 1 || kv.head_stride > 0), where,
                    "kv.head_stride", kv.head_stride, "must be > 0 (>= 0 with one KV head)");
    if (batch == 0) return;
    AUDIOKV_REQUIRE(q != nullptr, where, "q", "nullptr",
                    "must hold [batch, num_q_heads, head_dim]");
    AUDIOKV_REQUIRE(lse != nullptr, where, "lse", "nullptr", "must hold [batch, num_q_heads]");
    if (kv.paged()) {
      AUDIOKV_REQUIRE(kv.page_size >= 1, where, "kv.page_size", kv.page_size, "must be >= 1");
      AUDIOKV_REQUIRE(kv.page_stride > 0, where, "kv.page_stride", kv.page_stride, "must be > 0");
      AUDIOKV_REQUIRE(kv.last_page_len != nullptr, where, "kv.last_page_len", "nullptr",
                      "must hold [batch] (paged form)");
      AUDIOKV_REQUIRE(kv.seq_lens == nullptr, where, "kv.seq_lens", "given",
                      "must be nullptr in the paged form (cell counts come from the table)");
    } else {
      AUDIOKV_REQUIRE(kv.seq_lens != nullptr, where, "kv.seq_lens", "nullptr",
                      "must hold [batch] cell counts (contiguous form; give indptr for pages)");
      AUDIOKV_REQUIRE(kv.indices == nullptr && kv.last_page_len == nullptr, where,
                      kv.indices != nullptr ? "kv.indices" : "kv.last_page_len", "given",
                      "must be nullptr without kv.indptr (contiguous form)");
      AUDIOKV_REQUIRE(batch == 1 || kv.seq_stride > 0, where, "kv.seq_stride", kv.seq_stride,
                      "must be > 0 for a batch of contiguous sequences");
    }
  }
};

}  // namespace audiokv::types

namespace audiokv {
using types::lse_scoring;
}  // namespace audiokv
