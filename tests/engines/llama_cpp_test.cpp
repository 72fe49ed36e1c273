// SPDX-License-Identifier: Apache-2.0
// audiokv::llama_cpp_adapter on a real llama.cpp context (0c1e57098) running a tiny
// random-weight qwen2 GGUF (scripts/models/make_tiny_gguf.py): logits identical to llama.cpp
// alone while nothing is evicted; every seq_rm range covers exactly the evicted cells; the
// cell map stays right after freed cells are refilled; positions never change; misuse rejected.
// The same checks on llama, qwen3, gemma2 and gemma3 (a full and a window cache); mamba is
// rejected.
#include <gtest/gtest.h>
#include <audiokv/engines/llama_cpp.hpp>

#include "oracle_future.hpp"  // examples/llama_cpp: llama_stream's ceiling

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

// tests/engines/CMakeLists.txt writes tiny-<arch>.gguf into AUDIOKV_TINY_GGUF_DIR.
std::string model_path(const char* arch) {
  const char* d = std::getenv("AUDIOKV_TINY_GGUF_DIR");
  return d != nullptr ? std::string(d) + "/tiny-" + arch + ".gguf" : "";
}

void quiet(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

// The tiny model of `arch` on the CPU, or null (no AUDIOKV_TINY_GGUF_DIR, or not loadable).
llama_model* load_tiny(const char* arch) {
  llama_log_set(quiet, nullptr);
  const std::string path = model_path(arch);
  if (path.empty()) return nullptr;
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  return llama_model_load_from_file(path.c_str(), mp);
}

// One sequence, ubatches of 64, one thread, flash attention off (the adapter's requirement).
llama_context_params tiny_context(int n_ctx) {
  llama_context_params p = llama_context_default_params();
  p.n_ctx = static_cast<std::uint32_t>(n_ctx);
  p.n_batch = p.n_ubatch = 64;
  p.n_seq_max = 1;
  p.n_threads = p.n_threads_batch = 1;
  p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  p.no_perf = true;
  return p;
}

// Two sequences in one context: a KV stream each, or one unified cache.
llama_context_params two_sequences(int n_ctx, bool unified) {
  llama_context_params p = tiny_context(n_ctx);
  p.n_seq_max = 2;
  p.kv_unified = unified;
  return p;
}

// Scores as means over the query heads and the layers: each token's scores then sum to 1 over
// the cells it attends.
audiokv::llama_cpp_config mean_scores() {
  audiokv::llama_cpp_config config;
  config.head_reduce = audiokv::score_reduce::mean;
  config.layer_reduce = audiokv::score_reduce::mean;
  return config;
}

class LlamaCpp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    llama_backend_init();
    model_ = load_tiny("qwen2");
  }
  static void TearDownTestSuite() {
    if (model_ != nullptr) llama_model_free(model_);
    model_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(model_, nullptr) << "no loadable tiny-qwen2.gguf in AUDIOKV_TINY_GGUF_DIR";
  }

  static llama_context_params params(int n_ctx) { return tiny_context(n_ctx); }

  static std::vector<llama_token> random_tokens(int n, unsigned seed) {
    std::mt19937 rng(seed);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model_));
    std::vector<llama_token> t(static_cast<std::size_t>(n));
    for (auto& x : t) x = static_cast<llama_token>(rng() % static_cast<unsigned>(n_vocab));
    return t;
  }

  static int n_vocab() { return llama_vocab_n_tokens(llama_model_get_vocab(model_)); }

  static llama_model* model_;
};
llama_model* LlamaCpp::model_ = nullptr;

// A batch of tokens [first, first + n) of `tokens` for sequence `seq` at positions from `pos`.
struct batch_holder {
  explicit batch_holder(int cap) : b(llama_batch_init(cap, 0, 2)) {}
  ~batch_holder() { llama_batch_free(b); }
  batch_holder(const batch_holder&) = delete;
  batch_holder& operator=(const batch_holder&) = delete;
  const llama_batch& fill(const llama_token* tokens, int n, llama_pos pos, llama_seq_id seq = 0) {
    b.n_tokens = n;
    for (int i = 0; i < n; ++i) {
      b.token[i] = tokens[i];
      b.pos[i] = pos + i;
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = seq;
      b.logits[i] = 1;
    }
    return b;
  }
  llama_batch b;
};

std::vector<float> copy_logits(llama_context* ctx, int n, int n_vocab) {
  std::vector<float> out;
  for (int i = 0; i < n; ++i) {
    const float* l = llama_get_logits_ith(ctx, i);
    out.insert(out.end(), l, l + n_vocab);
  }
  return out;
}

audiokv::policy_options options(int budget, int capacity, std::uint64_t seed = 7) {
  audiokv::policy_options o;
  o.budget = budget;
  o.capacity = capacity;
  o.seed = seed;
  return o;
}

// Chunk sizes that vary, so ubatches of 1 and of several tokens are both covered.
int chunk_at(int step) {
  static const int sizes[] = {1, 7, 16, 3, 1, 11};
  return sizes[step % 6];
}

// ---- with nothing evicted, the adapter changes no logit ----

TEST_F(LlamaCpp, LogitsIdenticalWhenBudgetExceedsTheSequence) {
  const int n = 160;
  const auto tokens = random_tokens(n, 1);
  for (const char* name : {"audiokv", "h2o", "streaming_llm", "tova", "snapkv", "random"}) {
    SCOPED_TRACE(name);
    llama_context* plain = llama_init_from_model(model_, params(512));
    ASSERT_NE(plain, nullptr);
    audiokv::llama_cpp_adapter adapter(model_, params(512));
    adapter.add_sequence(0, name, options(400, 400));
    batch_holder b1(64), b2(64);
    int step = 0;
    for (int g = 0; g < n; ++step) {
      const int m = std::min(chunk_at(step), n - g);
      ASSERT_EQ(llama_decode(plain, b1.fill(tokens.data() + g, m, g)), 0);
      ASSERT_EQ(adapter.decode(b2.fill(tokens.data() + g, m, g)), 0);
      EXPECT_EQ(adapter.evict(0), 0);
      const auto a = copy_logits(plain, m, n_vocab());
      const auto b = copy_logits(adapter.context(), m, n_vocab());
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << "logits differ at tokens [" << g << ", " << g + m << ")";
      g += m;
    }
    EXPECT_EQ(adapter.policy(0).num_cells(), n);
    llama_free(plain);
  }
}

// ---- eviction: ranges, cell map, positions ----

struct stream_check {
  int evictions = 0;
  int deferred = 0;
  int ranges = 0;
  int evicted = 0;
};

// Streams `n` tokens through `policy` at `budget`, checking after every step:
//  - the seq_rm ranges cover exactly the evicted positions (but a deferred newest one), are
//    maximal runs (a kept position lies between two ranges) and never hold the newest position;
//  - every cached cell keeps the position and cell it got when it was decoded;
//  - the last token's attention row is non-zero exactly on the cells the map holds (plus a
//    deferred newest cell), so the map is right after freed cells are refilled; in a
//    sliding-window model's window cache (`window_cache`), exactly on the cells of the held
//    positions less than n_swa behind the newest;
//  - llama.cpp's seq_pos_min / seq_pos_max agree with the policy's positions;
//  - the logits equal a plain llama.cpp context from which the test removes the policy's
//    evicted positions one at a time (the newest one after the next decode).
stream_check run_stream(llama_model* model, const char* policy, int budget, int n, unsigned seed,
                        int window_cache = -1) {
  stream_check out;
  const int n_swa = llama_model_n_swa(model);
  const int max_chunk = 16;
  const int capacity = budget + max_chunk;
  std::mt19937 rng(seed);
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::vector<llama_token> tokens(static_cast<std::size_t>(n));
  for (auto& x : tokens) x = static_cast<llama_token>(rng() % static_cast<unsigned>(n_vocab));

  const llama_context_params p = tiny_context(capacity + 1);
  audiokv::llama_cpp_adapter adapter(model, p);
  adapter.add_sequence(0, policy, options(budget, capacity, seed));
  llama_context* ref = llama_init_from_model(model, p);
  EXPECT_NE(ref, nullptr);
  llama_memory_t mem = llama_get_memory(adapter.context());
  llama_memory_t ref_mem = llama_get_memory(ref);

  const int n_caches = window_cache >= 0 ? 2 : 1;
  std::vector<std::map<llama_pos, std::int32_t>> cell_of_pos(2);  // per cache, as decoded
  llama_pos deferred = -1;
  std::int32_t deferred_cell[2] = {-1, -1};
  batch_holder b1(64), b2(64);
  int step = 0;
  for (int g = 0; g < n; ++step) {
    const int m = std::min(chunk_at(step), n - g);
    EXPECT_EQ(adapter.decode(b1.fill(tokens.data() + g, m, g)), 0);
    EXPECT_EQ(llama_decode(ref, b2.fill(tokens.data() + g, m, g)), 0);
    const auto a = copy_logits(ref, m, n_vocab);
    const auto b = copy_logits(adapter.context(), m, n_vocab);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
        << policy << ": logits differ from the reference at tokens [" << g << ", " << g + m << ")";
    EXPECT_EQ(adapter.n_caches(), n_caches);
    const auto& pol = adapter.policy(0);
    // The attention row of the newest token: support == map cells + deferred cell (in the
    // window cache: those of positions the window holds).
    const llama_pos newest_pos = g + m - 1;
    auto in_view = [&](int cache, llama_pos q) {
      return cache != window_cache || newest_pos - q < n_swa;
    };
    for (int cache = 0; cache < n_caches; ++cache) {
      const auto row = adapter.last_row(m - 1, cache);
      std::set<std::int32_t> support, expected;
      for (std::size_t c = 0; c < row.size(); ++c)
        if (row[c] > 0.0f) support.insert(static_cast<std::int32_t>(c));
      const auto cells = adapter.cells(0, cache);
      for (std::int32_t i = 0; i < pol.num_cells(); ++i)
        if (in_view(cache, pol.positions()[i])) expected.insert(cells[static_cast<std::size_t>(i)]);
      if (deferred >= 0 && in_view(cache, deferred)) expected.insert(deferred_cell[cache]);
      EXPECT_EQ(support, expected) << policy << " step " << step << " cache " << cache;
    }
    if (deferred >= 0) {
      EXPECT_TRUE(llama_memory_seq_rm(ref_mem, 0, deferred, deferred + 1));
      deferred = -1;
    }
    EXPECT_EQ(adapter.deferred(0), -1);
    // New tokens: record (position, cell); older ones must be unchanged.
    for (int cache = 0; cache < n_caches; ++cache) {
      const auto cells = adapter.cells(0, cache);
      auto& known = cell_of_pos[static_cast<std::size_t>(cache)];
      for (std::int32_t i = 0; i < pol.num_cells(); ++i) {
        const llama_pos pos = pol.positions()[i];
        auto it = known.find(pos);
        if (pos >= g) {
          EXPECT_TRUE(it == known.end());
          known[pos] = cells[static_cast<std::size_t>(i)];
        } else {
          EXPECT_TRUE(it != known.end()) << "position " << pos << " was never decoded";
          if (it != known.end()) {
            EXPECT_EQ(it->second, cells[static_cast<std::size_t>(i)]);
          }
        }
      }
    }
    g += m;
    EXPECT_EQ(llama_memory_seq_pos_max(mem, 0), g - 1);
    // With a window cache llama.cpp answers from it, whose oldest position may be newer.
    if (window_cache < 0) {
      EXPECT_EQ(llama_memory_seq_pos_min(mem, 0), pol.positions()[0]);
    } else {
      EXPECT_GE(llama_memory_seq_pos_min(mem, 0), pol.positions()[0]);
    }

    // Eviction.
    const std::vector<llama_pos> before(pol.positions(), pol.positions() + pol.num_cells());
    std::vector<std::int32_t> last_cell_before;
    for (int cache = 0; cache < n_caches; ++cache)
      last_cell_before.push_back(
          adapter.cells(0, cache)[static_cast<std::size_t>(pol.num_cells() - 1)]);
    const int evicted = adapter.evict(0);
    const std::vector<llama_pos> after(pol.positions(), pol.positions() + pol.num_cells());
    if (evicted == 0) {
      EXPECT_EQ(before, after);
      continue;
    }
    ++out.evictions;
    out.evicted += evicted;
    std::vector<llama_pos> gone;
    std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                        std::back_inserter(gone));
    EXPECT_EQ(static_cast<int>(gone.size()), evicted);
    const llama_pos newest = before.back();
    std::set<llama_pos> covered;
    const auto ranges = adapter.last_ranges(0);
    out.ranges += static_cast<int>(ranges.size());
    for (std::size_t r = 0; r < ranges.size(); ++r) {
      EXPECT_LT(ranges[r].first, ranges[r].second);
      EXPECT_LE(ranges[r].second, newest) << "a range holds the newest position";
      if (r > 0) {
        // Maximal runs: some kept position lies between two ranges.
        const bool kept_between = std::any_of(after.begin(), after.end(), [&](llama_pos q) {
          return q >= ranges[r - 1].second && q < ranges[r].first;
        });
        EXPECT_TRUE(kept_between) << "ranges " << r - 1 << " and " << r << " could merge";
      }
      for (llama_pos q : before)
        if (q >= ranges[r].first && q < ranges[r].second) covered.insert(q);
    }
    std::set<llama_pos> expected(gone.begin(), gone.end());
    if (adapter.deferred(0) >= 0) {
      EXPECT_EQ(adapter.deferred(0), newest);
      EXPECT_TRUE(expected.count(newest));
      expected.erase(newest);
      deferred = newest;
      for (int cache = 0; cache < n_caches; ++cache)
        deferred_cell[cache] = last_cell_before[static_cast<std::size_t>(cache)];
      ++out.deferred;
    }
    EXPECT_EQ(covered, expected) << policy << ": seq_rm ranges differ from the evicted cells";
    for (llama_pos q : expected) {
      EXPECT_TRUE(llama_memory_seq_rm(ref_mem, 0, q, q + 1));
      for (auto& known : cell_of_pos) known.erase(q);
    }
    if (deferred >= 0)
      for (auto& known : cell_of_pos) known.erase(deferred);
    // Positions never change: the newest stays the last decoded position in the context.
    EXPECT_EQ(llama_memory_seq_pos_max(mem, 0), g - 1);
    EXPECT_LE(pol.num_cells(), budget);
  }
  llama_free(ref);
  return out;
}

TEST_F(LlamaCpp, EvictionRangesCellMapAndPositions) {
  for (const char* name : {"audiokv", "h2o", "streaming_llm", "tova", "snapkv", "uniform_stride"}) {
    SCOPED_TRACE(name);
    const stream_check c = run_stream(model_, name, 48, 400, 3);
    EXPECT_GT(c.evictions, 5);
    EXPECT_GT(c.evicted, 300);
  }
}

// Random scores evict the newest position at times: it must leave the context only after the
// next decode (a batch must start at seq_pos_max + 1), and the map must stay right.
TEST_F(LlamaCpp, NewestPositionDeferred) {
  int deferred = 0;
  for (unsigned seed = 1; seed <= 6 && deferred == 0; ++seed)
    deferred += run_stream(model_, "random", 32, 300, seed).deferred;
  EXPECT_GT(deferred, 0) << "no plan evicted the newest cell; the deferral was not exercised";
}

// Two sequences evicting in one context, in separate streams (cell indices repeat per stream)
// and in one unified cache (freed cells pass between sequences): with head and layer means each
// token's scores over its own sequence's cells sum to 1, so no sequence reads a cell the other
// one wrote (a newest cell the last plan dropped, attended once more, is the only mass no slot
// holds), and each keeps its budget.
TEST_F(LlamaCpp, TwoSequencesKeepTheirOwnCells) {
  for (const bool unified : {false, true}) {
    SCOPED_TRACE(unified ? "unified cache" : "one stream per sequence");
    audiokv::llama_cpp_adapter adapter(model_, two_sequences(512, unified), mean_scores());
    adapter.add_sequence(0, "h2o", options(40, 56));
    adapter.add_sequence(1, "tova", options(24, 40));
    const auto tokens = random_tokens(240, 13);
    batch_holder b(64);
    llama_pos next[2] = {0, 0};
    for (int step = 0; step < 60; ++step) {
      const llama_seq_id seq = step % 2;
      const int m = 1 + step % 7;
      // A newest cell the last plan dropped is still attended in this decode, by no slot.
      const bool deferred = adapter.deferred(seq) >= 0;
      ASSERT_EQ(adapter.decode(b.fill(tokens.data() + next[seq] % 200, m, next[seq], seq)), 0);
      next[seq] += m;
      double sum = 0.0;
      for (float x : adapter.last_scores(seq)) sum += x;
      if (deferred) {
        EXPECT_LT(sum, 1.0 + 1e-4) << "sequence " << seq << " step " << step;
      } else {
        EXPECT_NEAR(sum, 1.0, 1e-4) << "sequence " << seq << " step " << step;
      }
      adapter.evict(seq);
      EXPECT_LE(adapter.policy(seq).num_cells(), seq == 0 ? 40 : 24);
    }
  }
}

// ---- speech rules: audio spans reach the policy ----

TEST_F(LlamaCpp, AudioSpansReachThePolicy) {
  // Positions flagged as attention sinks live in audiokv's emergency pool and are never
  // evicted; unflagged, the same positions are evicted by a long stream.
  const auto tokens = random_tokens(400, 5);
  auto kept = [&](bool mark) {
    audiokv::llama_cpp_adapter adapter(model_, params(128));
    adapter.add_sequence(0, "audiokv", options(64, 80));
    if (mark) {
      std::vector<audiokv::frame_meta> audio;
      for (llama_pos p = 10; p < 14; ++p)
        audio.push_back(audiokv::frame_meta{p, 0, 1.0f, audiokv::frame_flag_sink, 0.0f});
      adapter.mark_audio(0, audio);
    }
    batch_holder b(64);
    for (int g = 0; g < 400; g += 8) {
      EXPECT_EQ(adapter.decode(b.fill(tokens.data() + g, 8, g)), 0);
      adapter.evict(0);
    }
    const auto& pol = adapter.policy(0);
    int n = 0;
    for (std::int32_t i = 0; i < pol.num_cells(); ++i)
      n += pol.positions()[i] >= 10 && pol.positions()[i] < 14;
    return n;
  };
  EXPECT_EQ(kept(true), 4);
  EXPECT_LT(kept(false), 4);
}

// ---- the chained eval callback still sees every tensor ----

TEST_F(LlamaCpp, ChainedCallbackIsCalled) {
  struct counter {
    int asked = 0;
    static bool cb(ggml_tensor*, bool ask, void* user) {
      auto* c = static_cast<counter*>(user);
      if (ask) ++c->asked;
      return false;
    }
  } c;
  llama_context_params p = params(256);
  p.cb_eval = &counter::cb;
  p.cb_eval_user_data = &c;
  audiokv::llama_cpp_adapter adapter(model_, p);
  adapter.add_sequence(0, "h2o", options(64, 80));
  const auto tokens = random_tokens(4, 9);
  batch_holder b(64);
  ASSERT_EQ(adapter.decode(b.fill(tokens.data(), 4, 0)), 0);
  EXPECT_GT(c.asked, 10);
  EXPECT_EQ(adapter.policy(0).num_cells(), 4);
}

// ---- misuse ----

template <class F>
std::string argument_of(F&& f) {
  try {
    f();
  } catch (const audiokv::error& e) {
    return e.argument();
  }
  return "<no error>";
}

TEST_F(LlamaCpp, FlashAttentionRejectedAtConstruction) {
  for (auto fa : {LLAMA_FLASH_ATTN_TYPE_AUTO, LLAMA_FLASH_ATTN_TYPE_ENABLED}) {
    llama_context_params p = params(256);
    p.flash_attn_type = fa;
    EXPECT_EQ(argument_of([&] { audiokv::llama_cpp_adapter a(model_, p); }),
              "params.flash_attn_type");
  }
}

TEST_F(LlamaCpp, BadConfigurationRejected) {
  audiokv::llama_cpp_config c;
  c.layers = {0, 99};
  EXPECT_EQ(argument_of([&] { audiokv::llama_cpp_adapter a(model_, params(256), c); }),
            "config.layers[1]");
  c.layers = {1, 1};
  EXPECT_EQ(argument_of([&] { audiokv::llama_cpp_adapter a(model_, params(256), c); }),
            "config.layers[1]");
  EXPECT_EQ(argument_of([&] { audiokv::llama_cpp_adapter a(nullptr, params(256)); }), "model");
}

TEST_F(LlamaCpp, MisuseRejectedAndStateUnchanged) {
  audiokv::llama_cpp_adapter adapter(model_, params(256));
  // A capacity the context cannot hold.
  EXPECT_EQ(argument_of([&] { adapter.add_sequence(0, "h2o", options(300, 300)); }),
            "policy.capacity()");
  EXPECT_EQ(argument_of([&] { adapter.add_sequence(0, "no_such_policy", options(64, 80)); }),
            "name");
  EXPECT_EQ(argument_of([&] { adapter.add_sequence(-1, "h2o", options(64, 80)); }), "seq");
  adapter.add_sequence(0, "h2o", options(64, 80));
  EXPECT_EQ(argument_of([&] { adapter.add_sequence(0, "h2o", options(64, 80)); }), "seq");

  const auto tokens = random_tokens(80, 11);
  batch_holder b(64);
  ASSERT_EQ(adapter.decode(b.fill(tokens.data(), 8, 0)), 0);
  const auto& pol = adapter.policy(0);
  const std::vector<llama_pos> pos0(pol.positions(), pol.positions() + pol.num_cells());
  auto unchanged = [&] {
    EXPECT_EQ(std::vector<llama_pos>(pol.positions(), pol.positions() + pol.num_cells()), pos0);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(adapter.context()), 0), 7);
  };
  // A gap or a repeat in the positions.
  EXPECT_EQ(argument_of([&] { adapter.decode(b.fill(tokens.data(), 4, 9)); }), "batch.pos[0]");
  EXPECT_EQ(argument_of([&] { adapter.decode(b.fill(tokens.data(), 4, 7)); }), "batch.pos[0]");
  unchanged();
  // Two sequences in one batch.
  b.fill(tokens.data(), 4, 8);
  b.b.seq_id[2][0] = 1;
  EXPECT_EQ(argument_of([&] { adapter.decode(b.b); }), "batch.seq_id[2]");
  unchanged();
  // An unmanaged sequence; more tokens than a ubatch; no tokens.
  EXPECT_EQ(argument_of([&] { adapter.decode(b.fill(tokens.data(), 4, 0, 1)); }),
            "batch.seq_id[0]");
  EXPECT_EQ(argument_of([&] {
              batch_holder big(80);
              adapter.decode(big.fill(tokens.data(), 80, 8));
            }),
            "batch.n_tokens");
  EXPECT_EQ(argument_of([&] { adapter.decode(b.fill(tokens.data(), 0, 8)); }), "batch.n_tokens");
  unchanged();
  // More tokens than the policy has room for.
  for (llama_pos g = 8; g < 80; g += 8) {
    if (adapter.policy(0).num_cells() + 8 > 80) break;
    ASSERT_EQ(adapter.decode(b.fill(tokens.data() + g % 72, 8, g)), 0);
  }
  const llama_pos next = adapter.pos_max(0) + 1;
  EXPECT_EQ(argument_of([&] { adapter.decode(b.fill(tokens.data(), 16, next)); }), "batch");
  // Audio frames out of order, or behind decoded positions.
  std::vector<audiokv::frame_meta> audio{{next + 5, 0, 1.0f, 0, 0.0f},
                                         {next + 2, 0, 1.0f, 0, 0.0f}};
  EXPECT_EQ(argument_of([&] { adapter.mark_audio(0, audio); }), "frames[1].pos");
  audio = {{3, 0, 1.0f, 0, 0.0f}};
  EXPECT_EQ(argument_of([&] { adapter.mark_audio(0, audio); }), "frames[0].pos");
  audio = {{next, 0, 1.5f, 0, 0.0f}};
  EXPECT_EQ(argument_of([&] { adapter.mark_audio(0, audio); }), "frames[0].voice");
  // The sequence changed behind the adapter's back.
  llama_memory_seq_rm(llama_get_memory(adapter.context()), 0, adapter.pos_max(0), -1);
  EXPECT_EQ(argument_of([&] { adapter.decode(b.fill(tokens.data(), 1, next - 1)); }),
            "batch.seq_id[0]");
  EXPECT_EQ(argument_of([&] { adapter.evict(3); }), "seq");
  EXPECT_EQ(argument_of([&] { adapter.compress(0, -1); }), "target");
}

// Two sequences in one decode (what a serving loop batches), in a unified cache: every token's
// logits equal llama.cpp's own with the same positions removed, each sequence's scores come
// from its own tokens' rows over its own cells (they sum to 1 with head and layer means), and
// each keeps its budget; in the batch the sequences' tokens come in blocks and interleaved.
// With a stream per sequence llama.cpp reorders such a batch, so the adapter refuses it.
TEST_F(LlamaCpp, SequencesShareOneDecodeInAUnifiedCache) {
  const llama_context_params p = two_sequences(512, /*unified=*/true);
  audiokv::llama_cpp_adapter adapter(model_, p, mean_scores());
  adapter.add_sequence(0, "h2o", options(40, 64));
  adapter.add_sequence(1, "audiokv", options(24, 48));
  llama_context* ref = llama_init_from_model(model_, p);
  ASSERT_NE(ref, nullptr);
  llama_memory_t ref_mem = llama_get_memory(ref);
  const auto tokens = random_tokens(400, 17);
  batch_holder b1(64), b2(64);
  // m0 tokens of sequence 0 and m1 of sequence 1, in two blocks or interleaved.
  auto fill = [&](batch_holder& h, const llama_pos* next, int m0, int m1, bool interleave) {
    int k[2] = {0, 0};
    h.b.n_tokens = m0 + m1;
    for (int i = 0; i < m0 + m1; ++i) {
      const int s =
          interleave ? (k[0] < m0 && (i % 2 == 0 || k[1] == m1) ? 0 : 1) : (i < m0 ? 0 : 1);
      h.b.token[i] = tokens[static_cast<std::size_t>((next[s] + k[s]) % 400)];
      h.b.pos[i] = next[s] + k[s];
      h.b.n_seq_id[i] = 1;
      h.b.seq_id[i][0] = s;
      h.b.logits[i] = 1;
      ++k[s];
    }
    return h.b;
  };
  llama_pos next[2] = {0, 0};
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model_));
  int evictions = 0;
  for (int step = 0; step < 50; ++step) {
    const int m0 = 1 + step % 5, m1 = 1 + (step * 3) % 7;
    const bool interleave = step % 3 == 1;
    const llama_pos deferred[2] = {adapter.deferred(0), adapter.deferred(1)};
    ASSERT_EQ(adapter.decode(fill(b1, next, m0, m1, interleave)), 0);
    ASSERT_EQ(llama_decode(ref, fill(b2, next, m0, m1, interleave)), 0);
    const auto a = copy_logits(ref, m0 + m1, n_vocab);
    const auto b = copy_logits(adapter.context(), m0 + m1, n_vocab);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "step " << step;
    next[0] += m0;
    next[1] += m1;
    for (llama_seq_id s = 0; s < 2; ++s) {
      EXPECT_EQ(adapter.pos_max(s), next[s] - 1);
      double sum = 0.0;
      for (float x : adapter.last_scores(s)) sum += x;
      // A newest cell the last plan dropped is attended once more, by no slot.
      if (deferred[s] >= 0) {
        EXPECT_TRUE(llama_memory_seq_rm(ref_mem, s, deferred[s], deferred[s] + 1));
        EXPECT_LT(sum, 1.0 + 1e-4) << "sequence " << s << " step " << step;
      } else {
        EXPECT_NEAR(sum, 1.0, 1e-4) << "sequence " << s << " step " << step;
      }
      evictions += adapter.evict(s) > 0;
      for (const auto& r : adapter.last_ranges(s))
        EXPECT_TRUE(llama_memory_seq_rm(ref_mem, s, r.first, r.second));
      EXPECT_LE(adapter.policy(s).num_cells(), s == 0 ? 40 : 24);
    }
  }
  EXPECT_GT(evictions, 20);
  llama_free(ref);

  // A stream per sequence: refused before decoding, naming the first token of the second
  // sequence, and nothing changes.
  audiokv::llama_cpp_adapter split(model_, two_sequences(512, /*unified=*/false));
  split.add_sequence(0, "h2o", options(40, 64));
  split.add_sequence(1, "h2o", options(40, 64));
  const llama_pos zero[2] = {0, 0};
  EXPECT_EQ(argument_of([&] { split.decode(fill(b1, zero, 3, 2, false)); }), "batch.seq_id[3]");
  EXPECT_EQ(split.pos_max(0), -1);
  EXPECT_EQ(split.pos_max(1), -1);
  EXPECT_EQ(split.policy(0).num_cells(), 0);
  ASSERT_EQ(split.decode(fill(b1, zero, 3, 0, false)), 0);
  EXPECT_EQ(split.pos_max(0), 2);
}

TEST_F(LlamaCpp, CompressOnce) {
  audiokv::llama_cpp_adapter adapter(model_, params(256));
  adapter.add_sequence(0, "snapkv", options(40, 200));
  const auto tokens = random_tokens(150, 13);
  batch_holder b(64);
  for (int g = 0; g < 150; g += 50) ASSERT_EQ(adapter.decode(b.fill(tokens.data() + g, 50, g)), 0);
  EXPECT_EQ(adapter.compress(0, 40), 110);
  EXPECT_EQ(adapter.policy(0).num_cells(), 40);
  EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(adapter.context()), 0), 149);
  ASSERT_EQ(adapter.decode(b.fill(tokens.data(), 1, 150)), 0);
}

// Budget 48, capacity 64, chunks of 16. The default rule holds every policy at its budget after
// each evict(); the trigger rule lets AudioKV evict once it reaches 90% of it (44 cells), to
// below that (by its ratio further), so it holds fewer.
TEST_F(LlamaCpp, EvictionRuleBudgetHoldsThePolicyAtItsBudget) {
  EXPECT_EQ(audiokv::llama_cpp_config{}.eviction, audiokv::eviction_rule::budget);
  const auto tokens = random_tokens(160, 17);
  for (const auto rule : {audiokv::eviction_rule::budget, audiokv::eviction_rule::trigger}) {
    audiokv::llama_cpp_config config;
    config.eviction = rule;
    audiokv::llama_cpp_adapter adapter(model_, params(256), config);
    adapter.add_sequence(0, "audiokv", options(48, 64));
    batch_holder b(64);
    int most_after_eviction = 0;
    for (int g = 0; g < 160; g += 16) {
      ASSERT_EQ(adapter.decode(b.fill(tokens.data() + g, 16, g)), 0);
      if (adapter.evict(0) > 0)
        most_after_eviction = std::max(most_after_eviction, adapter.policy(0).num_cells());
      EXPECT_LE(adapter.policy(0).num_cells(), 48);
    }
    if (rule == audiokv::eviction_rule::budget) {
      EXPECT_EQ(most_after_eviction, 48);
    } else {
      EXPECT_GT(most_after_eviction, 0);
      EXPECT_LE(most_after_eviction, 43);
    }
  }
  audiokv::llama_cpp_config bad;
  bad.eviction = static_cast<audiokv::eviction_rule>(7);
  EXPECT_THROW(audiokv::llama_cpp_adapter(model_, params(256), bad), audiokv::error);
}

// ---- other architectures ----

// run_stream's checks on `m` for each policy at 48 cells over 300 tokens; with a window cache
// also AudioKV at 16 cells, under the 32-position window, so positions the window layers still
// attend are evicted too.
void expect_streams(llama_model* m, std::initializer_list<const char*> policies, unsigned seed,
                    int window_cache = -1) {
  for (const char* name : policies) {
    SCOPED_TRACE(name);
    const stream_check c = run_stream(m, name, 48, 300, seed, window_cache);
    EXPECT_GT(c.evictions, 5);
    EXPECT_GT(c.evicted, 200);
  }
  if (window_cache >= 0) {
    const stream_check small = run_stream(m, "audiokv", 16, 200, seed + 1, window_cache);
    EXPECT_GT(small.evicted, 150);
  }
}

// Llama (no q/k/v biases, its own graph builder) streams under the same checks as qwen2: the
// adapter reads nothing architecture-specific.
TEST(LlamaCppModels, LlamaArchitectureStreamsUnderTheSameChecks) {
  llama_model* m = load_tiny("llama");
  ASSERT_NE(m, nullptr) << "no loadable tiny-llama.gguf in AUDIOKV_TINY_GGUF_DIR";
  char arch[32] = {};
  ASSERT_GT(llama_model_meta_val_str(m, "general.architecture", arch, sizeof(arch)), 0);
  EXPECT_STREQ(arch, "llama");
  expect_streams(m, {"audiokv", "h2o"}, 5);
  llama_model_free(m);
}

// Qwen3 (no biases, RMS norm on each head's q and k before RoPE): the same checks.
TEST(LlamaCppModels, Qwen3ArchitectureStreamsUnderTheSameChecks) {
  llama_model* m = load_tiny("qwen3");
  ASSERT_NE(m, nullptr) << "no loadable tiny-qwen3.gguf in AUDIOKV_TINY_GGUF_DIR";
  expect_streams(m, {"audiokv", "tova"}, 11);
  llama_model_free(m);
}

// ---- sliding-window layers: a full and a window cache ----

// Gemma 2 (layers 0 and 2 of 3 attend through a 32-position window): llama.cpp keeps a window
// cache for them beside the full cache, with cell indices of its own, and reuses the window
// cache's cells once their positions leave the window. The adapter maps every position in both
// (cache 0 holds layer 0, the window cache) and streams under the checks above: logits equal to
// llama.cpp with the same positions removed, both cell maps right after refills, the window
// cache's row non-zero exactly on the held positions inside the window.
TEST(LlamaCppModels, SlidingWindowModelStreamsWithBothCaches) {
  llama_model* m = load_tiny("gemma2");
  ASSERT_NE(m, nullptr) << "no loadable tiny-gemma2.gguf in AUDIOKV_TINY_GGUF_DIR";
  ASSERT_EQ(llama_model_n_swa(m), 32);
  expect_streams(m, {"audiokv", "h2o", "tova"}, 5, /*window_cache=*/0);
  llama_model_free(m);
}

// Gemma 3 (six layers, llama.cpp's pattern: layers 0-4 through the 32-position window, layer 5
// over everything; q/k norms): the window cache holds five layers and the full cache one, and
// the same checks hold.
TEST(LlamaCppModels, Gemma3PatternStreamsWithBothCaches) {
  llama_model* m = load_tiny("gemma3");
  ASSERT_NE(m, nullptr) << "no loadable tiny-gemma3.gguf in AUDIOKV_TINY_GGUF_DIR";
  ASSERT_EQ(llama_model_n_swa(m), 32);
  ASSERT_EQ(llama_model_n_layer(m), 6);
  expect_streams(m, {"audiokv", "h2o"}, 13, /*window_cache=*/0);
  llama_model_free(m);
}

// With nothing evicted, a sliding-window model's logits are llama.cpp's own, and each slot's
// score is read from both caches: with head and layer means it is the mean over the layers of
// the attention its position gets, so the newest token's scores sum to 1 at every step, also
// after the window cache has reused the cells of positions that left the window (a slot
// still reading its old cell would count the newer position twice).
TEST(LlamaCppModels, SlidingWindowModelUnchangedWithoutEviction) {
  llama_model* m = load_tiny("gemma2");
  ASSERT_NE(m, nullptr) << "no loadable tiny-gemma2.gguf in AUDIOKV_TINY_GGUF_DIR";
  llama_context_params p = tiny_context(512);
  p.swa_full = false;  // a window cache of 256 cells (n_swa + n_ubatch, padded), not n_ctx
  llama_context* plain = llama_init_from_model(m, p);
  ASSERT_NE(plain, nullptr);
  audiokv::llama_cpp_adapter adapter(m, p, mean_scores());
  adapter.add_sequence(0, "h2o", options(450, 450));
  const int n = 400;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
  std::mt19937 rng(9);
  batch_holder b1(64), b2(64);
  for (int g = 0; g < n;) {
    const int k = std::min(1 + static_cast<int>(rng() % 9), n - g);
    std::vector<llama_token> toks(static_cast<std::size_t>(k));
    for (auto& x : toks) x = static_cast<llama_token>(rng() % static_cast<unsigned>(n_vocab));
    ASSERT_EQ(llama_decode(plain, b1.fill(toks.data(), k, g)), 0);
    ASSERT_EQ(adapter.decode(b2.fill(toks.data(), k, g)), 0);
    const auto a = copy_logits(plain, k, n_vocab);
    const auto b = copy_logits(adapter.context(), k, n_vocab);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "token " << g;
    ASSERT_EQ(adapter.n_caches(), 2);
    g += k;
    const auto scores = adapter.last_scores(0);
    ASSERT_EQ(static_cast<int>(scores.size()), g);
    double sum = 0.0;
    for (float x : scores) sum += x;
    EXPECT_NEAR(sum, 1.0, 1e-4) << "after " << g << " tokens";
  }
  // The window cache (cache 0, holding layer 0) reused cells; the full cache did not.
  for (int cache = 0; cache < 2; ++cache) {
    const auto cells = adapter.cells(0, cache);
    const std::set<std::int32_t> distinct(cells.begin(), cells.end());
    if (cache == 0) {
      EXPECT_LT(static_cast<int>(distinct.size()), n) << "the window cache reused no cell";
    } else {
      EXPECT_EQ(static_cast<int>(distinct.size()), n);
    }
  }
  EXPECT_THROW(adapter.cells(0, 2), audiokv::error);
  llama_free(plain);
  llama_model_free(m);
}

// ---- models the adapter does not govern ----

TEST(LlamaCppModels, RecurrentModelRejected) {
  llama_model* m = load_tiny("mamba");
  ASSERT_NE(m, nullptr) << "no loadable tiny-mamba.gguf in AUDIOKV_TINY_GGUF_DIR";
  std::string arg, what;
  try {
    audiokv::llama_cpp_adapter a(m, tiny_context(256));
  } catch (const audiokv::error& e) {
    arg = e.argument();
    what = e.what();
  }
  EXPECT_EQ(arg, "model");
  EXPECT_NE(what.find("recurrent"), std::string::npos) << what;
  llama_model_free(m);
}

// llama_stream's oracle_future: the recording run writes each query position's row at the
// cells' key positions; after finish() the record holds suffix sums; a replay keeps the cells
// the rest of the recorded run attends most.
TEST(OracleFuture, RecordsFutureAttentionAndKeepsWhatItAttendsMost) {
  const std::vector<std::vector<float>> rows = {
      {1.0f}, {0.5f, 0.5f}, {0.2f, 0.1f, 0.7f}, {0.05f, 0.6f, 0.15f, 0.2f}};
  auto record = std::make_shared<llama_stream::future_attention>(4);
  audiokv::policy::baselines::baseline_config c;
  c.budget = c.capacity = 4;
  llama_stream::oracle_future recorder(c, record, true);
  for (int q = 0; q < 4; ++q) {
    audiokv::frame_meta f;
    f.pos = q;
    recorder.append(&f, 1);
    recorder.observe(rows[static_cast<std::size_t>(q)].data(), q + 1);
  }
  record->finish();
  // after(q, p): attention p receives from query positions q + 1 .. 3.
  EXPECT_FLOAT_EQ(record->after(1, 0), 0.25f);
  EXPECT_FLOAT_EQ(record->after(1, 1), 0.7f);
  EXPECT_FLOAT_EQ(record->after(1, 2), 0.85f);
  EXPECT_FLOAT_EQ(record->after(1, 3), 0.2f);
  EXPECT_FLOAT_EQ(record->after(3, 1), 0.0f);
  EXPECT_FLOAT_EQ(record->within(0, 1, 1), 0.5f);   // query 1 alone
  EXPECT_FLOAT_EQ(record->within(0, 1, 2), 0.6f);   // queries 1 and 2
  EXPECT_FLOAT_EQ(record->within(1, 1, 0), 0.7f);   // the rest of the run
  EXPECT_FLOAT_EQ(record->within(1, 1, 10), 0.7f);  // a horizon past the end
  audiokv::eviction_plan plan;
  EXPECT_THROW(recorder.plan_to(2, plan), std::logic_error);  // a recorder never evicts

  auto append_positions = [](audiokv::eviction_policy& p, int count) {
    for (int q = 0; q < count; ++q) {
      audiokv::frame_meta f;
      f.pos = q;
      p.append(&f, 1);
    }
  };
  c.budget = 2;
  c.capacity = 3;
  llama_stream::oracle_future oracle(c, record, false);
  append_positions(oracle, 3);
  // Now = position 2: the future is query 3's row, p0 0.05 < p2 0.15 < p1 0.6.
  oracle.plan_to(2, plan);
  EXPECT_EQ(plan.evict, std::vector<std::int32_t>({0}));
  oracle.plan_to(1, plan);
  EXPECT_EQ(plan.evict, std::vector<std::int32_t>({0, 2}));
  // With a horizon of one query position from position 1: query 2 alone, p1 0.1 < p0 0.2.
  c.capacity = 2;
  c.budget = 1;
  llama_stream::oracle_future near(c, record, false, 1);
  append_positions(near, 2);
  near.plan_to(1, plan);
  EXPECT_EQ(plan.evict, std::vector<std::int32_t>({1}));
}

}  // namespace
