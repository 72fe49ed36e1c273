// SPDX-License-Identifier: Apache-2.0
// prefetch_replay: prefetch on real speech. Replays each clip of a split (examples/asr_whisper
// manifest) as a stream of Whisper encoder frames (50 frames/s, 20 ms) through one tiered_cache
// and measures the K/V reservation with rate-based prefetch against a static reservation.
//
// Stream: frames arrive continuously; a decode step (one token) runs once every
// --voiced-frames-per-step frames that the energy VAD marks as voice (default 15, ~3.3 tokens
// per second of speech), so the frames of a pause pile up and arrive in one burst at the next
// step. The trailing frames of a clip form a last step. Per step the engine appends the step's
// frames, observes attention (synthetic: the replay has no model; (0.05 + voice) x (0.2 +
// 1 / (1 + 0.02 age)), normalised; it enters the memory trajectory only through the eviction
// ratio), plans and applies when wants_eviction(), and, after the step, calls prefetch().
//
// Runs per clip, on the same steps:
//   prefetch: config.prefetch on (prefetch_config's defaults unless --beta, --decay, --horizon,
//             --margin, --min-burst or --granularity say otherwise), starting from
//             --initial-capacity cells; each clip is a fresh cache, so the forecast starts from
//             nothing at every clip;
//   static:   prefetch off, capacity = budget + the clip's largest step (in frames). Cells left
//             after a step are < trigger <= budget, so this never overflows; it is what a
//             reservation without prediction needs, and it assumes the clip's largest burst is
//             known in advance (an oracle: a real static reservation must guess higher). The
//             fewest cells that would have sufficed, known only afterwards, is peak_cells.
// Reserved cells are averaged over the clip's arriving frames (time-weighted: each frame counts
// the capacity in force when it arrived); the peak is the largest capacity held.
// A miss is a step whose frames exceed the capacity: the replay then grows the cache inside
// the step (reserve to the needed cells rounded up to the granularity) and counts it.
// Allocations are counted by a replacement operator new inside append/observe/plan/apply
// (must be 0), inside miss growth, and inside prefetch(). Bytes use --cell-bytes per cell
// (Whisper tiny.en cross-attention: 4 layers x 6 heads x 64 x K+V x 4 bytes = 12288).
//
// Output: one JSON object per clip and run plus one summary per run (--json, on stdout; the
// table then goes to stderr), and a table. Exit status 1 when a step allocated or when the two
// runs' eviction decisions differ (and, with --check, on any miss); 77 when the manifest is
// missing (ctest: skipped).
#include <algorithm>
#include <audiokv/audiokv.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "counting_allocator.hpp"
#include "src/asr_error.hpp"
#include "src/cli_numbers.hpp"
#include "src/clip_manifest.hpp"
#include "src/energy_vad.hpp"
#include "src/polyphase_resampler.hpp"
#include "src/wav_reader.hpp"

namespace {

using audiokv::test::count_allocations;

constexpr int kSampleRate16k = 16000;  // Whisper's input rate
constexpr int kAudioCtx = 1500;        // Whisper's 30 s window of 20 ms frames

struct options {
  std::string manifest = "build/data/asr/manifest.tsv";
  std::string split = "test";
  std::int32_t budget = 250;  // 5 s of 20 ms frames
  float frame_ms = 20.0f;
  std::int32_t voiced_frames_per_step = 15;
  std::int32_t initial_capacity = 64;
  std::int64_t cell_bytes = 12288;
  audiokv::prefetch_config prefetch{};
  bool json = false;
  bool check = false;
  bool verbose = false;            // print each miss on stderr
  std::string label = "prefetch";  // names the prefetch configuration in every record
};

/// One clip as the engine sees it: frames, their VAD voice, and the frames of each step.
struct clip_stream {
  std::string id;
  double duration_s = 0.0;
  std::vector<audiokv::frame_meta> frames;
  std::vector<std::uint8_t> voice;
  std::vector<std::int32_t> step_frames;  // frames appended at each decode step
  std::int32_t max_step_frames = 0;
  std::int64_t voiced = 0;
};

clip_stream load_clip(const asr::clip_spec& spec, const options& o) {
  const asr::pcm_audio audio = asr::wav_reader::read(spec.wav);
  const std::vector<float> audio16k =
      audio.sample_rate == kSampleRate16k
          ? audio.samples
          : asr::polyphase_resampler(audio.sample_rate, kSampleRate16k).process(audio.samples);
  clip_stream c;
  c.id = spec.id;
  c.duration_s = static_cast<double>(audio16k.size()) / kSampleRate16k;
  const int n = asr::energy_vad::speech_frames(audio16k.size(), kAudioCtx);
  c.voice = asr::energy_vad::detect(audio16k, n);
  std::int32_t pending = 0, voiced = 0;
  for (int t = 0; t < n; ++t) {
    const bool v = c.voice[t] != 0;
    audiokv::frame_meta f{t, 0, v ? 1.0f : 0.0f, audiokv::frame_flag_none, 0.0f};
    if (v && (t == 0 || !c.voice[t - 1])) f.flags |= audiokv::frame_flag_segment_start;
    c.frames.push_back(f);
    c.voiced += v;
    ++pending;
    if (v && ++voiced == o.voiced_frames_per_step) {
      c.step_frames.push_back(pending);
      pending = voiced = 0;
    }
  }
  if (pending > 0) c.step_frames.push_back(pending);
  for (const std::int32_t s : c.step_frames) c.max_step_frames = std::max(c.max_step_frames, s);
  return c;
}

/// What one run over one clip measured.
struct run_stats {
  std::int64_t frames = 0;
  double reserved_frame_sum = 0.0;  // sum over arriving frames of the capacity in force
  std::int32_t peak_reserved = 0;
  std::int32_t final_reserved = 0;
  std::int32_t peak_cells = 0;  // most cells held right after an append
  std::int64_t reserve_calls = 0;
  std::int64_t misses = 0;
  std::int64_t step_allocations = 0;
  std::int64_t miss_allocations = 0;
  std::int64_t prefetch_allocations = 0;
  std::int64_t evictions = 0;
  std::uint64_t decisions = 1469598103934665603ull;  // FNV-1a of every plan's evict list
  double mean_reserved() const { return frames > 0 ? reserved_frame_sum / frames : 0.0; }
};

void mix(std::uint64_t& h, std::int64_t v) {
  for (int i = 0; i < 8; ++i)
    h = (h ^ ((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xFF)) * 1099511628211ull;
}

run_stats replay(const clip_stream& c, const options& o, bool prefetch) {
  audiokv::audiokv_config config;
  config.budget = o.budget;
  config.frame_ms = o.frame_ms;
  config.prefetch = o.prefetch;
  config.prefetch.enabled = prefetch;
  config.capacity = prefetch ? o.initial_capacity : o.budget + c.max_step_frames;
  audiokv::tiered_cache<> cache(config);
  audiokv::eviction_plan plan;
  plan.reserve(cache.capacity());
  std::vector<float> attention(cache.capacity());
  const auto grow_engine_side = [&] {
    attention.resize(cache.capacity());
    plan.reserve(cache.capacity());
  };

  run_stats r;
  std::int32_t next = 0;
  for (std::size_t step = 0; step < c.step_frames.size(); ++step) {
    const std::int32_t count = c.step_frames[step];
    r.frames += count;
    r.reserved_frame_sum += static_cast<double>(count) * cache.capacity();
    if (cache.num_cells() + count > cache.capacity()) {
      ++r.misses;
      if (o.verbose) {
        std::cerr << c.id << (prefetch ? " prefetch" : " static") << ": miss at step " << step
                  << ": " << cache.num_cells() << " cells + " << count << " frames > capacity "
                  << cache.capacity() << " (rate " << cache.forecast().rate() << ", peak "
                  << cache.forecast().peak() << ")\n";
      }
      r.miss_allocations += count_allocations([&] {
        cache.reserve(
            audiokv::core::round_up_cells(cache.num_cells() + count, config.prefetch.granularity));
        grow_engine_side();
      });
    }
    r.peak_reserved = std::max(r.peak_reserved, cache.capacity());
    bool evicted = false;
    r.step_allocations += count_allocations([&] {
      cache.append(c.frames.data() + next, count);
      const std::int32_t n = cache.num_cells();
      const std::int32_t* pos = cache.positions();
      double sum = 0.0;
      for (std::int32_t j = 0; j < n; ++j) {
        const float age = static_cast<float>(next + count - 1 - pos[j]);
        attention[j] = (0.05f + c.voice[pos[j]]) * (0.2f + 1.0f / (1.0f + 0.02f * age));
        sum += attention[j];
      }
      for (std::int32_t j = 0; j < n; ++j) attention[j] = static_cast<float>(attention[j] / sum);
      r.peak_cells = std::max(r.peak_cells, n);
      cache.observe(attention.data(), n);
      if (cache.wants_eviction()) {
        cache.plan(plan);
        cache.apply(plan);
        evicted = true;
      }
    });
    next += count;
    if (evicted) {
      ++r.evictions;
      for (const std::int32_t slot : plan.evict) mix(r.decisions, slot);
    }
    mix(r.decisions, cache.num_cells());
    std::int32_t grown = 0;
    r.prefetch_allocations += count_allocations([&] { grown = cache.prefetch(); });
    if (grown > 0) {
      ++r.reserve_calls;
      grow_engine_side();
    }
  }
  r.final_reserved = cache.capacity();
  r.peak_reserved = std::max(r.peak_reserved, cache.capacity());
  return r;
}

/// Totals of one run mode over a split.
struct summary {
  int clips = 0;
  double audio_s = 0.0;
  std::int64_t steps = 0, frames = 0, reserve_calls = 0, misses = 0, step_allocations = 0,
               miss_allocations = 0, prefetch_allocations = 0;
  double reserved_frame_sum = 0.0;
  std::int32_t peak_reserved = 0, max_step_frames = 0, peak_cells = 0;
  void add(const clip_stream& c, const run_stats& r) {
    ++clips;
    audio_s += c.duration_s;
    steps += static_cast<std::int64_t>(c.step_frames.size());
    frames += r.frames;
    reserve_calls += r.reserve_calls;
    misses += r.misses;
    step_allocations += r.step_allocations;
    miss_allocations += r.miss_allocations;
    prefetch_allocations += r.prefetch_allocations;
    reserved_frame_sum += r.reserved_frame_sum;
    peak_reserved = std::max(peak_reserved, r.peak_reserved);
    max_step_frames = std::max(max_step_frames, c.max_step_frames);
    peak_cells = std::max(peak_cells, r.peak_cells);
  }
  double mean_reserved() const { return frames > 0 ? reserved_frame_sum / frames : 0.0; }
};

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(digits);
  s << v;
  return s.str();
}

double mib(double cells, const options& o) {
  return cells * static_cast<double>(o.cell_bytes) / 1048576.0;
}

std::string clip_json(const options& o, const clip_stream& c, const char* mode, const run_stats& r,
                      bool same_decisions) {
  std::ostringstream j;
  j << "{\"record\":\"clip\",\"label\":\"" << o.label << "\",\"split\":\"" << o.split
    << "\",\"clip_id\":\"" << c.id << "\",\"mode\":\"" << mode
    << "\",\"duration_s\":" << fixed(c.duration_s, 3) << ",\"frames\":" << r.frames
    << ",\"voiced_frames\":" << c.voiced << ",\"steps\":" << c.step_frames.size()
    << ",\"max_step_frames\":" << c.max_step_frames << ",\"peak_cells\":" << r.peak_cells
    << ",\"mean_reserved_cells\":" << fixed(r.mean_reserved(), 2)
    << ",\"peak_reserved_cells\":" << r.peak_reserved
    << ",\"final_reserved_cells\":" << r.final_reserved << ",\"reserve_calls\":" << r.reserve_calls
    << ",\"misses\":" << r.misses << ",\"step_allocations\":" << r.step_allocations
    << ",\"miss_allocations\":" << r.miss_allocations
    << ",\"prefetch_allocations\":" << r.prefetch_allocations << ",\"evictions\":" << r.evictions
    << ",\"mean_reserved_bytes\":" << fixed(r.mean_reserved() * o.cell_bytes, 0)
    << ",\"peak_reserved_bytes\":" << static_cast<std::int64_t>(r.peak_reserved) * o.cell_bytes
    << ",\"same_decisions\":" << (same_decisions ? "true" : "false") << "}";
  return j.str();
}

std::string summary_json(const options& o, const char* mode, const summary& s,
                         const summary& reference) {
  const audiokv::prefetch_config& p = o.prefetch;
  std::ostringstream j;
  j << "{\"record\":\"summary\",\"label\":\"" << o.label << "\",\"split\":\"" << o.split
    << "\",\"mode\":\"" << mode << "\",\"clips\":" << s.clips
    << ",\"audio_s\":" << fixed(s.audio_s, 1) << ",\"steps\":" << s.steps
    << ",\"frames\":" << s.frames << ",\"max_step_frames\":" << s.max_step_frames
    << ",\"peak_cells\":" << s.peak_cells
    << ",\"mean_reserved_cells\":" << fixed(s.mean_reserved(), 2)
    << ",\"peak_reserved_cells\":" << s.peak_reserved << ",\"reserve_calls\":" << s.reserve_calls
    << ",\"misses\":" << s.misses << ",\"step_allocations\":" << s.step_allocations
    << ",\"miss_allocations\":" << s.miss_allocations
    << ",\"prefetch_allocations\":" << s.prefetch_allocations
    << ",\"mean_reserved_mib\":" << fixed(mib(s.mean_reserved(), o), 3)
    << ",\"peak_reserved_mib\":" << fixed(mib(s.peak_reserved, o), 3)
    << ",\"mean_vs_static\":" << fixed(s.mean_reserved() / reference.mean_reserved(), 4)
    << ",\"peak_vs_static\":"
    << fixed(static_cast<double>(s.peak_reserved) / reference.peak_reserved, 4)
    << ",\"budget\":" << o.budget << ",\"frame_ms\":" << fixed(o.frame_ms, 1)
    << ",\"voiced_frames_per_step\":" << o.voiced_frames_per_step
    << ",\"initial_capacity\":" << o.initial_capacity << ",\"cell_bytes\":" << o.cell_bytes
    << ",\"beta\":" << p.beta << ",\"decay\":" << p.decay
    << ",\"horizon_steps\":" << p.horizon_steps << ",\"margin\":" << p.margin
    << ",\"min_burst_frames\":" << p.min_burst_frames << ",\"granularity\":" << p.granularity
    << "}";
  return j.str();
}

void print_table(std::ostream& out, const options& o, const summary& pre, const summary& sta) {
  out << o.label << ", split " << o.split << ": " << pre.clips << " clips, "
      << fixed(pre.audio_s, 1) << " s of audio, " << pre.steps << " decode steps (mean "
      << fixed(static_cast<double>(pre.frames) / pre.steps, 1) << " frames, max "
      << pre.max_step_frames << "); budget " << o.budget << " cells, " << o.voiced_frames_per_step
      << " voiced frames per step\n";
  out << "mode      mean cells  peak cells  mean MiB  peak MiB  reserve()  misses  step allocs\n";
  const auto row = [&](const char* mode, const summary& s) {
    char line[160];
    std::snprintf(line, sizeof line, "%-8s  %10.1f  %10d  %8.2f  %8.2f  %9lld  %6lld  %11lld\n",
                  mode, s.mean_reserved(), s.peak_reserved, mib(s.mean_reserved(), o),
                  mib(s.peak_reserved, o), static_cast<long long>(s.reserve_calls),
                  static_cast<long long>(s.misses), static_cast<long long>(s.step_allocations));
    out << line;
  };
  row("prefetch", pre);
  row("static", sta);
}

[[noreturn]] void usage(int status) {
  std::cerr << "usage: prefetch_replay [--manifest FILE] [--split dev|test|all] [--budget N]\n"
               "         [--frame-ms MS] [--voiced-frames-per-step N] [--initial-capacity N]\n"
               "         [--beta B] [--decay D] [--horizon H] [--margin M] [--min-burst F]\n"
               "         [--granularity G]\n"
               "         [--cell-bytes N] [--label NAME] [--json] [--check] [--verbose]\n"
               "Replays the clips of a split at 50 frames/s through tiered_cache with prefetch\n"
               "versus a static reservation (budget + the clip's largest step); see the file\n"
               "comment of benchmarks/memory/prefetch_replay.cpp. --check: exit 1 on any miss;\n"
               "--verbose: print each miss; --label names the run in every JSON record.\n";
  std::exit(status);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(2);
      return argv[++i];
    };
    if (a == "--manifest") {
      o.manifest = value();
    } else if (a == "--split") {
      o.split = value();
    } else if (a == "--budget") {
      o.budget = asr::parse_int(value(), a);
    } else if (a == "--frame-ms") {
      o.frame_ms = static_cast<float>(asr::parse_real(value(), a));
    } else if (a == "--voiced-frames-per-step") {
      o.voiced_frames_per_step = asr::parse_int(value(), a);
    } else if (a == "--initial-capacity") {
      o.initial_capacity = asr::parse_int(value(), a);
    } else if (a == "--beta") {
      o.prefetch.beta = static_cast<float>(asr::parse_real(value(), a));
    } else if (a == "--decay") {
      o.prefetch.decay = static_cast<float>(asr::parse_real(value(), a));
    } else if (a == "--horizon") {
      o.prefetch.horizon_steps = asr::parse_int(value(), a);
    } else if (a == "--margin") {
      o.prefetch.margin = static_cast<float>(asr::parse_real(value(), a));
    } else if (a == "--min-burst") {
      o.prefetch.min_burst_frames = asr::parse_int(value(), a);
    } else if (a == "--granularity") {
      o.prefetch.granularity = asr::parse_int(value(), a);
    } else if (a == "--cell-bytes") {
      o.cell_bytes = asr::parse_int(value(), a);
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--label") {
      o.label = value();
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if (a == "--help" || a == "-h") {
      usage(0);
    } else {
      std::cerr << "prefetch_replay: unknown argument " << a << "\n";
      usage(2);
    }
  }
  if (o.split != "dev" && o.split != "test" && o.split != "all") {
    throw asr::asr_error("--split must be dev, test or all");
  }
  if (o.voiced_frames_per_step < 1) throw asr::asr_error("--voiced-frames-per-step must be >= 1");
  if (o.cell_bytes < 1) throw asr::asr_error("--cell-bytes must be >= 1");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  std::vector<asr::clip_spec> specs;
  try {
    o = parse(argc, argv);
    specs = asr::clip_manifest::load(o.manifest, o.split);
  } catch (const asr::asr_error& e) {
    const bool missing = std::string(e.what()).find("cannot open manifest") != std::string::npos;
    std::cerr << "prefetch_replay: " << e.what() << "\n";
    return missing ? 77 : 2;
  } catch (const std::exception& e) {
    std::cerr << "prefetch_replay: " << e.what() << "\n";
    return 2;
  }
  if (specs.empty()) {
    std::cerr << "prefetch_replay: no clips in split " << o.split << " of " << o.manifest << "\n";
    return 2;
  }

  std::ostream& table = o.json ? std::cerr : std::cout;
  summary pre, sta;
  bool decisions_differ = false;
  try {
    for (const asr::clip_spec& spec : specs) {
      const clip_stream c = load_clip(spec, o);
      const run_stats a = replay(c, o, /*prefetch=*/true);
      const run_stats b = replay(c, o, /*prefetch=*/false);
      const bool same = a.decisions == b.decisions;
      decisions_differ |= !same;
      pre.add(c, a);
      sta.add(c, b);
      if (o.json) {
        std::cout << clip_json(o, c, "prefetch", a, same) << "\n"
                  << clip_json(o, c, "static", b, same) << "\n";
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "prefetch_replay: " << e.what() << "\n";
    return 2;
  }
  if (o.json) {
    std::cout << summary_json(o, "prefetch", pre, sta) << "\n"
              << summary_json(o, "static", sta, sta) << std::endl;
  }
  print_table(table, o, pre, sta);

  int status = 0;
  if (pre.step_allocations + sta.step_allocations > 0) {
    std::cerr << "prefetch_replay: FAIL: a decode step allocated\n";
    status = 1;
  }
  if (sta.misses > 0) {
    std::cerr << "prefetch_replay: FAIL: the static reservation overflowed\n";
    status = 1;
  }
  if (decisions_differ) {
    std::cerr << "prefetch_replay: FAIL: prefetch changed an eviction decision\n";
    status = 1;
  }
  if (o.check && pre.misses > 0) {
    std::cerr << "prefetch_replay: FAIL (--check): " << pre.misses << " forecast misses\n";
    status = 1;
  }
  return status;
}
