// SPDX-License-Identifier: Apache-2.0
/// @file
/// Test cases of LSE scoring: a batch of decode queries with K either contiguous ([batch,
/// capacity, kv_heads, dim]) or in a page pool laid out like FlashInfer (NHD [pages, P, heads,
/// dim] or HND [pages, heads, P, dim]) whose sequences own scattered, out-of-order pages, with
/// pages owned by nobody and page tails beyond last_page_len filled with NaN (a read of a hole
/// poisons the result). The reference is a full softmax in double: p = softmax(scale q.k) and
/// lse = logsumexp(scale q.k), in base e or 2.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include <audiokv/types/lse_scoring.hpp>

#include "xorshift.hpp"

namespace audiokv::test {

/// How the case stores K.
enum class lse_layout { contiguous, paged_nhd, paged_hnd };

/// One LSE scoring case with its double-precision reference.
struct lse_case {
  std::int32_t batch = 0, hq = 0, hkv = 0, dim = 0, capacity = 0, page_size = 1;
  lse_layout layout = lse_layout::contiguous;
  core::lse_base base = core::lse_base::natural;
  float scale = 0.0f;
  std::vector<std::int32_t> lens;  ///< [batch] cells per sequence
  std::vector<float> q;            ///< [batch, hq, dim]
  std::vector<float> k;            ///< pool or contiguous tensor
  std::vector<std::int32_t> indptr, indices, last_page_len;
  std::vector<float> lse;         ///< [batch, hq] in `base`, from double
  std::vector<double> ref_probs;  ///< [batch, hq, capacity]
  std::int64_t page_stride = 0, entry_stride = 0, head_stride = 0, seq_stride = 0;

  /// The call description of this case (outputs strided by capacity).
  lse_scoring scoring(core::gqa_reduce mode = core::gqa_reduce::mean) const {
    lse_scoring s;
    s.shape = attention_shape{hq, hkv, dim, capacity};
    s.batch = batch;
    s.q = q.data();
    s.lse = lse.data();
    s.scale = scale;
    s.base = base;
    s.mode = mode;
    s.kv.entry_stride = entry_stride;
    s.kv.head_stride = head_stride;
    if (layout == lse_layout::contiguous) {
      s.kv.seq_lens = lens.data();
      s.kv.seq_stride = seq_stride;
    } else {
      s.kv.indptr = indptr.data();
      s.kv.indices = indices.data();
      s.kv.last_page_len = last_page_len.data();
      s.kv.page_size = page_size;
      s.kv.page_stride = page_stride;
    }
    return s;
  }

  /// K element (cell, head, d) of sequence b.
  float& k_at(std::int32_t b, std::int32_t cell, std::int32_t head, std::int32_t d) {
    std::int64_t off = 0;
    if (layout == lse_layout::contiguous) {
      off = b * seq_stride + cell * entry_stride;
    } else {
      const std::int64_t page = indices[indptr[b] + cell / page_size];
      off = page * page_stride + (cell % page_size) * entry_stride;
    }
    return k[off + head * head_stride + d];
  }

  /// Reference probability of (b, query head r, cell j).
  double ref(std::int32_t b, std::int32_t r, std::int32_t j) const {
    return ref_probs[(static_cast<std::size_t>(b) * hq + r) * capacity + j];
  }
};

/// A random case: q, k ~ U(-amp, amp), sequence lengths in [0, capacity] (the first at least
/// one cell), pages scattered over a pool twice the size needed.
inline lse_case make_lse_case(std::uint64_t seed, lse_layout layout, core::lse_base base,
                              std::int32_t batch, std::int32_t hq, std::int32_t hkv,
                              std::int32_t dim, std::int32_t capacity, std::int32_t page_size,
                              float amp = 1.5f) {
  xorshift64 rng(seed);
  lse_case c;
  c.batch = batch;
  c.hq = hq;
  c.hkv = hkv;
  c.dim = dim;
  c.capacity = capacity;
  c.page_size = layout == lse_layout::contiguous ? 1 : page_size;
  c.layout = layout;
  c.base = base;
  c.scale = 1.0f / std::sqrt(static_cast<float>(dim));
  c.lens.resize(static_cast<std::size_t>(batch));
  for (std::int32_t b = 0; b < batch; ++b) c.lens[b] = b == 0 ? capacity : rng.range(0, capacity);
  c.q.resize(static_cast<std::size_t>(batch) * hq * dim);
  for (float& x : c.q) x = amp * (2.0f * rng.unit() - 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (layout == lse_layout::contiguous) {
    c.entry_stride = static_cast<std::int64_t>(hkv) * dim;
    c.head_stride = dim;
    c.seq_stride = static_cast<std::int64_t>(capacity) * c.entry_stride;
    c.k.assign(static_cast<std::size_t>(batch) * c.seq_stride, nan);  // cells >= len stay NaN
  } else {
    const std::int32_t P = c.page_size;
    std::int32_t needed = 0;
    c.indptr.push_back(0);
    for (std::int32_t b = 0; b < batch; ++b) {
      const std::int32_t np = (c.lens[b] + P - 1) / P;
      needed += np;
      c.indptr.push_back(needed);
      c.last_page_len.push_back(np > 0 ? c.lens[b] - (np - 1) * P : 0);
    }
    const std::int32_t pool_pages = 2 * needed + 1;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(pool_pages));
    std::iota(ids.begin(), ids.end(), 0);
    for (std::int32_t i = pool_pages - 1; i > 0; --i) std::swap(ids[i], ids[rng.range(0, i)]);
    c.indices.assign(ids.begin(), ids.begin() + needed);  // scattered and out of order
    c.page_stride = static_cast<std::int64_t>(P) * hkv * dim;
    if (layout == lse_layout::paged_nhd) {
      c.entry_stride = static_cast<std::int64_t>(hkv) * dim;
      c.head_stride = dim;
    } else {
      c.entry_stride = dim;
      c.head_stride = static_cast<std::int64_t>(P) * dim;
    }
    c.k.assign(static_cast<std::size_t>(pool_pages) * c.page_stride, nan);  // holes are NaN
  }
  for (std::int32_t b = 0; b < batch; ++b)
    for (std::int32_t j = 0; j < c.lens[b]; ++j)
      for (std::int32_t h = 0; h < hkv; ++h)
        for (std::int32_t d = 0; d < dim; ++d)
          c.k_at(b, j, h, d) = amp * (2.0f * rng.unit() - 1.0f);

  c.ref_probs.assign(static_cast<std::size_t>(batch) * hq * capacity, 0.0);
  c.lse.assign(static_cast<std::size_t>(batch) * hq, 0.0f);
  const std::int32_t group = hq / hkv;
  std::vector<double> logits(static_cast<std::size_t>(capacity));
  for (std::int32_t b = 0; b < batch; ++b) {
    for (std::int32_t r = 0; r < hq; ++r) {
      const std::int32_t n = c.lens[b];
      if (n == 0) continue;
      const float* qr = c.q.data() + (static_cast<std::size_t>(b) * hq + r) * dim;
      double m = -std::numeric_limits<double>::infinity();
      for (std::int32_t j = 0; j < n; ++j) {
        double dot = 0.0;
        for (std::int32_t d = 0; d < dim; ++d)
          dot += static_cast<double>(qr[d]) * static_cast<double>(c.k_at(b, j, r / group, d));
        logits[j] = static_cast<double>(c.scale) * dot;
        m = std::max(m, logits[j]);
      }
      double sum = 0.0;
      for (std::int32_t j = 0; j < n; ++j) sum += std::exp(logits[j] - m);
      const double lse_e = m + std::log(sum);
      for (std::int32_t j = 0; j < n; ++j)
        c.ref_probs[(static_cast<std::size_t>(b) * hq + r) * capacity + j] =
            std::exp(logits[j] - m) / sum;
      c.lse[static_cast<std::size_t>(b) * hq + r] =
          static_cast<float>(base == core::lse_base::two ? lse_e / std::log(2.0) : lse_e);
    }
  }
  return c;
}

}  // namespace audiokv::test
