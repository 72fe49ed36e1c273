// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "cpu_clock.hpp"
#include "cross_kv_cache.hpp"
#include "encoder_cache.hpp"
#include "energy_vad.hpp"
#include "kv_eviction_hook.hpp"
#include "log_mel.hpp"
#include "polyphase_resampler.hpp"
#include "utf8.hpp"
#include "wav_reader.hpp"
#include "whisper_decoder.hpp"
#include "whisper_encoder.hpp"
#include "whisper_model.hpp"

namespace asr {

/// @brief A clip after the once-per-clip work: 16 kHz audio, log-mel, encoder output with
/// cross K/V, speech frame count N_a and per-frame VAD. Reused by every eviction run.
struct prepared_clip {
  std::vector<float> audio16k;  ///< trimmed to 30 s
  double duration_s = 0.0;
  bool trimmed = false;    ///< the input was longer than 30 s
  std::vector<float> mel;  ///< [n_mels, 3000]
  audio_encoding enc;
  int n_speech_frames = 0;        ///< N_a = ceil(50 * duration), <= n_audio_ctx
  std::vector<uint8_t> is_voice;  ///< [n_audio_ctx]; 0 for padding frames
  double mel_seconds = 0.0;
  double encoder_seconds = 0.0;
  double mel_cpu_seconds = 0.0;      ///< process CPU time of the log-mel
  double encoder_cpu_seconds = 0.0;  ///< process CPU time of the encoder (or the cache read)
  bool encoder_cached = false;       ///< the cross K/V came from an encoder_cache
};

/// @brief Which encoder frames enter the cross-attention cache.
enum class frame_mode {
  speech,  ///< only the N_a speech-bearing frames: padding is dropped for every method
  all      ///< all n_audio_ctx frames, as reference Whisper / CTranslate2 attend
};

/// @brief Whisper pipeline: WAV audio -> 16 kHz -> log-mel -> encoder -> greedy decode with an
/// eviction hook over the per-(layer, head) cross-attention cache.
class whisper_transcriber {
 public:
  explicit whisper_transcriber(const whisper_model& m, encoder_cache cache = encoder_cache(""))
      : m_(m), mel_(m.w.n_mels), cache_(std::move(cache)) {}

  prepared_clip prepare(const pcm_audio& audio) const {
    using clock = std::chrono::steady_clock;
    prepared_clip c;
    const auto t0 = clock::now();
    const double cpu0 = process_cpu_seconds();
    c.audio16k =
        audio.sample_rate == log_mel::sample_rate
            ? audio.samples
            : polyphase_resampler(audio.sample_rate, log_mel::sample_rate).process(audio.samples);
    if (c.audio16k.size() > static_cast<size_t>(log_mel::n_samples)) {
      c.audio16k.resize(log_mel::n_samples);
      c.trimmed = true;
    }
    c.duration_s = static_cast<double>(c.audio16k.size()) / log_mel::sample_rate;
    c.mel = mel_.compute(c.audio16k);
    const auto t1 = clock::now();
    const double cpu1 = process_cpu_seconds();
    const std::string cached = cache_.enabled() ? cache_.path(m_.dir, c.mel) : std::string();
    c.encoder_cached =
        cache_.enabled() && encoder_cache::load(cached, static_cast<int>(m_.w.dec.size()),
                                                m_.w.n_audio_ctx, m_.w.d_model, c.enc);
    if (!c.encoder_cached) {
      c.enc = whisper_encoder::encode(m_.w, c.mel);
      if (cache_.enabled()) encoder_cache::store(cached, c.enc);
    }
    const auto t2 = clock::now();
    const double cpu2 = process_cpu_seconds();
    c.n_speech_frames = energy_vad::speech_frames(c.audio16k.size(), m_.w.n_audio_ctx);
    c.is_voice.assign(static_cast<size_t>(m_.w.n_audio_ctx), 0);
    const std::vector<uint8_t> v = energy_vad::detect(c.audio16k, c.n_speech_frames);
    std::copy(v.begin(), v.end(), c.is_voice.begin());
    c.mel_seconds = std::chrono::duration<double>(t1 - t0).count();
    c.encoder_seconds = std::chrono::duration<double>(t2 - t1).count();
    c.mel_cpu_seconds = cpu1 - cpu0;
    c.encoder_cpu_seconds = cpu2 - cpu1;
    return c;
  }

  /// Greedy decode of a prepared clip with `hook` managing the cross-attention cache.
  /// With an int8 buffer store, each head's full-precision arena holds the base and emergency
  /// pools (default split) of the policy budget round(keep_ratio * N_a speech frames).
  /// With `stream`, the streaming protocol (whisper_decoder::decode_streaming): the cache starts
  /// with the first chunk of frames and no K/V store is used.
  decode_result transcribe(const prepared_clip& c, kv_eviction_hook& hook, frame_mode mode,
                           kv_store_options store = {}, double keep_ratio = 1.0,
                           const streaming_options* stream = nullptr) const {
    const int sinks = stream != nullptr ? stream->window_sinks : 0;
    const int n_frames = std::min(mode == frame_mode::all ? m_.w.n_audio_ctx : c.n_speech_frames,
                                  m_.w.n_audio_ctx - sinks);
    if (stream != nullptr && store.enabled()) {
      throw asr_error("the streaming protocol does not support K/V stores");
    }
    cross_kv_cache cache;
    cache.load(c.enc.cross_k, c.enc.cross_v, m_.w.dec_heads, n_frames,
               stream != nullptr ? stream->chunk_frames : -1);
    if (sinks > 0) cache.set_window_sinks(sinks);
    if (store.enabled()) {
      const int budget = std::max(1, static_cast<int>(std::lround(keep_ratio * c.n_speech_frames)));
      const audiokv::pool_split split;
      store.full_rows = split.base_cells(budget) + split.emergency_cells(budget);
      cache.enable_store(store);
    }
    clip_context ctx;
    ctx.n_layers = m_.n_dec_layers();
    ctx.n_heads = m_.n_dec_heads();
    ctx.head_dim = m_.head_dim();
    ctx.n_frames = n_frames;
    ctx.n_speech_frames = c.n_speech_frames;
    ctx.n_audio_ctx = m_.w.n_audio_ctx;
    ctx.is_voice = c.is_voice.data();
    ctx.alignment_heads = &m_.alignment_heads;
    return stream != nullptr ? whisper_decoder::decode_streaming(m_, cache, hook, ctx, *stream)
                             : whisper_decoder::decode(m_, cache, hook, ctx);
  }

  /// The tokens' text without its leading space, as valid UTF-8 (utf8::repaired: a character
  /// split by the output's last token reads as U+FFFD).
  std::string text(const std::vector<int32_t>& tokens) const {
    const std::string s = utf8::repaired(m_.vocab.decode(tokens, m_.eot));
    const size_t b = s.find_first_not_of(' ');
    return b == std::string::npos ? std::string() : s.substr(b);
  }

  const whisper_model& model() const { return m_; }

 private:
  const whisper_model& m_;
  log_mel mel_;
  encoder_cache cache_;
};

}  // namespace asr
