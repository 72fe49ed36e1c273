// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "asr_error.hpp"
#include "bpe_vocabulary.hpp"
#include "byte_reader.hpp"
#include "ct2_model_file.hpp"
#include "json_value.hpp"
#include "text_fold.hpp"
#include "whisper_weights.hpp"

namespace asr {

/// @brief A CTranslate2 Whisper model directory (faster-whisper layout): `model.bin`,
/// `config.json` (suppress_ids, suppress_ids_begin, alignment_heads) and `vocabulary.txt`.
struct whisper_model {
  std::string dir;
  whisper_weights w;
  bpe_vocabulary vocab;
  std::vector<int32_t> suppress_ids;                 ///< masked at every step
  std::vector<int32_t> suppress_ids_begin;           ///< also masked at the first generated step
  std::vector<std::pair<int, int>> alignment_heads;  ///< (decoder layer, head)
  int32_t eot = -1, sot = -1, no_timestamps = -1, transcribe = -1, translate = -1;
  /// The prompt's language token of a multilingual model (set_language; <|en|> at load).
  int32_t language = -1;
  bool multilingual = false;
  /// set_language("auto") on a multilingual model: the decoder picks the prompt's language
  /// token from its first step (the most likely language token after <|startoftranscript|>).
  bool detect_language = false;
  /// [vocabulary] a key per token: equal for tokens with the same letters and digits after
  /// text_fold (" Please", "please", "PLEASE"; "Opción", "opcion"); a token without letters or
  /// digits is keyed by its characters other than spaces ("." and " ." one key, "-" another:
  /// "1-2-2." is no stutter); special tokens (>= eot) each their own negative key.
  std::vector<int32_t> word_key;

  /// `tokens` mapped through word_key into `out` (returned).
  const std::vector<int32_t>& word_keys(const std::vector<int32_t>& tokens,
                                        std::vector<int32_t>& out) const {
    out.resize(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) out[i] = word_key[static_cast<size_t>(tokens[i])];
    return out;
  }

  static whisper_model load(const std::string& dir) {
    whisper_model m;
    m.dir = dir;
    const ct2_model_file f = ct2_model_file::load(dir + "/model.bin");
    m.w = whisper_weights::load(f);
    m.vocab = bpe_vocabulary::load(dir + "/vocabulary.txt");
    if (static_cast<int>(m.vocab.size()) != m.w.n_vocab) {
      throw asr_error(dir + "/vocabulary.txt: " + std::to_string(m.vocab.size()) +
                      " tokens, but the model's embedding table has " +
                      std::to_string(m.w.n_vocab) + " rows");
    }
    m.eot = m.required_token("<|endoftext|>");
    m.sot = m.required_token("<|startoftranscript|>");
    m.no_timestamps = m.required_token("<|notimestamps|>");
    m.word_key = m.make_word_keys();
    m.language = m.vocab.id_of("<|en|>");
    m.transcribe = m.vocab.id_of("<|transcribe|>");
    m.translate = m.vocab.id_of("<|translate|>");
    // CTranslate2's rule: the multilingual vocabulary has 51865 (large-v3: 51866) entries,
    // English-only models (*.en) have 51864 and take no language/task tokens.
    m.multilingual = m.vocab.size() >= 51865 && m.language >= 0 && m.transcribe >= 0;

    const std::string cfg_path = dir + "/config.json";
    const std::vector<uint8_t> cfg_bytes = read_file_bytes(cfg_path);
    const json_value cfg =
        json_value::parse(std::string(cfg_bytes.begin(), cfg_bytes.end()), cfg_path);
    m.suppress_ids = m.id_list(cfg, "suppress_ids", cfg_path);
    m.suppress_ids_begin = m.id_list(cfg, "suppress_ids_begin", cfg_path);
    if (const json_value* ah = cfg.get("alignment_heads")) {
      for (const json_value& p : ah->items()) {
        if (p.items().size() == 2 && p.items()[0].is_number() && p.items()[1].is_number()) {
          m.alignment_heads.emplace_back(static_cast<int>(p.items()[0].number()),
                                         static_cast<int>(p.items()[1].number()));
        }
      }
    }
    return m;
  }

  /// word_key for every token of the vocabulary.
  std::vector<int32_t> make_word_keys() const {
    std::vector<int32_t> keys(vocab.size());
    std::unordered_map<std::string, int32_t> ids;
    for (size_t t = 0; t < keys.size(); ++t) {
      const auto id = static_cast<int32_t>(t);
      if (id >= eot) {
        keys[t] = -1 - id;
        continue;
      }
      const std::string text = vocab.decode({id}, eot);
      std::string word;
      for (const char c : text_fold::apply(text)) {
        if (c != ' ') word += c;
      }
      if (word.empty()) {
        word = "\x01";  // below every letter and digit: no word has this key
        for (const char c : text) {
          if (!std::isspace(static_cast<unsigned char>(c))) word += c;
        }
      }
      keys[t] = ids.emplace(word, static_cast<int32_t>(ids.size())).first->second;
    }
    return keys;
  }

  /// Decoder prompt: `<|startoftranscript|><|notimestamps|>` for English-only models,
  /// `<|startoftranscript|><|xx|><|transcribe|><|notimestamps|>` for multilingual ones, xx
  /// the language (set_language; en by default).
  std::vector<int32_t> prompt() const {
    if (multilingual) return {sot, language, transcribe, no_timestamps};
    return {sot, no_timestamps};
  }

  /// Transcribes speech in the language `code` (Whisper's language tokens: "en", "es", "fr",
  /// ...), or detects it per clip with "auto" (detect_language). English-only models take "en"
  /// or "auto" (both English). Throws asr_error naming the code, and leaves the model
  /// unchanged, when the model has no such language.
  void set_language(const std::string& code) {
    if (code == "auto") {
      detect_language = multilingual;
      return;
    }
    if (!multilingual) {
      if (code != "en") {
        throw asr_error("language '" + code + "': " + dir + " is an English-only model");
      }
      return;
    }
    const int32_t id = vocab.id_of("<|" + code + "|>");
    if (!is_language_token(id)) {
      throw asr_error("language '" + code + "': not one of " + vocab.path() +
                      "'s language tokens (<|en|>, <|es|>, <|fr|>, ...)");
    }
    language = id;
    detect_language = false;
  }

  /// Whether `id` is a language token: Whisper's lie between <|startoftranscript|> and
  /// <|translate|>.
  bool is_language_token(int32_t id) const {
    return multilingual && id > sot && id < static_cast<int32_t>(vocab.size()) &&
           (translate < 0 || id < translate);
  }

  /// "es" for <|es|>; "en" for an English-only model (its prompt has no language token).
  std::string language_code(int32_t id) const {
    if (!multilingual) return "en";
    const std::string& t = vocab.token(id);
    return t.size() > 4 ? t.substr(2, t.size() - 4) : t;
  }

  int n_dec_layers() const { return static_cast<int>(w.dec.size()); }
  int n_dec_heads() const { return w.dec_heads; }
  int head_dim() const { return w.d_model / w.dec_heads; }

 private:
  int32_t required_token(const std::string& t) const {
    const int32_t id = vocab.id_of(t);
    if (id < 0) throw asr_error(vocab.path() + ": special token " + t + " not found");
    return id;
  }

  std::vector<int32_t> id_list(const json_value& cfg, const std::string& key,
                               const std::string& file) const {
    std::vector<int32_t> ids;
    const json_value* v = cfg.get(key);
    if (v == nullptr) return ids;  // older conversions: no default suppression list
    if (!v->is_array()) throw asr_error(file + ": '" + key + "' is not an array");
    for (const json_value& x : v->items()) {
      if (!x.is_number() || x.number() < 0 || x.number() >= w.n_vocab) {
        throw asr_error(file + ": '" + key + "' holds an id outside [0, " +
                        std::to_string(w.n_vocab) + ")");
      }
      ids.push_back(static_cast<int32_t>(x.number()));
    }
    return ids;
  }
};

}  // namespace asr
