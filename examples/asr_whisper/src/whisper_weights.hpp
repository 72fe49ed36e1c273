// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "asr_error.hpp"
#include "ct2_model_file.hpp"
#include "tensor_ops.hpp"

namespace asr {

/// Rows of `<prefix>ffn/linear_0/weight` (the FFN width), or asr_error naming the variable when
/// it is not a matrix.
inline uint32_t ffn_width(const ct2_model_file& f, const std::string& prefix) {
  const std::string name = prefix + "ffn/linear_0/weight";
  const auto& dims = f.at(name).dims;
  if (dims.size() != 2 || dims[0] == 0) throw asr_error(f.path() + ": bad shape of '" + name + "'");
  return dims[0];
}

/// @brief One pre-LN encoder block: x += attn(LN(x)); x += ffn(LN(x)).
struct whisper_encoder_layer {
  layer_norm_params ln_attn;
  linear_layer qkv;  ///< fused [3 d, d]: rows 0..d-1 = Q, d..2d-1 = K, 2d..3d-1 = V
  linear_layer attn_out;
  layer_norm_params ln_ffn;
  linear_layer ffn_in;
  linear_layer ffn_out;
};

/// @brief One pre-LN decoder block: causal self-attention, cross-attention, FFN.
struct whisper_decoder_layer {
  layer_norm_params ln_self;
  linear_layer self_qkv;  ///< fused [3 d, d]
  linear_layer self_out;
  layer_norm_params ln_cross;
  linear_layer cross_q;  ///< [d, d]
  linear_layer
      cross_kv;  ///< fused [2 d, d]: rows 0..d-1 = K, d..2d-1 = V (applied to encoder output)
  linear_layer cross_out;
  layer_norm_params ln_ffn;
  linear_layer ffn_in;
  linear_layer ffn_out;
};

/// @brief All Whisper weights in float32, loaded from a CTranslate2 `WhisperSpec` model.bin.
/// Shapes are derived from the file (so tiny/base/small/... all load) and cross-checked.
struct whisper_weights {
  int n_mels = 0;
  int d_model = 0;
  int n_audio_ctx = 0;  ///< encoder positions (1500 = 30 s at 20 ms)
  int n_text_ctx = 0;   ///< decoder positions (448)
  int n_vocab = 0;
  int enc_heads = 0;
  int dec_heads = 0;
  bool scale_embeddings = false;

  mat_rm conv1_w;  ///< [d, n_mels * 3], column = in_channel * 3 + tap
  row_vec conv1_b;
  mat_rm conv2_w;  ///< [d, d * 3]
  row_vec conv2_b;
  mat_rm enc_pos;  ///< [n_audio_ctx, d] sinusoidal table stored in the file
  std::vector<whisper_encoder_layer> enc;
  layer_norm_params enc_ln;

  mat_rm tok_emb;  ///< [n_vocab, d]; also the output projection (tied, via alias)
  mat_rm dec_pos;  ///< [n_text_ctx, d]
  std::vector<whisper_decoder_layer> dec;
  layer_norm_params dec_ln;
  mat_rm out_proj;  ///< only filled when the file has an untied projection
  row_vec out_bias;

  static whisper_weights load(const ct2_model_file& f) {
    if (f.spec_name() != "WhisperSpec") {
      throw asr_error(f.path() + ": model spec is '" + f.spec_name() + "', expected 'WhisperSpec'");
    }
    whisper_weights w;
    const ct2_variable& c1 = f.at("encoder/conv1/weight");
    if (c1.dims.size() != 3 || c1.dims[2] != 3) {
      throw asr_error(f.path() + ": 'encoder/conv1/weight' has shape " +
                      ct2_model_file::shape_str(c1.dims) + ", expected [d_model, n_mels, 3]");
    }
    w.d_model = static_cast<int>(c1.dims[0]);
    w.n_mels = static_cast<int>(c1.dims[1]);
    const uint32_t d = c1.dims[0];
    w.enc_heads = static_cast<int>(f.scalar_int("encoder/num_heads"));
    w.dec_heads = static_cast<int>(f.scalar_int("decoder/num_heads"));
    if (w.enc_heads <= 0 || w.dec_heads <= 0 || w.d_model % w.enc_heads != 0 ||
        w.d_model % w.dec_heads != 0) {
      throw asr_error(f.path() + ": head counts do not divide d_model");
    }
    if (f.has("decoder/activation") && f.scalar_int("decoder/activation") != 3) {
      throw asr_error(f.path() + ": decoder activation is not GELU (3)");
    }
    if (f.has("decoder/pre_norm") && f.scalar_int("decoder/pre_norm") != 1) {
      throw asr_error(f.path() + ": only pre-norm Whisper decoders are supported");
    }
    w.scale_embeddings =
        f.has("decoder/scale_embeddings") && f.scalar_int("decoder/scale_embeddings");

    w.conv1_w = as_mat(f.to_float("encoder/conv1/weight"), d, c1.dims[1] * 3);
    w.conv1_b = as_row(f.to_float("encoder/conv1/bias", {d}));
    w.conv2_w = as_mat(f.to_float("encoder/conv2/weight", {d, d, 3}), d, d * 3);
    w.conv2_b = as_row(f.to_float("encoder/conv2/bias", {d}));
    const ct2_variable& ep = f.at("encoder/position_encodings/encodings");
    if (ep.dims.size() != 2 || ep.dims[1] != d) {
      throw asr_error(f.path() + ": bad shape of 'encoder/position_encodings/encodings'");
    }
    w.n_audio_ctx = static_cast<int>(ep.dims[0]);
    w.enc_pos = as_mat(f.to_float(ep.name), ep.dims[0], d);

    for (int i = 0;; ++i) {
      const std::string p = "encoder/layer_" + std::to_string(i) + "/";
      if (!f.has(p + "self_attention/linear_0/weight")) break;
      whisper_encoder_layer L;
      L.ln_attn = ln(f, p + "self_attention/layer_norm", d);
      L.qkv = lin(f, p + "self_attention/linear_0", 3 * d, d);
      L.attn_out = lin(f, p + "self_attention/linear_1", d, d);
      L.ln_ffn = ln(f, p + "ffn/layer_norm", d);
      const uint32_t ff = ffn_width(f, p);
      L.ffn_in = lin(f, p + "ffn/linear_0", ff, d);
      L.ffn_out = lin(f, p + "ffn/linear_1", d, ff);
      w.enc.push_back(std::move(L));
    }
    w.enc_ln = ln(f, "encoder/layer_norm", d);

    const ct2_variable& emb = f.at("decoder/embeddings/weight");
    if (emb.dims.size() != 2 || emb.dims[1] != d) {
      throw asr_error(f.path() + ": bad shape of 'decoder/embeddings/weight'");
    }
    w.n_vocab = static_cast<int>(emb.dims[0]);
    w.tok_emb = as_mat(f.to_float(emb.name), emb.dims[0], d);
    const ct2_variable& dp = f.at("decoder/position_encodings/encodings");
    if (dp.dims.size() != 2 || dp.dims[1] != d) {
      throw asr_error(f.path() + ": bad shape of 'decoder/position_encodings/encodings'");
    }
    w.n_text_ctx = static_cast<int>(dp.dims[0]);
    w.dec_pos = as_mat(f.to_float(dp.name), dp.dims[0], d);
    for (int i = 0;; ++i) {
      const std::string p = "decoder/layer_" + std::to_string(i) + "/";
      if (!f.has(p + "self_attention/linear_0/weight")) break;
      whisper_decoder_layer L;
      L.ln_self = ln(f, p + "self_attention/layer_norm", d);
      L.self_qkv = lin(f, p + "self_attention/linear_0", 3 * d, d);
      L.self_out = lin(f, p + "self_attention/linear_1", d, d);
      L.ln_cross = ln(f, p + "attention/layer_norm", d);
      L.cross_q = lin(f, p + "attention/linear_0", d, d);
      L.cross_kv = lin(f, p + "attention/linear_1", 2 * d, d);
      L.cross_out = lin(f, p + "attention/linear_2", d, d);
      L.ln_ffn = ln(f, p + "ffn/layer_norm", d);
      const uint32_t ff = ffn_width(f, p);
      L.ffn_in = lin(f, p + "ffn/linear_0", ff, d);
      L.ffn_out = lin(f, p + "ffn/linear_1", d, ff);
      w.dec.push_back(std::move(L));
    }
    w.dec_ln = ln(f, "decoder/layer_norm", d);
    if (w.enc.empty() || w.dec.empty()) {
      throw asr_error(f.path() + ": no encoder or decoder layers found");
    }
    // The projection is normally an alias of the embeddings (tied); keep a copy only if not.
    if (f.has("decoder/projection/weight") &&
        f.at("decoder/projection/weight").offset != emb.offset) {
      w.out_proj =
          as_mat(f.to_float("decoder/projection/weight", {emb.dims[0], d}), emb.dims[0], d);
    }
    if (f.has("decoder/projection/bias")) {
      w.out_bias = as_row(f.to_float("decoder/projection/bias", {emb.dims[0]}));
    }
    return w;
  }

  /// Output projection matrix [n_vocab, d].
  const mat_rm& projection() const { return out_proj.size() ? out_proj : tok_emb; }

 private:
  static mat_rm as_mat(const std::vector<float>& v, uint32_t rows, uint32_t cols) {
    return Eigen::Map<const mat_rm>(v.data(), rows, cols);
  }
  static row_vec as_row(const std::vector<float>& v) {
    return Eigen::Map<const row_vec>(v.data(), static_cast<Eigen::Index>(v.size()));
  }
  static layer_norm_params ln(const ct2_model_file& f, const std::string& p, uint32_t d) {
    layer_norm_params n;
    n.gamma = as_row(f.to_float(p + "/gamma", {d}));
    n.beta = as_row(f.to_float(p + "/beta", {d}));
    return n;
  }
  static linear_layer lin(const ct2_model_file& f, const std::string& p, uint32_t out,
                          uint32_t in) {
    linear_layer l;
    l.w = as_mat(f.to_float(p + "/weight", {out, in}), out, in);
    l.b = f.has(p + "/bias") ? as_row(f.to_float(p + "/bias", {out})) : row_vec::Zero(out);
    return l;
  }
};

}  // namespace asr
