// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cmath>
#include <vector>

#include "asr_error.hpp"
#include "tensor_ops.hpp"
#include "whisper_weights.hpp"

namespace asr {

/// @brief Encoder output of one 30 s window plus every decoder layer's cross-attention K and V
/// over all audio positions (computed once per clip, reused by every eviction run).
struct audio_encoding {
  mat_rm hidden;                ///< [n_audio_ctx, d]
  std::vector<mat_rm> cross_k;  ///< per decoder layer, [n_audio_ctx, d] (head h = cols h*hd..)
  std::vector<mat_rm> cross_v;
};

/// @brief Whisper encoder: conv(k3,s1)+GELU, conv(k3,s2)+GELU, + sinusoidal positions,
/// pre-LN transformer blocks, final LN.
class whisper_encoder {
 public:
  /// `mel` is [n_mels, n_frames] row-major with n_frames = 2 * n_audio_ctx (3000).
  static audio_encoding encode(const whisper_weights& w, const std::vector<float>& mel) {
    const int n_frames = 2 * w.n_audio_ctx;
    if (mel.size() != static_cast<size_t>(w.n_mels) * n_frames) {
      throw asr_error("log-mel input has " + std::to_string(mel.size()) + " values, expected " +
                      std::to_string(w.n_mels) + " x " + std::to_string(n_frames));
    }
    const int d = w.d_model;
    // conv1 (padding 1, stride 1) as im2col GEMM: col(t, c*3+k) = mel[c][t+k-1].
    mat_rm cols = mat_rm::Zero(n_frames, w.n_mels * 3);
    for (int c = 0; c < w.n_mels; ++c) {
      const float* row = mel.data() + static_cast<size_t>(c) * n_frames;
      for (int t = 0; t < n_frames; ++t) {
        for (int k = 0; k < 3; ++k) {
          const int s = t + k - 1;
          if (s >= 0 && s < n_frames) cols(t, c * 3 + k) = row[s];
        }
      }
    }
    mat_rm h1;
    h1.noalias() = cols * w.conv1_w.transpose();
    h1.rowwise() += w.conv1_b;
    gelu_inplace(h1);
    // conv2 (padding 1, stride 2): col(t, c*3+k) = h1[2t+k-1][c].
    const int T = w.n_audio_ctx;
    mat_rm cols2 = mat_rm::Zero(T, d * 3);
    for (int t = 0; t < T; ++t) {
      for (int k = 0; k < 3; ++k) {
        const int s = 2 * t + k - 1;
        if (s < 0 || s >= n_frames) continue;
        for (int c = 0; c < d; ++c) cols2(t, c * 3 + k) = h1(s, c);
      }
    }
    audio_encoding out;
    mat_rm& x = out.hidden;
    x.noalias() = cols2 * w.conv2_w.transpose();
    x.rowwise() += w.conv2_b;
    gelu_inplace(x);
    x += w.enc_pos;

    const int H = w.enc_heads, hd = d / H;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    mat_rm xn, qkv, attn(T, d), proj, ff;
    mat_rm scores(T, T);
    for (const whisper_encoder_layer& L : w.enc) {
      L.ln_attn.forward(x, xn);
      L.qkv.forward(xn, qkv);
      for (int h = 0; h < H; ++h) {
        scores.noalias() =
            (qkv.middleCols(h * hd, hd) * scale) * qkv.middleCols(d + h * hd, hd).transpose();
        for (int r = 0; r < T; ++r) softmax_inplace(scores.row(r).data(), T);
        attn.middleCols(h * hd, hd).noalias() = scores * qkv.middleCols(2 * d + h * hd, hd);
      }
      L.attn_out.forward(attn, proj);
      x += proj;
      add_feed_forward(L, x, xn, ff, proj);
    }
    w.enc_ln.forward(x, xn);
    x.swap(xn);

    // Cross-attention K/V per decoder layer: [K | V] = x W_kv^T + b_kv.
    mat_rm kv;
    for (const whisper_decoder_layer& L : w.dec) {
      L.cross_kv.forward(x, kv);
      out.cross_k.emplace_back(kv.leftCols(d));
      out.cross_v.emplace_back(kv.rightCols(d));
    }
    return out;
  }
};

}  // namespace asr
