// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "asr_error.hpp"
#include "wav_reader.hpp"

namespace asr {

/// @brief One evaluation clip: id, dev/test split, WAV file and reference transcript.
struct clip_spec {
  std::string id;
  std::string split;
  std::string wav;        ///< absolute, or resolved against the manifest's directory
  std::string prompts;    ///< source prompt names (informational)
  std::string reference;  ///< empty when unknown
};

/// @brief Tab-separated clip manifest written by tools/make_clips.py.
/// Header line `clip_id split duration_s wav prompts reference` (tab-separated); one clip per
/// line; lines starting with '#' are comments. Relative `wav` paths are taken relative to the
/// manifest file's directory.
class clip_manifest {
 public:
  static std::vector<clip_spec> load(const std::string& path, const std::string& split) {
    std::ifstream in(path);
    if (!in) {
      throw asr_error(path +
                      ": cannot open manifest (create it with "
                      "examples/asr_whisper/tools/make_clips.py)");
    }
    const std::string dir = path.find('/') == std::string::npos
                                ? std::string(".")
                                : path.substr(0, path.find_last_of('/'));
    std::vector<clip_spec> clips;
    std::string line;
    std::vector<std::string> header;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      std::vector<std::string> f = split_tabs(line);
      if (header.empty()) {
        header = f;
        continue;
      }
      if (f.size() != header.size()) {
        throw asr_error(path + ":" + std::to_string(line_no) + ": expected " +
                        std::to_string(header.size()) + " tab-separated fields, found " +
                        std::to_string(f.size()));
      }
      clip_spec c;
      for (size_t i = 0; i < header.size(); ++i) {
        if (header[i] == "clip_id") c.id = f[i];
        if (header[i] == "split") c.split = f[i];
        if (header[i] == "wav") c.wav = f[i];
        if (header[i] == "prompts") c.prompts = f[i];
        if (header[i] == "reference") c.reference = f[i];
      }
      if (c.id.empty() || c.wav.empty()) {
        throw asr_error(path + ":" + std::to_string(line_no) + ": missing clip_id or wav");
      }
      if (c.wav[0] != '/') c.wav = dir + "/" + c.wav;
      if (split == "all" || c.split == split) clips.push_back(std::move(c));
    }
    if (header.empty()) throw asr_error(path + ": empty manifest");
    return clips;
  }

  /// Concatenates prompt WAVs (all at one sample rate) with `gap_ms` of silence between them.
  static pcm_audio concatenate(const std::vector<std::string>& wav_paths, int gap_ms) {
    pcm_audio out;
    for (size_t i = 0; i < wav_paths.size(); ++i) {
      const pcm_audio a = wav_reader::read(wav_paths[i]);
      if (out.sample_rate == 0) out.sample_rate = a.sample_rate;
      if (a.sample_rate != out.sample_rate) {
        throw asr_error(wav_paths[i] + ": sample rate " + std::to_string(a.sample_rate) +
                        " differs from the first prompt's " + std::to_string(out.sample_rate));
      }
      if (i > 0)
        out.samples.insert(out.samples.end(), static_cast<size_t>(gap_ms) * a.sample_rate / 1000,
                           0.0f);
      out.samples.insert(out.samples.end(), a.samples.begin(), a.samples.end());
    }
    return out;
  }

 private:
  static std::vector<std::string> split_tabs(const std::string& s) {
    std::vector<std::string> f;
    std::string cur;
    for (char c : s) {
      if (c == '\t') {
        f.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    f.push_back(cur);
    return f;
  }
};

}  // namespace asr
