// SPDX-License-Identifier: Apache-2.0
/// @file
/// LSE scoring on the CPU: per-cell probabilities p = base^(scale q.k - lse) (core/lse.hpp) for a
/// batch of decode query rows against contiguous or paged K, GQA-reduced per KV head in the same
/// pass (K is read once per KV head, never repeated per query head). The oracle of the CUDA
/// kernel (cuda/launch/lse.cuh), and observe_lse(), which folds the scores straight into the
/// policies of a batch. Plain loops, no Eigen; never allocates.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/attention.hpp"
#include "../core/gqa.hpp"
#include "../core/lse.hpp"
#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../policy/eviction_policy.hpp"
#include "../types/lse_scoring.hpp"
#include "paged.hpp"

namespace audiokv::cpu {

namespace detail {

/// Checks the host arrays of `s`: the page table (or cell counts), every addressed K row inside
/// [0, k_elements), each sequence within the capacity, q and lse finite where they are read.
inline void validate_lse_arrays(const char* where, const lse_scoring& s, const float* k,
                                std::int64_t k_elements) {
  s.validate(where);
  if (s.batch == 0) return;
  const core::kv_batch_addressing& kv = s.kv;
  const std::int64_t row_span =
      static_cast<std::int64_t>(s.shape.num_kv_heads - 1) * kv.head_stride + s.shape.head_dim;
  if (kv.paged()) {
    validate_page_table(where, kv.indices, kv.indptr, kv.last_page_len, s.batch, kv.page_size);
    const std::int64_t page_span =
        static_cast<std::int64_t>(kv.page_size - 1) * kv.entry_stride + row_span;
    for (std::int32_t i = 0; i < kv.indptr[s.batch]; ++i) {
      const std::int64_t p = kv.indices[i];
      AUDIOKV_REQUIRE(p >= 0 && p * kv.page_stride + page_span <= k_elements, where,
                      ::audiokv::detail::indexed("kv.indices", i), p,
                      ::audiokv::detail::describe("must be a page inside k (page_stride ",
                                                  kv.page_stride, ", k_elements ", k_elements, ")")
                          .c_str());
    }
  }
  std::int64_t total_cells = 0;
  for (std::int32_t b = 0; b < s.batch; ++b) {
    if (!kv.paged()) {
      AUDIOKV_REQUIRE(kv.seq_lens[b] >= 0, where, ::audiokv::detail::indexed("kv.seq_lens", b),
                      kv.seq_lens[b], "must be >= 0");
    }
    const std::int32_t n = kv.num_cells(b);
    AUDIOKV_REQUIRE(n <= s.shape.num_cells, where,
                    kv.paged() ? ::audiokv::detail::indexed("kv.indptr", b + 1)
                               : ::audiokv::detail::indexed("kv.seq_lens", b),
                    n,
                    ::audiokv::detail::describe("gives more cells than shape.num_cells (",
                                                s.shape.num_cells, ")")
                        .c_str());
    total_cells += n;
    if (!kv.paged() && n > 0) {
      const std::int64_t last = kv.sequence_offset(b) + (n - 1) * kv.entry_stride + row_span;
      AUDIOKV_REQUIRE(
          last <= k_elements, where, ::audiokv::detail::indexed("kv.seq_lens", b), n,
          ::audiokv::detail::describe("addresses rows beyond k_elements (", k_elements, ")")
              .c_str());
    }
    if (n == 0) continue;
    const std::int64_t q_rows = static_cast<std::int64_t>(b) * s.shape.num_q_heads;
    for (std::int32_t h = 0; h < s.shape.num_q_heads; ++h) {
      const float l = s.lse[q_rows + h];
      AUDIOKV_REQUIRE(std::isfinite(l), where, ::audiokv::detail::indexed("lse", q_rows + h), l,
                      "must be finite for a sequence with cells");
      const float* qh = s.q + (q_rows + h) * s.shape.head_dim;
      for (std::int32_t d = 0; d < s.shape.head_dim; ++d)
        AUDIOKV_REQUIRE(std::isfinite(qh[d]), where,
                        ::audiokv::detail::indexed("q", (q_rows + h) * s.shape.head_dim + d), qh[d],
                        "must be finite");
    }
  }
  AUDIOKV_REQUIRE(total_cells == 0 || k != nullptr, where, "k", "nullptr",
                  "must hold the K rows the table addresses");
}

}  // namespace detail

/// @brief Per-cell probabilities of one decode step from the engine's LSE, GQA-reduced:
/// for sequence b, query head r = h * G + g of KV head h and cell j < n_b,
///   p[b, r, j] = core::lse_probability(core::cell_logit(q[b, r] . k_b[j, h], scale, 0),
///                                      lse[b, r], base)
///   scores[b, h, j] = group_finish(group_fold over g of p[b, h G + g, j])
/// @param s          the call (see types::lse_scoring); s.q, s.lse and the table in host memory
/// @param k          fp32 K pool (paged) or tensor (contiguous), rows addressed by s.kv with unit
///                   dim stride
/// @param k_elements floats in k; every addressed row must lie inside
/// @param scores     [batch, num_kv_heads, s.stride()] or nullptr
/// @param probs      [batch, num_q_heads, s.stride()] per query head, or nullptr
/// @param row_mass   [batch, num_q_heads] sum_j p of each row, or nullptr: 1 (to rounding) when
///                   the LSE covers exactly these cells with this q and scale
/// @throws audiokv::error naming the first invalid argument (nothing is written then).
inline void lse_scores(const lse_scoring& s, const float* k, std::int64_t k_elements, float* scores,
                       float* probs = nullptr, float* row_mass = nullptr) {
  const char* where = "cpu::lse_scores";
  AUDIOKV_REQUIRE(scores != nullptr || probs != nullptr || row_mass != nullptr, where, "scores",
                  "nullptr", "must be given unless probs or row_mass is");
  detail::validate_lse_arrays(where, s, k, k_elements);
  const std::int32_t hq = s.shape.num_q_heads;
  const std::int32_t hkv = s.shape.num_kv_heads;
  const std::int32_t group = s.shape.group_size();
  const std::int32_t dim = s.shape.head_dim;
  const std::int64_t stride = s.stride();
  for (std::int32_t b = 0; b < s.batch; ++b) {
    const std::int32_t n = s.kv.num_cells(b);
    const core::kv_addressing addr = s.kv.sequence(b);
    const float* k_b = k + s.kv.sequence_offset(b);
    const float* q_b = s.q + static_cast<std::int64_t>(b) * hq * dim;
    const float* lse_b = s.lse + static_cast<std::int64_t>(b) * hq;
    float* mass_b = row_mass != nullptr ? row_mass + static_cast<std::int64_t>(b) * hq : nullptr;
    if (mass_b != nullptr)
      for (std::int32_t r = 0; r < hq; ++r) mass_b[r] = 0.0f;
    for (std::int32_t h = 0; h < hkv; ++h) {
      float* score_row =
          scores != nullptr ? scores + (static_cast<std::int64_t>(b) * hkv + h) * stride : nullptr;
      for (std::int32_t j = 0; j < n; ++j) {
        const float* row = k_b + addr.row_offset(j, h);
        float acc = 0.0f;
        for (std::int32_t g = 0; g < group; ++g) {
          const std::int32_t r = h * group + g;
          const float* qr = q_b + static_cast<std::int64_t>(r) * dim;
          float dot = 0.0f;
          for (std::int32_t d = 0; d < dim; ++d) dot += qr[d] * row[d];
          const float p =
              core::lse_probability(core::cell_logit(dot, s.scale, 0.0f), lse_b[r], s.base);
          if (probs != nullptr) probs[(static_cast<std::int64_t>(b) * hq + r) * stride + j] = p;
          if (mass_b != nullptr) mass_b[r] += p;
          acc = core::group_fold(acc, p, g, s.mode);
        }
        if (score_row != nullptr) score_row[j] = core::group_finish(acc, group, s.mode);
      }
    }
  }
}

/// Floats of the workspace observe_lse() needs: the batch's scores and row masses.
inline std::size_t observe_lse_workspace_floats(const lse_scoring& s) {
  const auto batch = static_cast<std::size_t>(s.batch > 0 ? s.batch : 0);
  return batch * static_cast<std::size_t>(s.shape.num_kv_heads) *
             static_cast<std::size_t>(s.stride() > 0 ? s.stride() : 0) +
         batch * static_cast<std::size_t>(s.shape.num_q_heads);
}

/// @brief One decode step of a batch fed to its policies straight from the LSE: computes the
/// group-reduced scores of every (sequence, KV head) into `workspace` (the only [heads, cells]
/// array materialised), checks them, then calls policies[b * num_kv_heads + h]->observe() with
/// its row. Either every policy observes or none does.
/// @param policies       [batch * num_kv_heads] one policy per (sequence, KV head); each must
///                       hold exactly the sequence's cells, in the order of its K rows
/// @param mass_tolerance >= 0: every query row's probabilities must sum to 1 within it (an LSE
///                       of another base, scale or cell set fails here instead of skewing the
///                       policies); < 0: only finiteness is checked (for K that is a subset of
///                       what the kernel attended)
/// @param workspace      [observe_lse_workspace_floats(s)] scratch
/// @throws audiokv::error naming the first invalid argument; no policy has changed then.
inline void observe_lse(const lse_scoring& s, const float* k, std::int64_t k_elements,
                        eviction_policy* const* policies, float mass_tolerance, float* workspace,
                        std::size_t workspace_floats) {
  const char* where = "cpu::observe_lse";
  s.validate(where);
  const std::size_t need = observe_lse_workspace_floats(s);
  AUDIOKV_REQUIRE(
      workspace != nullptr && workspace_floats >= need, where, "workspace_floats", workspace_floats,
      ::audiokv::detail::describe("must be >= observe_lse_workspace_floats (", need, ")").c_str());
  AUDIOKV_REQUIRE(s.batch == 0 || policies != nullptr, where, "policies", "nullptr",
                  "must hold batch * num_kv_heads policies");
  const std::int32_t hkv = s.shape.num_kv_heads;
  for (std::int32_t b = 0; b < s.batch; ++b) {
    for (std::int32_t h = 0; h < hkv; ++h) {
      const std::int64_t i = static_cast<std::int64_t>(b) * hkv + h;
      AUDIOKV_REQUIRE(policies[i] != nullptr, where, ::audiokv::detail::indexed("policies", i),
                      "nullptr", "must be a policy");
    }
  }
  float* scores = workspace;
  float* mass =
      workspace + static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(hkv) * s.stride();
  lse_scores(s, k, k_elements, scores, nullptr, mass);
  const std::int32_t hq = s.shape.num_q_heads;
  for (std::int32_t b = 0; b < s.batch; ++b) {
    const std::int32_t n = s.kv.num_cells(b);
    for (std::int32_t h = 0; h < hkv; ++h) {
      const std::int64_t i = static_cast<std::int64_t>(b) * hkv + h;
      AUDIOKV_REQUIRE(
          policies[i]->num_cells() == n, where,
          ::audiokv::detail::indexed("policies", i) + ".num_cells()", policies[i]->num_cells(),
          ::audiokv::detail::describe("must equal the sequence's cells (", n, ")").c_str());
    }
    if (n == 0) continue;
    for (std::int32_t r = 0; r < hq; ++r) {
      const std::int64_t row = static_cast<std::int64_t>(b) * hq + r;
      const float m = mass[row];
      AUDIOKV_REQUIRE(
          std::isfinite(m) && (mass_tolerance < 0.0f || std::fabs(m - 1.0f) <= mass_tolerance),
          where, ::audiokv::detail::indexed("lse", row), s.lse[row],
          ::audiokv::detail::describe("gives probabilities that sum to ", m,
                                      ", not 1 within mass_tolerance (", mass_tolerance,
                                      "): the LSE does not belong to this q, K, scale and base")
              .c_str());
    }
  }
  const std::int64_t stride = s.stride();
  for (std::int32_t b = 0; b < s.batch; ++b) {
    const std::int32_t n = s.kv.num_cells(b);
    for (std::int32_t h = 0; h < hkv; ++h) {
      const std::int64_t i = static_cast<std::int64_t>(b) * hkv + h;
      policies[i]->observe(scores + i * stride, n);
    }
  }
}

}  // namespace audiokv::cpu
