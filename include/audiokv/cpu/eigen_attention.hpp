// SPDX-License-Identifier: Apache-2.0
/// @file
/// Decode attention on the CPU (target audiokv::eigen): one decode step of attention that also
/// returns the per-cell probabilities, and a scoring-only variant. GQA without repeating K/V: query
/// head h reads KV head h / group_size.
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <string>

#include "../core/kv_view.hpp"
#include "../error.hpp"
#include "../types/attention_shape.hpp"

namespace audiokv::cpu {

/// The shape of one step (one definition for the CPU and CUDA backends).
using attention_shape = ::audiokv::attention_shape;

namespace detail {
using row_major_matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// The [num_cells, head_dim] rows of one KV head as a matrix; requires unit dim stride.
template <class Layout>
Eigen::Map<const row_major_matrix, 0, Eigen::OuterStride<>> head_matrix(
    const kv_view<const float, Layout>& kv, std::int32_t head, std::int32_t num_cells) {
  return {kv.row(0, head), num_cells, kv.head_dim(),
          Eigen::OuterStride<>(kv.mapping().cell_stride())};
}
template <class Layout>
void validate_view(const char* where, const char* name, const kv_view<const float, Layout>& kv,
                   const attention_shape& shape) {
  AUDIOKV_REQUIRE(kv.num_heads() == shape.num_kv_heads, where, std::string(name) + ".num_heads()",
                  kv.num_heads(), "must equal shape.num_kv_heads");
  AUDIOKV_REQUIRE(kv.head_dim() == shape.head_dim, where, std::string(name) + ".head_dim()",
                  kv.head_dim(), "must equal shape.head_dim");
  AUDIOKV_REQUIRE(kv.num_cells() >= shape.num_cells, where, std::string(name) + ".num_cells()",
                  kv.num_cells(), "must be >= shape.num_cells");
}
}  // namespace detail

/// @brief probs[h, j] = softmax_j(q_h . k_j / sqrt(d)) for every query head h.
/// @param q      [num_q_heads, head_dim]
/// @param keys   (cell, kv head, dim) view
/// @param probs  [num_q_heads, num_cells] output
template <class Layout>
void attention_scores(const float* q, const kv_view<const float, Layout>& keys,
                      const attention_shape& shape, float* probs) {
  shape.validate("cpu::attention_scores");
  detail::validate_view("cpu::attention_scores", "keys", keys, shape);
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const std::int32_t group = shape.group_size();
  for (std::int32_t h = 0; h < shape.num_q_heads; ++h) {
    Eigen::Map<const Eigen::VectorXf> qh(q + static_cast<std::int64_t>(h) * shape.head_dim,
                                         shape.head_dim);
    Eigen::Map<Eigen::VectorXf> p(probs + static_cast<std::int64_t>(h) * shape.num_cells,
                                  shape.num_cells);
    const std::int32_t kv_head = h / group;
    if (shape.num_cells == 0) continue;
    if (keys.mapping().dim_stride() == 1) {
      p.noalias() = detail::head_matrix(keys, kv_head, shape.num_cells) * qh;
      p *= scale;
    } else {
      for (std::int32_t j = 0; j < shape.num_cells; ++j) {
        Eigen::Map<const Eigen::VectorXf, 0, Eigen::InnerStride<>> k(
            keys.row(j, kv_head), shape.head_dim,
            Eigen::InnerStride<>(keys.mapping().dim_stride()));
        p[j] = k.dot(qh) * scale;
      }
    }
    const float m = p.maxCoeff();
    p = (p.array() - m).exp();
    p /= p.sum();
  }
}

/// @brief One decode step: out[h] = sum_j probs[h, j] v_j, and the probabilities themselves.
/// @param out    [num_q_heads, head_dim] output
/// @param probs  [num_q_heads, num_cells] output
template <class Layout>
void decode_attention(const float* q, const kv_view<const float, Layout>& keys,
                      const kv_view<const float, Layout>& values, const attention_shape& shape,
                      float* out, float* probs) {
  attention_scores(q, keys, shape, probs);
  detail::validate_view("cpu::decode_attention", "values", values, shape);
  const std::int32_t group = shape.group_size();
  for (std::int32_t h = 0; h < shape.num_q_heads; ++h) {
    Eigen::Map<Eigen::VectorXf> o(out + static_cast<std::int64_t>(h) * shape.head_dim,
                                  shape.head_dim);
    o.setZero();
    const float* p = probs + static_cast<std::int64_t>(h) * shape.num_cells;
    const std::int32_t kv_head = h / group;
    if (shape.num_cells == 0) continue;
    if (values.mapping().dim_stride() == 1) {
      Eigen::Map<const Eigen::VectorXf> pv(p, shape.num_cells);
      o.noalias() = detail::head_matrix(values, kv_head, shape.num_cells).transpose() * pv;
      continue;
    }
    for (std::int32_t j = 0; j < shape.num_cells; ++j) {
      Eigen::Map<const Eigen::VectorXf, 0, Eigen::InnerStride<>> v(
          values.row(j, kv_head), shape.head_dim,
          Eigen::InnerStride<>(values.mapping().dim_stride()));
      o.noalias() += p[j] * v;
    }
  }
}

}  // namespace audiokv::cpu
