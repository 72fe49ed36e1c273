// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>

namespace asr {

/// Row-major float matrix: rows are time steps / tokens, columns are features, matching the
/// [out, in] row-major layout CTranslate2 stores for linear weights.
using mat_rm = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using row_vec = Eigen::RowVectorXf;

/// @brief Dense layer y = x W^T + b with W stored [out, in].
struct linear_layer {
  mat_rm w;
  row_vec b;

  void forward(const mat_rm& x, mat_rm& y) const {
    y.noalias() = x * w.transpose();
    y.rowwise() += b;
  }
};

/// @brief LayerNorm parameters: y = (x - mean) / sqrt(var + eps) * gamma + beta, var biased.
struct layer_norm_params {
  row_vec gamma;
  row_vec beta;
  static constexpr float eps = 1e-5f;

  void forward(const mat_rm& x, mat_rm& y) const {
    y.resize(x.rows(), x.cols());
    const float inv_n = 1.0f / static_cast<float>(x.cols());
    for (Eigen::Index r = 0; r < x.rows(); ++r) {
      const float mean = x.row(r).sum() * inv_n;
      const float var = (x.row(r).array() - mean).square().sum() * inv_n;
      const float inv_std = 1.0f / std::sqrt(var + eps);
      y.row(r) = ((x.row(r).array() - mean) * inv_std) * gamma.array() + beta.array();
    }
  }
};

/// Exact GELU, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), as Whisper and CTranslate2's GELU use.
inline void gelu_inplace(mat_rm& x) {
  float* p = x.data();
  const Eigen::Index n = x.size();
  for (Eigen::Index i = 0; i < n; ++i)
    p[i] = 0.5f * p[i] * (1.0f + std::erf(p[i] * 0.70710678118654752f));
}

/// Pre-LN feed-forward block with its residual: x += W2 gelu(W1 LN(x)). `Layer` is an encoder
/// or decoder layer (ln_ffn, ffn_in, ffn_out); xn, ff and proj are caller-owned scratch.
template <class Layer>
void add_feed_forward(const Layer& L, mat_rm& x, mat_rm& xn, mat_rm& ff, mat_rm& proj) {
  L.ln_ffn.forward(x, xn);
  L.ffn_in.forward(xn, ff);
  gelu_inplace(ff);
  L.ffn_out.forward(ff, proj);
  x += proj;
}

/// Numerically stable softmax of p[0..n): subtract the max before exp.
inline void softmax_inplace(float* p, int n) {
  if (n <= 0) return;
  float m = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) m = std::max(m, p[i]);
  float s = 0.0f;
  for (int i = 0; i < n; ++i) {
    p[i] = std::exp(p[i] - m);
    s += p[i];
  }
  const float inv = 1.0f / s;
  for (int i = 0; i < n; ++i) p[i] *= inv;
}

}  // namespace asr
