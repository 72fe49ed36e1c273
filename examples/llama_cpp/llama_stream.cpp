// SPDX-License-Identifier: Apache-2.0
// llama_stream: any GGUF model, any text, any audiokv policy, inside llama.cpp.
//
//   llama_stream --model FILE --text FILE --task ppl|passkey|generate --policies a,b,...
//                --budgets 128,256,512 [--max-tokens N] [--threads N] [--json] [options]
//
// One result per (task, policy, budget) [, passkey depth]; with --json one JSON object per line.
// A case that fails prints an error row (status "error") and the run goes on.
//
// Policies: `full` (no eviction, n_ctx = the whole run), `context_shift` (llama.cpp's own rule,
// tools/server/server-context.cpp, server_context_impl::pre_decode: keep n_keep tokens (+1 with
// a BOS), drop half of the rest, llama_memory_seq_rm + llama_memory_seq_add shift the positions
// back), and every audiokv::make_policy() name (audiokv, streaming_llm, h2o, tova, snapkv, ...)
// through audiokv::llama_cpp_adapter. Every case runs with flash attention disabled, the same
// kernels for all. `oracle_future` (ppl only) is a ceiling, not a policy: a first run keeping
// every cell records the adapter's scores, and at each eviction the oracle keeps the cells the
// rest of that run attends most (oracle_future.hpp).
//
// Tasks:
//  ppl       streaming perplexity: the text's first --max-tokens tokens fed in chunks of --chunk
//            (default 16), every token scored, eviction between chunks; per-segment NLL.
//  passkey   the standard pass-key prompt (filler, "The pass key is NNNNN. Remember it. ..." at
//            each of --depths, the question at the end) of about --max-tokens tokens; --budgets
//            may be "20%" of the prompt. --passkey-mode once: prefill, compress once to the
//            budget with the question in the window, answer (the kvpress setting); stream:
//            chunked prefill of --chunk (64) with eviction between chunks, question unseen.
//            --text is not read (the filler is the standard one).
//  generate  prefill the text's first --max-tokens tokens (chunks of --chunk, eviction between),
//            then --gen greedy tokens one at a time with eviction after each; tokens/s of the
//            generation and the adapter's cost split (capture, observe, plan, seq_rm) per token.
#include <audiokv/engines/llama_cpp.hpp>

#include "oracle_future.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

struct options {
  std::string model, text, task = "ppl", passkey_mode = "once", tag;
  std::vector<std::string> policies{"full", "audiokv"};
  std::vector<std::string> budgets{"512"};
  std::vector<int> depths{10, 30, 50, 70, 90};
  int max_tokens = 4096;
  int threads = 1;
  int chunk = 0;  // 0: 16 (ppl, generate) or 64 (passkey stream)
  int gen = 64;
  int segment = 512;
  int oracle_horizon = -1;  // oracle_future: query positions counted ahead; -1: the budget, 0: all
  int seed = 0;
  bool json = false;
  // Adapter configuration: the adapter's defaults unless given.
  std::vector<std::int32_t> layers = audiokv::llama_cpp_config{}.layers;
  audiokv::score_reduce head_reduce = audiokv::llama_cpp_config{}.head_reduce;
  audiokv::score_reduce layer_reduce = audiokv::llama_cpp_config{}.layer_reduce;
  // "audiokv": changes to its default configuration (--audiokv-set), for dev experiments.
  audiokv::audiokv_config audiokv{};
  // --text-frame audio: text tokens carry no frame_flag_text (the speech rules treat them as
  // audio frames, as before the flag existed); the adapter's default is text.
  bool text_as_audio = false;
  audiokv::eviction_rule eviction = audiokv::llama_cpp_config{}.eviction;
};

/// The whole of `text` as a finite number, or an error that names `what`.
double to_real(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  double v = 0.0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !std::isfinite(v))
    throw std::runtime_error(what + ": expected a number, got '" + text + "'");
  return v;
}

/// The whole of `text` as an int, or an error that names `what`.
int to_int(const std::string& text, const std::string& what) {
  const double v = to_real(text, what);
  if (v != std::floor(v) || v < std::numeric_limits<int>::min() ||
      v > std::numeric_limits<int>::max())
    throw std::runtime_error(what + ": expected an integer, got '" + text + "'");
  return static_cast<int>(v);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

// --audiokv-set KEY=VALUE,...: fields of the "audiokv" policy's configuration (recent: the
// recent window in cells, i.e. min_retention_ms = CELLS x frame_ms; text_share:
// text_recent_share).
void parse_audiokv_set(const std::string& list, audiokv::audiokv_config& c) {
  for (const auto& item : split(list, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw std::runtime_error("--audiokv-set: KEY=VALUE, got " + item);
    const std::string key = item.substr(0, eq);
    const double v = to_real(item.substr(eq + 1), "--audiokv-set " + key);
    if (key == "sinks")
      c.speech.sinks.enabled = v != 0.0;
    else if (key == "coverage")
      c.speech.coverage.enabled = v != 0.0;
    else if (key == "frontier")
      c.speech.frontier.enabled = v != 0.0;
    else if (key == "recent")
      c.min_retention_ms = static_cast<float>(v) * c.frame_ms;
    else if (key == "trigger")
      c.trigger = static_cast<float>(v);
    else if (key == "smooth_text")
      c.smooth_text = v != 0.0;
    else if (key == "alpha")
      c.alpha = static_cast<float>(v);
    else if (key == "text_share")
      c.text_recent_share = static_cast<float>(v);
    else
      throw std::runtime_error("--audiokv-set: unknown key " + key);
  }
}

audiokv::score_reduce parse_reduce(const std::string& s) {
  if (s == "mean") return audiokv::score_reduce::mean;
  if (s == "max") return audiokv::score_reduce::max;
  throw std::runtime_error("reduce must be mean or max, got " + s);
}

void usage() {
  std::fprintf(stderr,
               "usage: llama_stream --model FILE --text FILE --task ppl|passkey|generate\n"
               "  --policies full,context_shift,audiokv,... --budgets 128,256,512|20%%\n"
               "  [--max-tokens N] [--threads N] [--json] [--chunk N] [--gen N] [--segment N]\n"
               "  [--depths 10,50,90] [--passkey-mode once|stream] [--seed N] [--tag STR]\n"
               "  [--layers 0,1,...] [--head-reduce mean|max] [--layer-reduce mean|max]\n"
               "  [--audiokv-set sinks=0|1,coverage=0|1,frontier=0|1,recent=CELLS,trigger=F,\n"
               "                 smooth_text=0|1,alpha=A,text_share=S]\n"
               "  [--text-frame text|audio] [--eviction budget|trigger]\n"
               "  [--oracle-horizon budget|N]  oracle_future: future tokens counted (0: all)\n");
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--model")
      o.model = value();
    else if (a == "--text")
      o.text = value();
    else if (a == "--task")
      o.task = value();
    else if (a == "--policies")
      o.policies = split(value(), ',');
    else if (a == "--budgets")
      o.budgets = split(value(), ',');
    else if (a == "--max-tokens")
      o.max_tokens = to_int(value(), a);
    else if (a == "--threads")
      o.threads = to_int(value(), a);
    else if (a == "--chunk")
      o.chunk = to_int(value(), a);
    else if (a == "--gen")
      o.gen = to_int(value(), a);
    else if (a == "--segment")
      o.segment = to_int(value(), a);
    else if (a == "--oracle-horizon") {
      const std::string v = value();
      o.oracle_horizon = v == "budget" ? -1 : std::max(0, to_int(v, a));
    } else if (a == "--seed")
      o.seed = to_int(value(), a);
    else if (a == "--passkey-mode")
      o.passkey_mode = value();
    else if (a == "--tag")
      o.tag = value();
    else if (a == "--json")
      o.json = true;
    else if (a == "--depths") {
      o.depths.clear();
      for (const auto& d : split(value(), ',')) o.depths.push_back(to_int(d, a));
    } else if (a == "--layers") {
      for (const auto& l : split(value(), ',')) o.layers.push_back(to_int(l, a));
    } else if (a == "--head-reduce")
      o.head_reduce = parse_reduce(value());
    else if (a == "--layer-reduce")
      o.layer_reduce = parse_reduce(value());
    else if (a == "--audiokv-set")
      parse_audiokv_set(value(), o.audiokv);
    else if (a == "--eviction") {
      const std::string v = value();
      if (v != "budget" && v != "trigger")
        throw std::runtime_error("--eviction: budget or trigger");
      o.eviction = v == "budget" ? audiokv::eviction_rule::budget : audiokv::eviction_rule::trigger;
    } else if (a == "--text-frame") {
      const std::string v = value();
      if (v != "text" && v != "audio") throw std::runtime_error("--text-frame: text or audio");
      o.text_as_audio = v == "audio";
    } else if (a == "--help" || a == "-h") {
      usage();
      std::exit(0);
    } else {
      throw std::runtime_error("unknown argument " + a);
    }
  }
  if (o.model.empty()) throw std::runtime_error("--model is required");
  if (o.task != "passkey" && o.text.empty()) throw std::runtime_error("--text is required");
  if (o.task != "ppl" && o.task != "passkey" && o.task != "generate")
    throw std::runtime_error("--task must be ppl, passkey or generate");
  if (o.passkey_mode != "once" && o.passkey_mode != "stream")
    throw std::runtime_error("--passkey-mode must be once or stream");
  if (o.chunk == 0) o.chunk = (o.task == "passkey" && o.passkey_mode == "stream") ? 64 : 16;
  if (o.chunk < 1 || o.max_tokens < 2 || o.threads < 1 || o.gen < 1 || o.segment < 1)
    throw std::runtime_error(
        "--chunk, --threads, --gen, --segment must be >= 1, --max-tokens >= 2");
  return o;
}

// Bytes in [lo, hi] allowed after a UTF-8 lead byte (RFC 3629: no overlong forms, surrogates
// or code points above U+10FFFF); the length of the sequence it starts, 0 if none.
int utf8_length(unsigned char lead, unsigned char& lo, unsigned char& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
    return 4;
  }
  return 0;
}

// A JSON string's contents: quotes, backslashes and control characters escaped, and every byte
// that is not part of a valid UTF-8 sequence replaced by U+FFFD (a model's tokens may end or
// begin inside a character, and JSON must be UTF-8).
std::string json_escape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      unsigned char lo = 0, hi = 0;
      const int n = utf8_length(c, lo, hi);
      bool valid = n > 0 && i + static_cast<std::size_t>(n) <= s.size();
      for (int k = 1; valid && k < n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
        valid = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
      }
      if (valid) {
        out.append(s, i, static_cast<std::size_t>(n));
        i += static_cast<std::size_t>(n - 1);
      } else {
        out += "\xEF\xBF\xBD";  // U+FFFD
      }
    }
  }
  return out;
}

// A JSON object built field by field, in insertion order.
class row {
 public:
  row& str(const std::string& k, const std::string& v) {
    return raw(k, "\"" + json_escape(v) + "\"");
  }
  row& num(const std::string& k, double v) {
    if (!std::isfinite(v)) return raw(k, "null");
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return raw(k, buf);
  }
  row& integer(const std::string& k, long long v) { return raw(k, std::to_string(v)); }
  row& boolean(const std::string& k, bool v) { return raw(k, v ? "true" : "false"); }
  row& array(const std::string& k, const std::vector<double>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%.6g", i ? "," : "", v[i]);
      s += buf;
    }
    return raw(k, s + "]");
  }
  row& raw(const std::string& k, const std::string& v) {
    fields_.emplace_back(k, v);
    return *this;
  }
  std::string json() const {
    std::string s = "{";
    for (std::size_t i = 0; i < fields_.size(); ++i)
      s += (i ? ", \"" : "\"") + fields_[i].first + "\": " + fields_[i].second;
    return s + "}";
  }
  row& merge(const row& other) {
    fields_.insert(fields_.end(), other.fields_.begin(), other.fields_.end());
    return *this;
  }
  std::string text() const {
    std::string s;
    for (const auto& f : fields_) {
      if (f.second.size() > 60) continue;  // arrays and long strings: --json only
      s += f.first + "=" + f.second + " ";
    }
    return s;
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text, bool bos) {
  int n = -llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), nullptr, 0, bos,
                          false);
  std::vector<llama_token> out(static_cast<std::size_t>(std::max(n, 0)));
  if (n > 0) {
    n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), out.data(), n, bos,
                       false);
    if (n < 0) throw std::runtime_error("llama_tokenize failed");
    out.resize(static_cast<std::size_t>(n));
  }
  return out;
}

std::string detokenize(const llama_vocab* vocab, const std::vector<llama_token>& tokens) {
  std::string s;
  char buf[256];
  for (llama_token t : tokens) {
    const int n = llama_token_to_piece(vocab, t, buf, sizeof buf, 0, false);
    if (n > 0) s.append(buf, static_cast<std::size_t>(n));
  }
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// -ln p(target) from one row of logits.
double nll(const float* logits, int n_vocab, llama_token target) {
  float mx = logits[0];
  for (int i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0.0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
  return std::log(sum) - static_cast<double>(logits[target] - mx);
}

llama_token argmax(const float* logits, int n_vocab) {
  return static_cast<llama_token>(std::max_element(logits, logits + n_vocab) - logits);
}

// One sequence (0) of one context, whichever way its cache is bounded.
class runner {
 public:
  // budget: the policy's budget; capacity: its slots (context_shift: its n_ctx); n_ctx_cells:
  // the context's cells (llama.cpp rounds it up to a multiple of 256).
  // custom: the sequence's policy object instead of make_policy(policy) (oracle_future).
  runner(llama_model* model, const options& o, const std::string& policy, int budget, int capacity,
         int n_ctx_cells, std::unique_ptr<audiokv::eviction_policy> custom = nullptr)
      : policy_(policy) {
    llama_context_params p = llama_context_default_params();
    p.n_ctx = static_cast<uint32_t>(n_ctx_cells);
    p.n_batch = p.n_ubatch = 512;
    p.n_seq_max = 1;
    p.n_threads = p.n_threads_batch = o.threads;
    p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    p.no_perf = true;
    if (policy == "full" || policy == "context_shift") {
      ctx_ = llama_init_from_model(model, p);
      if (ctx_ == nullptr) throw std::runtime_error("llama_init_from_model failed");
      shift_ctx_ = capacity;
    } else {
      audiokv::llama_cpp_config c;
      c.layers = o.layers;
      c.head_reduce = o.head_reduce;
      c.layer_reduce = o.layer_reduce;
      if (o.text_as_audio) c.text_frame.flags = audiokv::frame_flag_none;
      c.eviction = o.eviction;
      adapter_ = std::make_unique<audiokv::llama_cpp_adapter>(model, p, c);
      audiokv::policy_options po;
      po.audiokv = o.audiokv;
      po.budget = budget;
      po.capacity = capacity;
      po.seed = static_cast<std::uint64_t>(o.seed);
      if (custom)
        adapter_->add_sequence(0, std::move(custom));
      else
        adapter_->add_sequence(0, policy, po);
      ctx_ = adapter_->context();
    }
    n_ctx_ = static_cast<int>(llama_n_ctx(ctx_));
    batch_ = llama_batch_init(512, 0, 1);
  }
  ~runner() {
    llama_batch_free(batch_);
    if (!adapter_ && ctx_ != nullptr) llama_free(ctx_);
  }
  runner(const runner&) = delete;
  runner& operator=(const runner&) = delete;

  // Decodes tokens[0, n) at the next positions, all with logits; no eviction.
  void decode(const llama_token* tokens, int n) {
    if (policy_ == "context_shift") shift_for(n);
    batch_.n_tokens = n;
    for (int i = 0; i < n; ++i) {
      batch_.token[i] = tokens[i];
      batch_.pos[i] = n_past_ + i;
      batch_.n_seq_id[i] = 1;
      batch_.seq_id[i][0] = 0;
      batch_.logits[i] = 1;
    }
    const int rc = adapter_ ? adapter_->decode(batch_) : llama_decode(ctx_, batch_);
    if (rc != 0) throw std::runtime_error("llama_decode returned " + std::to_string(rc));
    n_past_ += n;
    cells_ += n;
    note_cells();
  }
  // The adapter's evict(): to the budget (or at the policy's trigger, --eviction trigger).
  void evict() {
    if (!adapter_) return;
    adapter_->evict(0);
    cells_ = adapter_->policy(0).num_cells() + (adapter_->deferred(0) >= 0 ? 1 : 0);
  }
  void compress(int target) {
    if (!adapter_) return;
    adapter_->compress(0, target);
    cells_ = adapter_->policy(0).num_cells() + (adapter_->deferred(0) >= 0 ? 1 : 0);
  }
  const float* logits(int i) const { return llama_get_logits_ith(ctx_, i); }
  int cells() const { return cells_; }
  int n_ctx() const { return n_ctx_; }
  double mean_cells() const { return samples_ ? cell_sum_ / samples_ : 0.0; }
  int max_cells() const { return max_cells_; }
  int shifts() const { return shifts_; }
  audiokv::llama_cpp_adapter* adapter() const { return adapter_.get(); }

 private:
  // tools/server/server-context.cpp, pre_decode(): when the slot is full, keep n_keep tokens
  // (+1 with a BOS; the server's default n_keep is 0), discard half of the rest, shift the
  // remainder back. The server tests n_tokens + 1 >= n_ctx before one generated token; for a
  // chunk of n tokens the same test is n_tokens + n >= n_ctx.
  void shift_for(int n) {
    const llama_vocab* vocab = llama_model_get_vocab(llama_get_model(ctx_));
    while (n_past_ + n >= shift_ctx_) {
      int n_keep = llama_vocab_get_add_bos(vocab) ? 1 : 0;
      n_keep = std::min(shift_ctx_ - 4, n_keep);
      const int n_left = n_past_ - n_keep;
      int n_discard = n_left / 2;
      n_discard = std::clamp(n_discard, 0, std::max(0, n_left - 1));
      if (n_discard == 0) throw std::runtime_error("context_shift: chunk larger than n_ctx");
      llama_memory_t mem = llama_get_memory(ctx_);
      llama_memory_seq_rm(mem, 0, n_keep, n_keep + n_discard);
      llama_memory_seq_add(mem, 0, n_keep + n_discard, n_past_, -n_discard);
      n_past_ -= n_discard;
      cells_ -= n_discard;
      ++shifts_;
    }
  }
  void note_cells() {
    cell_sum_ += cells_;
    ++samples_;
    max_cells_ = std::max(max_cells_, cells_);
  }

  std::string policy_;
  llama_context* ctx_ = nullptr;
  std::unique_ptr<audiokv::llama_cpp_adapter> adapter_;
  llama_batch batch_{};
  int n_ctx_ = 0;
  int shift_ctx_ = 0;
  int n_past_ = 0;
  int cells_ = 0;
  double cell_sum_ = 0.0;
  long long samples_ = 0;
  int max_cells_ = 0;
  int shifts_ = 0;
};

void add_costs(row& r, const runner& run) {
  r.integer("n_ctx", run.n_ctx())
      .num("mean_cells", run.mean_cells())
      .integer("max_cells", run.max_cells())
      .integer("shifts", run.shifts());
  if (const auto* a = run.adapter()) {
    const auto& t = a->timings();
    r.num("decode_s", t.decode)
        .num("capture_s", t.capture)
        .num("observe_s", t.observe)
        .num("plan_s", t.plan)
        .num("seq_rm_s", t.seq_rm)
        .integer("evictions", t.evictions)
        .integer("seq_rm_calls", t.ranges)
        .integer("evicted", t.evicted);
  }
}

// KV bytes per cell: K and V of every layer (F16 cache).
double kv_bytes_per_cell(const llama_model* model) {
  const double head_dim =
      static_cast<double>(llama_model_n_embd(model)) / llama_model_n_head(model);
  return 2.0 * llama_model_n_layer(model) * llama_model_n_head_kv(model) * head_dim * 2.0;
}

int budget_for(const std::string& spec, int n_tokens) {
  if (!spec.empty() && spec.back() == '%') {
    const double f = to_real(spec.substr(0, spec.size() - 1), "--budgets") / 100.0;
    return std::max(1, static_cast<int>(std::lround(f * n_tokens)));
  }
  return to_int(spec, "--budgets");
}

// ---- oracle_future ----
// The future attention of `tokens` fed in chunks of o.chunk with every cell kept (recorded once
// per run of llama_stream: every budget replays the same record).
std::shared_ptr<llama_stream::future_attention> record_future(
    llama_model* model, const options& o, const std::vector<llama_token>& tokens) {
  static std::shared_ptr<llama_stream::future_attention> recorded;
  const int n = static_cast<int>(tokens.size());
  if (recorded && recorded->positions() == n) return recorded;
  if (n > 16384)
    throw std::runtime_error("oracle_future: records at most 16384 tokens (n^2 floats)");
  auto record = std::make_shared<llama_stream::future_attention>(n);
  audiokv::policy::baselines::baseline_config c;
  c.budget = c.capacity = n + o.chunk;
  runner run(model, o, "oracle_future", c.budget, c.capacity, c.capacity + 1,
             std::make_unique<llama_stream::oracle_future>(c, record, true));
  for (int g0 = 0; g0 < n; g0 += o.chunk) run.decode(tokens.data() + g0, std::min(o.chunk, n - g0));
  record->finish();
  recorded = record;
  return recorded;
}

// ---- ppl ----
row run_ppl(llama_model* model, const options& o, const std::vector<llama_token>& tokens,
            const std::string& policy, int budget) {
  const int n = static_cast<int>(tokens.size());
  const int chunk = o.chunk;
  const bool full = policy == "full";
  const int capacity = budget + chunk;
  const int n_ctx = full ? n + chunk : (policy == "context_shift" ? capacity : capacity + 1);
  std::unique_ptr<audiokv::eviction_policy> oracle;
  if (policy == "oracle_future") {
    audiokv::policy::baselines::baseline_config c;
    c.budget = budget;
    c.capacity = capacity;
    const int horizon = o.oracle_horizon < 0 ? budget : o.oracle_horizon;
    oracle = std::make_unique<llama_stream::oracle_future>(c, record_future(model, o, tokens),
                                                           false, horizon);
  }
  runner run(model, o, policy, budget, capacity, n_ctx, std::move(oracle));
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::vector<double> seg_sum((n + o.segment - 1) / o.segment, 0.0), seg_n(seg_sum.size(), 0.0);
  double total = 0.0;
  long long scored = 0;
  const auto t0 = clock_type::now();
  for (int g0 = 0; g0 < n; g0 += chunk) {
    const int m = std::min(chunk, n - g0);
    run.decode(tokens.data() + g0, m);
    for (int i = 0; i < m; ++i) {
      const int g = g0 + i;
      if (g + 1 >= n) break;
      const double v = nll(run.logits(i), n_vocab, tokens[static_cast<std::size_t>(g + 1)]);
      total += v;
      ++scored;
      seg_sum[static_cast<std::size_t>((g + 1) / o.segment)] += v;
      seg_n[static_cast<std::size_t>((g + 1) / o.segment)] += 1.0;
    }
    run.evict();
  }
  const double wall = seconds_since(t0);
  std::vector<double> seg(seg_sum.size());
  for (std::size_t i = 0; i < seg.size(); ++i) seg[i] = seg_n[i] > 0 ? seg_sum[i] / seg_n[i] : NAN;
  row r;
  r.num("ppl", std::exp(total / static_cast<double>(scored)))
      .num("nll", total / static_cast<double>(scored))
      .integer("scored", scored)
      .num("wall_s", wall)
      .num("tokens_per_s", n / wall);
  add_costs(r, run);
  r.integer("segment", o.segment).array("segment_nll", seg);
  return r;
}

// ---- passkey ----
struct passkey_prompt {
  std::vector<llama_token> tokens;
  std::string key;
  int key_pos = 0;
};

passkey_prompt make_passkey(const llama_vocab* vocab, int length, int depth, std::uint32_t seed) {
  // The prompt of Mohtashami & Jaggi (Landmark Attention, 2023), as used by LongLoRA and
  // kvpress-style evaluations.
  const std::string intro =
      "There is an important info hidden inside a lot of irrelevant text. Find it and memorize "
      "them. I will quiz you about the important information there.";
  const std::string filler =
      " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back "
      "again.";
  std::uint32_t x = seed * 2654435761u + static_cast<std::uint32_t>(depth) * 40503u + 12345u;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  const std::string key = std::to_string(10000 + x % 90000);
  const std::string needle =
      " The pass key is " + key + ". Remember it. " + key + " is the pass key.";
  const std::string question = " What is the pass key? The pass key is";
  const bool bos = llama_vocab_get_add_bos(vocab);
  const int fixed = static_cast<int>(tokenize(vocab, intro + needle + question, bos).size());
  const int per = static_cast<int>(tokenize(vocab, filler, false).size());
  const int reps = std::max(1, (length - fixed) / std::max(per, 1));
  const int before = static_cast<int>(std::lround(reps * depth / 100.0));
  std::string text = intro;
  for (int i = 0; i < before; ++i) text += filler;
  passkey_prompt p;
  p.key_pos = static_cast<int>(tokenize(vocab, text, bos).size());
  text += needle;
  for (int i = before; i < reps; ++i) text += filler;
  text += question;
  p.tokens = tokenize(vocab, text, bos);
  p.key = key;
  return p;
}

row run_passkey(llama_model* model, const options& o, const passkey_prompt& pk,
                const std::string& policy, int budget) {
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n = static_cast<int>(pk.tokens.size());
  const int answer_tokens = 8;
  const bool once = o.passkey_mode == "once";
  const bool full = policy == "full";
  if (once && policy == "context_shift")
    throw std::runtime_error(
        "context_shift has no one-shot compression (use --passkey-mode stream)");
  const int chunk = once ? 512 : o.chunk;
  int capacity, n_ctx;
  if (full) {
    capacity = n + answer_tokens;
    n_ctx = capacity + 1;
  } else if (once) {
    capacity = n + answer_tokens;
    n_ctx = capacity + 1;
  } else {
    capacity = budget + chunk;
    n_ctx = policy == "context_shift" ? capacity : capacity + 1;
  }
  // once: the policy holds the whole prompt (capacity) and compresses to `budget` with
  // plan_to after the prefill; no eviction runs before or after.
  runner run(model, o, policy, budget, capacity, n_ctx);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  const auto t0 = clock_type::now();
  for (int g0 = 0; g0 < n; g0 += chunk) {
    const int m = std::min(chunk, n - g0);
    run.decode(pk.tokens.data() + g0, m);
    if (!once && g0 + m < n) run.evict();
  }
  if (once && !full) run.compress(budget);
  const int held = run.cells();
  std::vector<llama_token> answer;
  llama_token next = argmax(run.logits(-1), n_vocab);
  for (int i = 0; i < answer_tokens; ++i) {
    answer.push_back(next);
    if (llama_vocab_is_eog(vocab, next)) break;
    run.decode(&next, 1);
    if (!once) run.evict();
    next = argmax(run.logits(-1), n_vocab);
  }
  const std::string text = detokenize(vocab, answer);
  row r;
  r.str("mode", o.passkey_mode)
      .integer("prompt_tokens", n)
      .integer("key_pos", pk.key_pos)
      .str("key", pk.key)
      .str("answer", text)
      .boolean("found", text.find(pk.key) != std::string::npos)
      .integer("cells_at_question", held)
      .num("wall_s", seconds_since(t0));
  add_costs(r, run);
  return r;
}

// ---- generate ----
row run_generate(llama_model* model, const options& o, const std::vector<llama_token>& prompt,
                 const std::string& policy, int budget) {
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n = static_cast<int>(prompt.size());
  const bool full = policy == "full";
  const int chunk = o.chunk;
  const int capacity = full ? n + o.gen : budget + chunk;
  const int n_ctx = full ? capacity : (policy == "context_shift" ? capacity : capacity + 1);
  runner run(model, o, policy, budget, capacity, n_ctx);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  const auto t0 = clock_type::now();
  for (int g0 = 0; g0 < n; g0 += chunk) {
    const int m = std::min(chunk, n - g0);
    run.decode(prompt.data() + g0, m);
    run.evict();
  }
  const double prefill = seconds_since(t0);
  if (run.adapter() != nullptr) run.adapter()->reset_timings();
  std::vector<llama_token> out;
  llama_token next = argmax(run.logits(-1), n_vocab);
  double decode_s = 0.0;
  const auto t1 = clock_type::now();
  for (int i = 0; i < o.gen; ++i) {
    out.push_back(next);
    const auto td = clock_type::now();
    run.decode(&next, 1);
    decode_s += seconds_since(td);
    run.evict();
    next = argmax(run.logits(-1), n_vocab);
  }
  const double gen_s = seconds_since(t1);
  row r;
  r.integer("prompt_tokens", n)
      .integer("generated", o.gen)
      .num("prefill_s", prefill)
      .num("gen_s", gen_s)
      .num("tokens_per_s", o.gen / gen_s)
      .num("step_decode_s", decode_s / o.gen)
      .num("kv_bytes", kv_bytes_per_cell(model) * run.n_ctx());
  add_costs(r, run);
  if (const auto* a = run.adapter()) {
    const auto& t = a->timings();
    // Per generated token, as fractions of llama_decode's own time (capture included in it).
    const double d = t.decode;
    r.num("capture_frac", t.capture / d)
        .num("observe_frac", t.observe / d)
        .num("plan_frac", t.plan / d)
        .num("seq_rm_frac", t.seq_rm / d)
        .num("overhead_frac", (t.observe + t.plan + t.seq_rm) / d);
  }
  r.str("output", detokenize(vocab, out));
  return r;
}

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_stream: %s\n", e.what());
    usage();
    return 2;
  }
  llama_log_set(quiet_log, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(o.model.c_str(), mp);
  if (model == nullptr) {
    std::fprintf(stderr, "llama_stream: cannot load %s\n", o.model.c_str());
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<llama_token> tokens;
  if (o.task != "passkey") {
    try {
      tokens = tokenize(vocab, read_file(o.text), llama_vocab_get_add_bos(vocab));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "llama_stream: %s\n", e.what());
      llama_model_free(model);
      return 1;
    }
    if (static_cast<int>(tokens.size()) > o.max_tokens)
      tokens.resize(static_cast<std::size_t>(o.max_tokens));
  }
  const std::string model_name = o.model.substr(o.model.find_last_of('/') + 1);
  const std::string text_name = o.text.substr(o.text.find_last_of('/') + 1);
  int failures = 0;
  auto emit = [&](row r) { std::cout << (o.json ? r.json() : r.text()) << std::endl; };
  std::vector<int> depths = o.task == "passkey" ? o.depths : std::vector<int>{-1};
  for (int depth : depths) {
    passkey_prompt pk;
    if (o.task == "passkey")
      pk = make_passkey(vocab, o.max_tokens, depth, static_cast<std::uint32_t>(o.seed));
    const int n_tokens =
        o.task == "passkey" ? static_cast<int>(pk.tokens.size()) : static_cast<int>(tokens.size());
    for (const auto& policy : o.policies) {
      std::vector<std::string> budgets = o.budgets;
      if (policy == "full") budgets = {"0"};  // one row: the budget does not apply
      for (const auto& spec : budgets) {
        row head;
        head.str("task", o.task).str("policy", policy).str("budget_spec", spec);
        if (!o.tag.empty()) head.str("tag", o.tag);
        int budget = 0;
        row result;
        std::string error;
        try {
          budget = policy == "full" ? n_tokens : budget_for(spec, n_tokens);
          if (policy == "oracle_future" && o.task != "ppl")
            throw std::runtime_error("oracle_future is a ceiling of --task ppl only");
          if (o.task == "ppl")
            result = run_ppl(model, o, tokens, policy, budget);
          else if (o.task == "passkey")
            result = run_passkey(model, o, pk, policy, budget);
          else
            result = run_generate(model, o, tokens, policy, budget);
        } catch (const audiokv::error& e) {
          error = std::string(e.what()) + " [argument " + e.argument() + "]";
        } catch (const std::exception& e) {
          error = e.what();
        }
        head.integer("budget", budget)
            .integer("tokens", n_tokens)
            .integer("chunk", o.chunk)
            .integer("threads", o.threads);
        if (o.task == "passkey") head.integer("depth", depth);
        head.str("model", model_name).str("text", o.task == "passkey" ? "passkey" : text_name);
        head.str("status", error.empty() ? "ok" : "error");
        if (!error.empty()) {
          ++failures;
          head.str("error", error);
          emit(head);
          continue;
        }
        emit(head.merge(result));
      }
    }
  }
  llama_model_free(model);
  llama_backend_free();
  std::fprintf(stderr, "llama_stream: %d case(s) failed\n", failures);
  return failures == 0 ? 0 : 3;
}
