// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "asr_error.hpp"
#include "cpu_clock.hpp"
#include "cross_kv_cache.hpp"
#include "kv_eviction_hook.hpp"
#include "tensor_ops.hpp"
#include "whisper_model.hpp"

namespace asr {

/// @brief Result of one greedy decode.
struct decode_result {
  std::vector<int32_t> tokens;  ///< generated text tokens (no prompt, no EOT)
  /// Streaming: each token's alignment peak (the alignment heads' median argmax frame) when it
  /// was emitted; empty offline.
  std::vector<int> token_peaks;
  bool reached_eot = false;
  int steps = 0;  ///< decoder forward steps (prompt + generated)
  /// The prompt's language token (detected at the first step with whisper_model's
  /// detect_language); -1 for an English-only model.
  int32_t language = -1;
  double seconds = 0.0;
  /// Process CPU seconds of the decode (the eviction hook's work included): unlike `seconds`,
  /// it does not grow with the load of other processes.
  double cpu_seconds = 0.0;
  /// Mean over decode steps of total kept cells / (layers * heads * n_frames): 1.0 = full.
  double mean_kept_fraction = 1.0;
  double final_kept_fraction = 1.0;
  /// Mean over decode steps of the cross-attention K/V bytes attention reads (all heads).
  double mean_kv_bytes = 0.0;
  /// Mean over decode steps of the same cells' bytes as dense float K and V.
  double mean_dense_kv_bytes = 0.0;
  /// With a K/V store: mean over (step, layer, head) of |o - o_ref| / |o_ref|, o_ref being
  /// attention over the same cells' dense float rows; -1 without a store.
  double attention_rel_error = -1.0;
  /// Most cells held at once over all (layer, head), at any moment of the clip.
  long peak_cells = 0;
  /// Streaming: chunks revealed after the first.
  int reveals = 0;
  /// Kept cells that changed slot, summed over every move map (layer, head): the K/V row
  /// copies of a time-ordered compaction of per-head rows. When every head of a layer applies
  /// the same map, rows holding all heads of a cell copy rows_moved / heads times.
  long rows_moved = 0;
  /// Move maps that evicted at least one cell, over all (layer, head).
  int evicting_moves = 0;
  /// Streaming: refreshes of the decoder's earlier rows (streaming_options::refresh_on_hold).
  int refreshes = 0;
  /// Streaming: end rollbacks (streaming_options::end_rollbacks).
  int rollbacks = 0;
  /// Streaming: tokens cut back at reveals and decoded again (streaming_options::local_agreement).
  int redecoded_tokens = 0;
  /// Streaming: the most consecutive reveals over which the repeat stop held one step back.
  int longest_hold = 0;
  /// Streaming: the repeat stop was holding a step back when the last frame was revealed.
  bool held_to_end = false;
  /// Streaming: hold rollbacks (streaming_options::hold_rollback_reveals).
  int hold_rollbacks = 0;
  /// Streaming: stall rollbacks (streaming_options::eot_stall_frames).
  int stall_rollbacks = 0;
  /// Streaming: the most voiced frames revealed over consecutive reveals at which the decoder
  /// chose end of text while frames remained (the stall rollback's measure).
  int longest_eot_hold_frames = 0;
  /// Streaming: end coverage restarts, or cuts with end_coverage_cut, decoded on over every
  /// frame (streaming_options::end_coverage_frames).
  int coverage_restarts = 0;
  /// Streaming: the last voiced frame minus the furthest alignment peak at or before it of an
  /// emitted token when the output ended (frames of speech the output's alignment never
  /// reached); 0 offline or without voice marks.
  int end_gap_frames = 0;
};

/// Longest repeated span the streaming repeat rules look at unless told otherwise. 32 rather
/// than 8 was chosen on dev (benchmarks/results/quality_reference_dev_span.md): a 9-token
/// sentence loop on Whisper base (162 word errors -> 5) escaped spans of at most 8, and no other
/// dev or test full-cache transcript changed.
inline constexpr int default_repeat_span_max = 32;

/// @brief The streaming protocol's settings (whisper_decoder::decode_streaming).
struct streaming_options {
  int chunk_frames = 25;  ///< frames revealed at a time (0.5 s of 20 ms frames)
  /// AlignAtt: emit while the peak is > this many frames behind the newest. 50 (1 s) rather
  /// than 25 was chosen on the dev splits: it took the full-cache streaming WER from 6.23% to
  /// 3.19% (Asterisk) and 20.65% to 18.42% (voices) on tiny.en, and Whisper base's runaways
  /// from 3 of 11 Asterisk dev clips to 1.
  int align_frames = 50;
  /// Look-back stop: a token is not emitted while the peak lies more than this many frames
  /// behind the furthest peak of an emitted token (the decoder returning to audio it has
  /// transcribed); -1 disables the rule.
  int lookback_stop_frames = 25;
  /// The window's last frames, fixed cells every head attends to from the first step
  /// (cross_kv_cache::set_window_sinks); they are paid from every policy's budget.
  int window_sinks = 16;
  /// Repeat stop: a token that would end the output in two equal spans of at most
  /// repeat_span_max tokens is not emitted while the peak has not passed the first span's last
  /// peak (a span repeated where the audio has not moved on is the decoder waiting for audio,
  /// not speech).
  bool repeat_stop = true;
  /// Voice gate: no token is emitted before align_frames frames past the first voiced frame
  /// (clip_context::is_voice) have been revealed. On leading silence the decoder has no speech
  /// to transcribe; a token emitted there (Whisper tends to write "." on silence) conditions
  /// every later step, and can end the output before the speech arrives.
  bool voice_gate = true;
  /// Repeat stop: the peak must lie more than this many frames after the first span's last
  /// peak for a repeated span to count as progress (0: any advance counts). A span that
  /// repeats while the peak creeps on by a frame or two is a loop, not speech. 5 (100 ms,
  /// shorter than any word) rather than 0 was chosen on dev
  /// (benchmarks/results/quality_reference_dev_advance.md): it cut Whisper base's mid-stream
  /// stutters (its reference gap +1.38 -> +1.04 and +2.86 -> +2.75) and left tiny.en's unchanged
  /// or narrower.
  int repeat_advance = 5;
  /// Repeat stop by extent: a repeated span also needs the peak past the first copy's last peak
  /// by that copy's extent (its last peak minus the peak of the token before it, frame 0 at the
  /// output's start). A span said twice covers its audio twice; a stutter ("our our our") creeps
  /// on by a frame or two.
  bool repeat_by_extent = false;
  /// With repeat_by_extent: the extent also decides once every frame is revealed (the end stop
  /// and the end rollback), as when the rule was first measured. Off: there only
  /// repeat_advance does, so letters spelled with hyphens ("M-I-S-D-N"), whose peaks move less
  /// than a letter's extent, are not ended as a loop.
  bool repeat_extent_at_end = true;
  /// Repeat stop by words: while frames remain to be revealed, spans compare by
  /// whisper_model::word_key (a token's letters and digits in lower case, a punctuation-only
  /// token's characters) instead of token ids, so a sentence said again with one word's case
  /// or leading space changed ("Thank you" then " Thank you") waits for audio. Its first form
  /// (every punctuation-only token one key, the words deciding at the end too) was adopted by
  /// its dev rule, then off again after its one test run
  /// (benchmarks/results/quality_reference_dev_words.md): there "Press 1-2-2." read as the
  /// stutter "2- 2." and a case-only repeat held at the end ended the output early (Whisper
  /// base's full cache on test29 4 -> 44 word errors; tiny.en's AudioKV at 10% on voices
  /// +1.78 -> +2.91). This form was adopted by the same rule and two more conditions (no clip
  /// 5 or more word errors worse; AudioKV's dev rows not worse) on the wide and fresh dev clips
  /// (benchmarks/results/quality_reference_dev_words2.md): Whisper base's gap +1.07 -> +1.00
  /// and +2.18 -> +1.97 on Asterisk, voices and tiny.en unchanged. Its flaw on test: a repeat
  /// held until every frame is revealed can be followed by end of text (tiny.en's AudioKV at
  /// 10% on voices +1.78 -> +2.91, one clip).
  bool repeat_by_words = true;
  /// With repeat_by_words: the words also decide once every frame is revealed (the end stop and
  /// the end rollback). Off: there, where ending the output cannot be undone by more audio,
  /// only equal token ids count as a repeat, as in the eighth protocol version.
  bool repeat_words_at_end = false;
  /// Longest span the repeat stop, the end stop and the end rollback look at (>= 1): a loop
  /// on a longer span (a whole sentence said again) escapes all three.
  int repeat_span_max = default_repeat_span_max;
  /// End stop (with repeat_stop): once every frame is revealed, a token the repeat stop would
  /// hold back ends the output instead. There is no audio left to wait for, and a span repeated
  /// where the alignment has not moved on is a loop (Whisper base otherwise loops to the token
  /// limit on some clips; masking the repeat only starts another loop).
  bool end_stop = true;
  /// End rollback (with end_stop): once every frame is revealed, before the end stop ends the
  /// output on a repeated span, the output is cut back to where the span's first copy began and
  /// decoding goes on from there over every frame; the first copy was emitted while less audio
  /// was revealed. Each output length is rolled back to at most once, and at most
  /// `end_rollbacks` times per clip; a repeat held after that ends the output. 4 (fixed before
  /// the runs) was chosen on the wide dev splits
  /// (benchmarks/results/quality_reference_dev_rollback.md; full cache, streaming minus offline
  /// WER): Whisper base +1.88 to +1.38 points (Asterisk) and +4.04 to +2.88 (voices); tiny.en
  /// +1.13 to +1.16 and +0.39 unchanged.
  int end_rollbacks = 4;
  /// End rollback to the loop's start: the cut goes back to where the first of the consecutive
  /// equal copies of the repeated span begins, not to the second-to-last copy. A decoder that
  /// looped while audio arrived ("Good Good Good ...") otherwise loses one copy per rollback
  /// and the end stop keeps the rest. Chosen on the fresh and the wide dev splits
  /// (benchmarks/results/quality_reference_dev_loop.md, rule fixed before the runs; full cache,
  /// streaming minus offline WER): Whisper base +3.09 to +1.53 points (fresh voices), +2.84 to
  /// +2.86 (wide voices), Asterisk unchanged; tiny.en unchanged on all four.
  bool end_rollback_loop = true;
  /// Refresh on hold: before the repeat stop holds a token back (or the end stop ends the
  /// output), the decoder's self-attention rows of every earlier position are recomputed over
  /// the frames revealed by then (inputs forced, no hook observing), once per revealed count,
  /// and the step is decided again. Those rows were computed when less audio was revealed; a
  /// decoder that repeats itself there is often repeating what they assumed, not the audio.
  /// Chosen on the wide dev splits (benchmarks/results/quality_reference_dev_wide.md; Whisper
  /// base, full cache, streaming minus offline WER): +10.93 to +1.88 points (Asterisk) and +6.04
  /// to +4.04 (voices); tiny.en's rows unchanged.
  bool refresh_on_hold = true;
  /// Refresh at the end: once every frame is revealed, before end of text is emitted, the
  /// decoder's earlier rows are recomputed over every frame (once) and the step is decided
  /// again. Rows computed while less audio was revealed can end the output early. Chosen on
  /// the wide dev splits (benchmarks/results/quality_reference_dev_rollback.md, rule fixed
  /// before the run): Whisper base +2.88 to +2.84 points (voices), Asterisk and tiny.en
  /// unchanged; one refresh per clip at most.
  bool refresh_at_end = true;
  /// Hold rollback (0: off): while frames remain, a step the repeat stop has held back over
  /// this many consecutive reveals cuts the output back as the end rollback does (to where the
  /// first of the repeated span's consecutive copies began) and decoding goes on over the frames
  /// revealed by then, once per cut length. A hold either ends within a reveal or two, as the
  /// audio of a repeated phrase arrives, or lasts until every frame is revealed (a decoder
  /// stuck on what it emitted from less audio), after which the output often ends there.
  int hold_rollback_reveals = 0;
  /// Local agreement (LocalAgreement-2, Machacek et al., arXiv 2307.14743): the tokens emitted
  /// since the last commit are a hypothesis. At each reveal the hypothesis is cut back and
  /// decoded again over the larger audio; the longest common prefix of two consecutive
  /// hypotheses is committed. Once every frame is revealed the last hypothesis is the output.
  /// A token emitted from partial audio stays only if one more chunk of audio agrees with it.
  bool local_agreement = false;
  /// Local agreement: consecutive hypotheses that must share a token for it to be committed
  /// (LocalAgreement-n; >= 2).
  int agreement_hypotheses = 2;
  /// Language detection (whisper_model::detect_language): before the first step, chunks are
  /// revealed until this many frames past the first voiced frame (clip_context::is_voice; frame
  /// 0 without voice marks) are visible, and the first step names the language over them.
  /// Whisper detects over its whole 30-s window; a stream has only what has arrived, and its
  /// first chunk may hold no speech at all. 200 (4 s) rather than 50 or 100 was chosen on the
  /// dev clips of five languages (benchmarks/results/quality_dev_language_streaming.md): it
  /// names 64 of 69 (Whisper base; offline, from the whole window, all 69), and 190 of the 198
  /// test clips in its one test run.
  int language_frames = 200;
  /// Start delay: before the first step, chunks are revealed until this many frames past the
  /// first voiced frame (frame 0 without voice marks) are visible (0: the first chunk's). The
  /// prompt is otherwise decoded over the first chunk, often before any speech, and every later
  /// step reads its rows. 100 (2 s; the first word waits up to 1 s more than the voice gate's)
  /// rather than 0, 200 or the prompt refresh was chosen on the wide dev splits
  /// (benchmarks/results/quality_reference_dev_start.md; full cache, streaming minus offline
  /// WER): Whisper base +2.77 to +1.41 points (voices) and +1.00 to +0.85 (Asterisk), tiny.en
  /// -0.35 to -0.47 and +0.28 to +0.48, and base's dev clips in four other languages 33.50% to
  /// 22.41% WER.
  int start_frames = 100;
  /// Prompt refresh: until the first token is emitted, every reveal also recomputes the
  /// prompt's rows (inputs forced, no hook observing) over the frames revealed by then. The
  /// prompt is decoded at the first chunk, often before any speech; rows that saw only that
  /// silence condition every later step.
  bool refresh_prompt = false;
  /// End coverage restart (0: off): once every frame is revealed, an output about to end
  /// (end of text, or the end stop) while the furthest alignment peak of its tokens that lies
  /// on speech lies more than this many frames before the last voiced frame is decoded again
  /// from its start over every frame, once per clip. A stream whose first tokens were emitted from
  /// a second or two of audio ("¿", a word's first letters) can leave the decoder ending the output
  /// there, with the rest of the speech never transcribed. Not the default: on dev it mended
  /// every full-cache clip it touched but fired on too few, and under eviction a restart over
  /// a cache thinned for the frontier made every clip it touched worse
  /// (benchmarks/results/quality_reference_dev_coverage.md).
  int end_coverage_frames = 0;
  /// End-of-text stall rollback (0: off): while frames remain, once this many voiced frames
  /// have been revealed over consecutive reveals at which the decoder chose end of text, the
  /// output is cut back to the start of its last sentence (the token after the last ".", "?"
  /// or "!" before its final token; its start if none) and decoding goes on over the frames
  /// revealed by then, once per cut length. A decoder that wants to end while speech keeps
  /// arriving is stuck on what it emitted from too little audio ("¿" from the first 2 s). Not
  /// the default: at 200 it lowered Whisper base's streaming WER on 177 dev clips in four
  /// languages from 20.92% to 19.59% but left clips 5 or more words worse, in those languages,
  /// in English and under eviction (benchmarks/results/quality_reference_dev_coverage.md).
  int eot_stall_frames = 0;
  /// With end_coverage_frames: the output is cut back to the start of its last sentence (the
  /// token after the last ".", "?" or "!" before its final token; its start if none) instead of
  /// its start. Not the default: with end_coverage_frames 200 it passed its dev rule (four
  /// languages' full cache 20.92% -> 20.10% WER, English and AudioKV unchanged), but under
  /// eviction it made most of the runs it changed worse (tiny.en Asterisk test: 155 of 167;
  /// benchmarks/results/quality_reference_dev_coverage.md).
  bool end_coverage_cut = false;

  /// Throws asr_error naming the first count out of its range.
  void validate() const {
    at_least(chunk_frames, 1, "chunk_frames");
    at_least(align_frames, 0, "align_frames");
    at_least(repeat_span_max, 1, "repeat_span_max");
    at_least(agreement_hypotheses, 2, "agreement_hypotheses");
    at_least(start_frames, 0, "start_frames");
    at_least(language_frames, 1, "language_frames");
    at_least(end_coverage_frames, 0, "end_coverage_frames");
    at_least(eot_stall_frames, 0, "eot_stall_frames");
  }

 private:
  static void at_least(int value, int least, const char* name) {
    if (value < least) {
      throw asr_error(std::string("streaming: ") + name + " must be >= " + std::to_string(least) +
                      ", got " + std::to_string(value));
    }
  }
};

/// Length of the longest common prefix of a and b.
inline size_t common_prefix(const std::vector<int32_t>& a, const int32_t* b, size_t b_size) {
  size_t n = 0;
  while (n < a.size() && n < b_size && a[n] == b[n]) ++n;
  return n;
}

/// The output `tokens` followed by a candidate `next`, read as one sequence of size() tokens.
struct output_with_next {
  const std::vector<int32_t>& tokens;
  int32_t next;

  std::ptrdiff_t size() const { return static_cast<std::ptrdiff_t>(tokens.size()) + 1; }
  int32_t operator[](std::ptrdiff_t i) const {
    return i + 1 == size() ? next : tokens[static_cast<size_t>(i)];
  }
  /// Whether the k tokens from `a` equal the k tokens from `b`.
  bool equal(std::ptrdiff_t a, std::ptrdiff_t b, std::ptrdiff_t k) const {
    for (std::ptrdiff_t i = 0; i < k; ++i) {
      if ((*this)[a + i] != (*this)[b + i]) return false;
    }
    return true;
  }
};

/// The shortest k <= max_span such that `tokens` + `next` ends in two equal spans of k tokens and
/// `peak` does not lie more than `advance` frames after the peak at which the first span's last
/// token was emitted (`peaks` per token); with `by_extent`, nor more than the first copy's
/// extent (that peak minus the peak before the copy, 0 at the start) after it. 0 when there is
/// none.
inline int repeated_span_without_progress(const std::vector<int32_t>& tokens,
                                          const std::vector<int>& peaks, int32_t next, int peak,
                                          int advance = 0, bool by_extent = false,
                                          int max_span = default_repeat_span_max) {
  const output_with_next out{tokens, next};
  const std::ptrdiff_t n = out.size();
  for (std::ptrdiff_t k = 1; k <= max_span && 2 * k <= n; ++k) {
    if (!out.equal(n - 2 * k, n - k, k)) continue;
    const int first_last = peaks[static_cast<size_t>(n - k - 1)];
    const int before = n - 2 * k - 1 >= 0 ? peaks[static_cast<size_t>(n - 2 * k - 1)] : 0;
    const int margin = by_extent ? std::max(advance, first_last - before) : advance;
    if (peak <= first_last + margin) return static_cast<int>(k);
  }
  return 0;
}

/// Where the run of consecutive equal copies of the last `span` tokens of `tokens` + `next`
/// begins: the smallest i such that [i, n) is whole copies of that span (n tokens with `next`).
inline int repeated_run_start(const std::vector<int32_t>& tokens, int32_t next, int span) {
  const output_with_next out{tokens, next};
  std::ptrdiff_t start = out.size() - span;
  while (start - span >= 0 && out.equal(start - span, start, span)) start -= span;
  return static_cast<int>(start);
}

/// @brief Greedy Whisper decoder over a cross_kv_cache, with an eviction hook called per
/// (layer, head) at every step. Decoding rules follow CTranslate2's Whisper generate with
/// beam_size 1: argmax over logits with config `suppress_ids` masked at every step and
/// `suppress_ids_begin` (blank, EOT) also masked at the first generated step; stop at EOT or
/// after min(n_text_ctx / 2, n_text_ctx - (prompt_len - 1)) generated tokens (224 for Whisper).
class whisper_decoder {
 public:
  /// Offline protocol: every cached frame is present from the first step.
  static decode_result decode(const whisper_model& m, cross_kv_cache& cache, kv_eviction_hook& hook,
                              const clip_context& clip) {
    return run(m, cache, hook, clip, nullptr);
  }

  /// Streaming protocol: the cache starts with the frames cache.visible() holds and the rest
  /// are revealed `chunk_frames` at a time. Before each reveal every (layer, head) may make
  /// room (kv_eviction_hook::on_reveal), so a policy holds at most its budget at every moment.
  /// A decode step's token is emitted (AlignAtt, Simul-Whisper arXiv 2406.10052) when the
  /// median over the alignment heads of the most-attended frame position is more than
  /// align_frames behind the newest revealed frame, or when every frame is revealed; otherwise
  /// (also when the token would be end of text) the next chunk is revealed and the step is
  /// computed again; with lookback_stop_frames >= 0 also while the peak is more than that many
  /// frames behind the furthest peak emitted so far. The encoder saw the whole window: revealed
  /// frames carry its context.
  static decode_result decode_streaming(const whisper_model& m, cross_kv_cache& cache,
                                        kv_eviction_hook& hook, const clip_context& clip,
                                        const streaming_options& opt) {
    return run(m, cache, hook, clip, &opt);
  }

 private:
  /// The language token with the highest logit after <|startoftranscript|> (Whisper's language
  /// detection; the first such token on ties).
  static int32_t most_likely_language(const whisper_model& m, const Eigen::VectorXf& logits) {
    int32_t best = -1;
    for (int32_t id = m.sot + 1; m.is_language_token(id); ++id) {
      if (best < 0 || logits[id] > logits[best]) best = id;
    }
    return best;
  }

  static decode_result run(const whisper_model& m, cross_kv_cache& cache, kv_eviction_hook& hook,
                           const clip_context& clip, const streaming_options* stream) {
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = process_cpu_seconds();
    const whisper_weights& w = m.w;
    const int d = w.d_model, H = w.dec_heads, hd = d / H;
    const int n_layers = static_cast<int>(w.dec.size());
    if (cache.n_layers() != n_layers || cache.n_heads() != H || cache.head_dim() != hd) {
      throw asr_error("cross_kv_cache shape does not match the model");
    }
    if (stream != nullptr) stream->validate();
    std::vector<int32_t> prompt = m.prompt();  // the language token may be detected at step 0
    const int prompt_len = static_cast<int>(prompt.size());
    const int max_new = std::min(w.n_text_ctx / 2, w.n_text_ctx - (prompt_len - 1));
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::vector<uint8_t> is_alignment(static_cast<size_t>(n_layers) * H, 0);
    for (const auto& lh : m.alignment_heads) {
      if (lh.first < n_layers && lh.second < H) is_alignment[lh.first * H + lh.second] = 1;
    }

    hook.on_clip_start(clip);
    for (int l = 0; l < n_layers; ++l) {
      for (int h = 0; h < H; ++h) hook.on_head_start(cache.view(l, h));
    }
    const double full_cells =
        static_cast<double>(n_layers) * H * (cache.capacity() + cache.n_sinks());

    // Self-attention cache: per layer, K and V rows indexed by decoder position.
    std::vector<mat_rm> self_k(n_layers, mat_rm::Zero(w.n_text_ctx, d));
    std::vector<mat_rm> self_v(n_layers, mat_rm::Zero(w.n_text_ctx, d));

    decode_result res;
    mat_rm x(1, d), xn, qkv, q, attn(1, d), proj, ff;
    std::vector<float> scores;
    std::vector<int32_t> move_to, peaks;
    // The hook's move map for (l, h): the hook may first rewrite the rows, then they compact.
    auto move = [&](int l, int h) {
      bool evicts = false;
      for (size_t i = 0; i < move_to.size(); ++i) {
        evicts = evicts || move_to[i] < 0;
        res.rows_moved += move_to[i] >= 0 && move_to[i] != static_cast<int32_t>(i) ? 1 : 0;
      }
      res.evicting_moves += evicts ? 1 : 0;
      hook.on_move(l, h, cache.k_ptr(l, h), cache.v_ptr(l, h), cache.pos_ptr(l, h),
                   cache.n_kv(l, h), cache.head_dim());
      cache.apply_move(l, h, move_to, hook.tiers(l, h));
    };
    Eigen::VectorXf logits;
    // The next-token logits of the last forward pass.
    auto project = [&]() -> const Eigen::VectorXf& {
      w.dec_ln.forward(x, xn);
      logits.noalias() = w.projection() * xn.row(0).transpose();
      if (w.out_bias.size()) logits += w.out_bias.transpose();
      return logits;
    };
    double kept_sum = 0.0, bytes_sum = 0.0, dense_bytes_sum = 0.0, error_sum = 0.0;
    long error_count = 0;
    res.peak_cells = cache.total_cells();
    Eigen::RowVectorXf reference_out(hd);

    // One decoder forward pass at position `step` for input `token`; the hooks see every
    // (layer, head). Leaves the last layer's output in x and the alignment peaks in `peaks`.
    auto forward = [&](int step, int32_t token, bool is_prompt, bool observed = true) {
      peaks.clear();
      x = w.tok_emb.row(token);
      if (w.scale_embeddings) x *= std::sqrt(static_cast<float>(d));
      x += w.dec_pos.row(step);
      for (int l = 0; l < n_layers; ++l) {
        const whisper_decoder_layer& L = w.dec[l];
        // Causal self-attention over positions 0..step.
        L.ln_self.forward(x, xn);
        L.self_qkv.forward(xn, qkv);
        self_k[l].row(step) = qkv.middleCols(d, d);
        self_v[l].row(step) = qkv.middleCols(2 * d, d);
        const int n_ctx = step + 1;
        scores.resize(static_cast<size_t>(std::max(n_ctx, cache.capacity())));
        for (int h = 0; h < H; ++h) {
          const auto qh = qkv.middleCols(h * hd, hd);
          Eigen::Map<Eigen::RowVectorXf> s(scores.data(), n_ctx);
          s.noalias() = (qh * scale) * self_k[l].block(0, h * hd, n_ctx, hd).transpose();
          softmax_inplace(scores.data(), n_ctx);
          attn.middleCols(h * hd, hd).noalias() = s * self_v[l].block(0, h * hd, n_ctx, hd);
        }
        L.self_out.forward(attn, proj);
        x += proj;

        // Cross-attention over each head's kept cells.
        L.ln_cross.forward(x, xn);
        L.cross_q.forward(xn, q);
        const int n_sinks = cache.n_sinks();
        for (int h = 0; h < H; ++h) {
          const int n_kv = cache.n_kv(l, h);
          Eigen::Map<const mat_rm> K(cache.k_ptr(l, h), n_kv, hd);
          Eigen::Map<const mat_rm> V(cache.v_ptr(l, h), n_kv, hd);
          // Scores [cells | window sinks], one softmax over both; the hook sees the cells'.
          scores.resize(std::max(scores.size(), static_cast<size_t>(n_kv + n_sinks)));
          Eigen::Map<Eigen::RowVectorXf> s(scores.data(), n_kv);
          Eigen::Map<Eigen::RowVectorXf> s_sink(scores.data() + n_kv, n_sinks);
          Eigen::Map<const mat_rm> K_sink(cache.sink_k(l, h), n_sinks, hd);
          Eigen::Map<const mat_rm> V_sink(cache.sink_v(l, h), n_sinks, hd);
          s.noalias() = (q.middleCols(h * hd, hd) * scale) * K.transpose();
          if (n_sinks > 0)
            s_sink.noalias() = (q.middleCols(h * hd, hd) * scale) * K_sink.transpose();
          if (const float* bias = hook.logit_bias(l, h)) {
            s += Eigen::Map<const Eigen::RowVectorXf>(bias, n_kv);
          }
          softmax_inplace(scores.data(), n_kv + n_sinks);
          if (cache.has_store()) {
            // Decoding reads the store; the dense rows give the reference output.
            reference_out.noalias() = s * V;
            cache.store(l, h).attend(q.data() + h * hd, attn.data() + h * hd, scores.data());
            const float ref_norm = reference_out.norm();
            if (ref_norm > 0.0f && observed) {  // a refresh's passes are not decode steps
              error_sum += (attn.middleCols(h * hd, hd) - reference_out).norm() / ref_norm;
              ++error_count;
            }
          } else {
            attn.middleCols(h * hd, hd).noalias() = s * V;
          }
          if (n_sinks > 0) attn.middleCols(h * hd, hd).noalias() += s_sink * V_sink;
          if (is_alignment[l * H + h] && n_kv > 0) {
            peaks.push_back(cache.pos_ptr(
                l, h)[std::max_element(scores.data(), scores.data() + n_kv) - scores.data()]);
          }

          if (!observed) continue;
          step_view sv;
          sv.cache = cache.view(l, h);
          sv.step = step;
          sv.is_prompt = is_prompt;
          sv.q = q.data() + h * hd;
          sv.probs = scores.data();
          move_to.clear();
          if (hook.on_step(sv, move_to)) move(l, h);
        }
        for (int h = 0; h < H && observed; ++h) {
          move_to.clear();
          if (hook.on_layer_step(l, h, move_to)) move(l, h);
        }
        L.cross_out.forward(attn, proj);
        x += proj;

        add_feed_forward(L, x, xn, ff, proj);
      }
    };

    // Streaming: reveal the next chunk, each (layer, head) making room first.
    auto reveal = [&]() {
      const int count = std::min(stream->chunk_frames, cache.capacity() - cache.visible());
      for (int l = 0; l < n_layers; ++l) {
        for (int h = 0; h < H; ++h) {
          move_to.clear();
          if (hook.on_reveal(cache.view(l, h), count, move_to)) move(l, h);
        }
      }
      const int first = cache.visible();
      cache.reveal(count);
      for (int l = 0; l < n_layers; ++l) {
        for (int h = 0; h < H; ++h) hook.on_append(cache.view(l, h), first, count);
      }
      res.peak_cells = std::max(res.peak_cells, cache.total_cells());
      ++res.reveals;
    };

    // The first and the last voiced frame among the clip's frames (capacity and -1 if none).
    int voice_onset = cache.capacity();
    int voice_end = -1;
    if (stream != nullptr && clip.is_voice != nullptr) {
      for (int j = 0; j < cache.capacity(); ++j) {
        if (clip.is_voice[j] != 0) {
          voice_onset = std::min(voice_onset, j);
          voice_end = j;
        }
      }
    }
    // Frames of speech past the furthest alignment peak of the output's tokens; a peak past
    // the last voiced frame (on the window's padding: a token written from no speech) does not
    // cover any.
    auto uncovered_frames = [&]() {
      int furthest = 0;
      for (int p : res.token_peaks) {
        if (p <= voice_end) furthest = std::max(furthest, p);
      }
      return std::max(0, voice_end - furthest);
    };
    // Voice gate: from the voice onset; without voice marks no token before the last reveal.
    const int first_voice = stream != nullptr && stream->voice_gate && clip.is_voice != nullptr
                                ? voice_onset
                                : cache.capacity();
    if (stream != nullptr) {
      const int onset = clip.is_voice != nullptr ? voice_onset : 0;
      const int frames =
          std::max(stream->start_frames, m.detect_language ? stream->language_frames : 0);
      const int heard = std::min(cache.capacity(), onset + frames);
      while (frames > 0 && cache.visible() < heard) reveal();
    }
    // Refresh: positions 0..step-1 recomputed with their inputs (prompt, then emitted tokens).
    int refreshed_at = -1;  // cache.visible() at the last refresh
    auto refresh = [&](int step) {
      refreshed_at = cache.visible();
      ++res.refreshes;
      for (int s = 0; s < step; ++s) {
        const int32_t in = s < prompt_len ? prompt[static_cast<size_t>(s)]
                                          : res.tokens[static_cast<size_t>(s - prompt_len)];
        forward(s, in, s < prompt_len - 1, false);
      }
    };
    // Voiced frames among [first, last) (all of them without voice marks).
    auto voiced_between = [&](int first, int last) {
      if (clip.is_voice == nullptr) return last - first;
      int n = 0;
      for (int j = first; j < last; ++j) n += clip.is_voice[j] != 0 ? 1 : 0;
      return n;
    };
    // The output's length up to its last sentence: tokens up to the last one before the final
    // token whose text ends in '.', '?' or '!' (0 if none).
    auto last_sentence_start = [&]() {
      for (int i = static_cast<int>(res.tokens.size()) - 2; i >= 0; --i) {
        const std::string text = m.vocab.decode({res.tokens[static_cast<size_t>(i)]}, m.eot);
        const size_t end = text.find_last_not_of(' ');
        if (end != std::string::npos && std::strchr(".?!", text[end]) != nullptr) return i + 1;
      }
      return 0;
    };
    // Local agreement: res.tokens[0, committed) is committed, the rest the current hypothesis;
    // `previous` holds the hypotheses after the commit point decoded before the last reveals,
    // oldest first, at most agreement_hypotheses - 1 of them.
    size_t committed = 0;
    std::vector<std::vector<int32_t>> previous;
    int furthest_peak = 0;  // streaming: the furthest alignment peak of an emitted token
    // Commits the common prefix of the current hypothesis and the previous ones (once there are
    // agreement_hypotheses - 1 of them); whether tokens past the commit point remain to be cut.
    auto agree = [&]() {
      const int32_t* current = res.tokens.data() + committed;
      const size_t current_size = res.tokens.size() - committed;
      size_t agreed = 0;
      if (previous.size() + 1 == static_cast<size_t>(stream->agreement_hypotheses)) {
        agreed = current_size;
        for (const std::vector<int32_t>& h : previous) {
          agreed = std::min(agreed, common_prefix(h, current, current_size));
        }
        previous.erase(previous.begin());
        for (std::vector<int32_t>& h : previous) h.erase(h.begin(), h.begin() + agreed);
      }
      previous.emplace_back(current + agreed, current + current_size);
      committed += agreed;
      if (previous.back().empty()) return false;
      res.redecoded_tokens += static_cast<int>(previous.back().size());
      return true;
    };
    // Rollbacks and agreement: the output cut back to its first `cut` tokens; decoding goes on
    // at that step.
    auto cut_back = [&](int cut, int& step, int32_t& token) {
      res.tokens.resize(static_cast<size_t>(cut));
      res.token_peaks.resize(static_cast<size_t>(cut));
      committed = std::min(committed, static_cast<size_t>(cut));
      furthest_peak = 0;
      for (int p : res.token_peaks) furthest_peak = std::max(furthest_peak, p);
      step = prompt_len - 1 + cut;
      token = cut > 0 ? res.tokens.back() : prompt.back();
    };
    // A rollback of one kind cuts back to a given output length at most once (`cut_to` holds
    // the lengths it went to); whether it cut.
    auto cut_once = [&](std::vector<int>& cut_to, int cut, int& count, int& step, int32_t& token) {
      if (std::find(cut_to.begin(), cut_to.end(), cut) != cut_to.end()) return false;
      cut_to.push_back(cut);
      ++count;
      cut_back(cut, step, token);
      return true;
    };
    // After a cut made without a refresh at this reveal: rows 0..step-1 over the frames revealed.
    auto refresh_if_stale = [&](int step) {
      if (refreshed_at != cache.visible()) refresh(step);
    };
    int32_t token = prompt[0];
    int emitted_peak = 0;             // streaming: the alignment peak of the token being emitted
    std::vector<int> rolled_back_to;  // streaming: output lengths the end rollback cut back to
    std::vector<int> hold_cut_to;     // streaming: output lengths the hold rollback cut back to
    std::vector<int> stall_cut_to;    // streaming: output lengths the stall rollback cut back to
    int eot_hold_from = -1;  // streaming: cache.visible() when the decoder began to choose EOT
    std::vector<int32_t> word_keys;  // streaming, repeat_by_words: the output's word keys
    for (int step = 0;; ++step) {
      const bool is_prompt = step < prompt_len - 1;
      const float ninf = -std::numeric_limits<float>::infinity();
      Eigen::Index best = 0;
      int hold = 0;  // consecutive reveals the repeat stop has held this step back
      for (;;) {
        forward(step, token, is_prompt);
        if (is_prompt) {
          if (step == 0 && m.detect_language) prompt[1] = most_likely_language(m, project());
          break;
        }
        project();
        for (int32_t id : m.suppress_ids) logits[id] = ninf;
        if (res.tokens.empty()) {
          for (int32_t id : m.suppress_ids_begin) logits[id] = ninf;
        }
        logits.maxCoeff(&best);  // first maximal index on ties
        if (stream == nullptr) break;
        std::sort(peaks.begin(), peaks.end());
        const int peak = peaks.empty() ? 0 : peaks[(peaks.size() - 1) / 2];
        const bool all_revealed = cache.visible() >= cache.capacity();
        // The stricter repeat tests (words, extent) decide while audio can still arrive; once
        // every frame is revealed only where asked. The output as they compare it: token ids
        // or word keys.
        const bool by_words =
            stream->repeat_by_words && (!all_revealed || stream->repeat_words_at_end);
        const bool by_extent =
            stream->repeat_by_extent && (!all_revealed || stream->repeat_extent_at_end);
        const std::vector<int32_t>& compared =
            by_words ? m.word_keys(res.tokens, word_keys) : res.tokens;
        const int32_t compared_best =
            by_words ? m.word_key[static_cast<size_t>(best)] : static_cast<int32_t>(best);
        const int span = stream->repeat_stop && best != m.eot
                             ? repeated_span_without_progress(
                                   compared, res.token_peaks, compared_best, peak,
                                   stream->repeat_advance, by_extent, stream->repeat_span_max)
                             : 0;
        const bool stuck = span > 0;
        const bool stale = (stuck && stream->refresh_on_hold) ||
                           (all_revealed && best == m.eot && stream->refresh_at_end);
        if (stale && refreshed_at != cache.visible()) {
          refresh(step);
          continue;
        }
        if (all_revealed) {
          // End rollback: the first copy starts at n + 1 - 2 * span of the n tokens + `best`,
          // a loop at its first consecutive copy.
          if (stuck && stream->end_stop && res.rollbacks < stream->end_rollbacks) {
            const int cut = stream->end_rollback_loop
                                ? repeated_run_start(compared, compared_best, span)
                                : static_cast<int>(res.tokens.size()) + 1 - 2 * span;
            if (cut_once(rolled_back_to, cut, res.rollbacks, step, token)) {
              continue;  // with refresh_on_hold, rows 0..step-1 were recomputed at this reveal
            }
          }
          if (stuck && stream->end_stop) best = m.eot;
          if (best == m.eot && stream->end_coverage_frames > 0 && res.coverage_restarts == 0 &&
              !res.tokens.empty() && uncovered_frames() > stream->end_coverage_frames) {
            ++res.coverage_restarts;
            cut_back(stream->end_coverage_cut ? last_sentence_start() : 0, step, token);
            refresh_if_stale(step);
            continue;
          }
          emitted_peak = peak;
          break;
        }
        if (stuck && stream->hold_rollback_reveals > 0 && hold >= stream->hold_rollback_reveals) {
          const int cut = repeated_run_start(compared, compared_best, span);
          if (cut_once(hold_cut_to, cut, res.hold_rollbacks, step, token)) {
            hold = 0;
            continue;  // as the end rollback
          }
        }
        eot_hold_from = best == m.eot ? (eot_hold_from < 0 ? cache.visible() : eot_hold_from) : -1;
        const int eot_hold =
            eot_hold_from >= 0 ? voiced_between(eot_hold_from, cache.visible()) : 0;
        res.longest_eot_hold_frames = std::max(res.longest_eot_hold_frames, eot_hold);
        if (eot_hold_from >= 0 && stream->eot_stall_frames > 0 && !res.tokens.empty() &&
            eot_hold >= stream->eot_stall_frames) {
          const int cut = last_sentence_start();
          eot_hold_from = -1;
          if (cut_once(stall_cut_to, cut, res.stall_rollbacks, step, token)) {
            refresh_if_stale(step);
            continue;
          }
        }
        const int newest = cache.visible() - 1;
        const bool going_back = stream->lookback_stop_frames >= 0 &&
                                peak < furthest_peak - stream->lookback_stop_frames;
        const bool before_voice = stream->voice_gate && newest < first_voice + stream->align_frames;
        if (best != m.eot && !going_back && !stuck && !before_voice &&
            peak < newest - stream->align_frames) {
          furthest_peak = std::max(furthest_peak, peak);
          emitted_peak = peak;
          break;
        }
        reveal();
        hold = stuck ? hold + 1 : 0;
        res.longest_hold = std::max(res.longest_hold, hold);
        res.held_to_end = res.held_to_end || (stuck && cache.visible() >= cache.capacity());
        if (stream->local_agreement && agree()) {
          cut_back(static_cast<int>(committed), step, token);
        }
        if (stream->refresh_prompt && res.tokens.empty()) refresh(step);
      }
      ++res.steps;
      kept_sum += static_cast<double>(cache.total_cells()) / full_cells;
      bytes_sum += static_cast<double>(cache.kv_bytes_held());
      dense_bytes_sum += static_cast<double>(cache.dense_kv_bytes());
      if (is_prompt) {
        token = prompt[static_cast<size_t>(step) + 1];
        continue;
      }
      token = static_cast<int32_t>(best);
      hook.on_token(step, token);
      if (token == m.eot) {
        res.reached_eot = true;
        break;
      }
      res.tokens.push_back(token);
      if (stream != nullptr) res.token_peaks.push_back(emitted_peak);
      if (static_cast<int>(res.tokens.size()) >= max_new) break;
    }
    hook.on_clip_end();
    if (stream != nullptr) res.end_gap_frames = uncovered_frames();
    res.language = m.multilingual ? prompt[1] : -1;
    res.mean_kept_fraction = kept_sum / std::max(1, res.steps);
    res.mean_kv_bytes = bytes_sum / std::max(1, res.steps);
    res.mean_dense_kv_bytes = dense_bytes_sum / std::max(1, res.steps);
    if (error_count > 0) res.attention_rel_error = error_sum / static_cast<double>(error_count);
    res.final_kept_fraction = static_cast<double>(cache.total_cells()) / full_cells;
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    res.cpu_seconds = process_cpu_seconds() - cpu0;
    return res;
  }
};

}  // namespace asr
