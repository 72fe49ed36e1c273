// SPDX-License-Identifier: Apache-2.0
// GPU benchmarks of the device eviction step (cuda::eviction_step) inside a decode step, and of
// its building blocks, at 8k, 32k, 64k and 128k cells x 8 KV heads (GQA group 4: 32 query heads per
// sequence, head_dim 128, bf16 K/V), batch 1 and 32 (rows = batch x 8 KV heads, K and V
// [rows, cells, head_dim]). CUDA events, UseManualTime. A configuration whose buffers do not fit
// the free device memory is skipped with a message.
//
//  - BM_decode_step/<cells>/<batch>: one layer's decode step = attention with probabilities and
//    group scores over every row's live cells, then eviction_step::run. Time: the step that does
//    not evict; counters: the step that evicts (evict_step_us), both run() times, the eviction's
//    extra time, its share of decode time at one eviction every 16 steps
//    (eviction_share_beta16 = (evict_run - observe_run) / 16 / (attention + observe_run)), cells
//    evicted and bytes moved per eviction (hole-filling: rows moved x (K + V) row bytes copied;
//    DRAM traffic is twice that, read and write).
//    The rows are brought to the trigger in few steps: cells_per_step = capacity - trigger + 1
//    (the largest the configuration allows), so the (n-1)-th step of a fresh row stays below the
//    trigger at about 80% of capacity and the n-th reaches it. That eviction removes at least
//    trigger - target cells, as in a one-cell-per-step decode; the timed steps attend the same
//    live cells a one-cell-per-step decode would at those fill levels.
//  - BM_attention_with_scores/<cells>/<batch>: decode_attention with V, probabilities and group
//    scores over every cell. Traffic model: K and V read once, the probabilities written as
//    logits, read and rewritten (3 x 4 bytes per query head and cell), the group score written.
//  - BM_hole_fill_rows/<cells>/<batch>: hole_fill_rows of K and V for a plan evicting every
//    10th cell (hashed) of all rows; traffic = 2 x rows moved x row bytes (read and write).
//  - BM_select/<cells>/<batch>: the standalone cuda::select_lowest (a radix sort over every
//    row's keys) of cells / 10 per row. The step selects inside run() (a radix select, a block
//    per row): its selection at 64k x 8 is bounded by BM_decode_step/65536/1's eviction_us.
// Bandwidth counters: bytes_per_second and pct_of_peak = achieved / peak x 100, peak =
// 2 x memory clock x bus width (device_peak.hpp).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <audiokv/cuda.cuh>
#include <audiokv/cuda/launch/eviction_step.cuh>
#include <cstdint>
#include <string>
#include <vector>

#include "device_peak.hpp"

namespace {

namespace cu = audiokv::cuda;
using audiokv::bench::peak_bytes_per_second;
constexpr std::int32_t kKvHeads = 8, kGroup = 4, kDim = 128;
constexpr std::int64_t kRowBytes = kDim * 2;  // bf16

/// Device memory freed at scope exit; p == nullptr when the allocation failed.
struct device_buffer {
  void* p = nullptr;
  explicit device_buffer(std::size_t bytes) {
    if (cudaMalloc(&p, bytes > 0 ? bytes : 1) != cudaSuccess) p = nullptr;
  }
  ~device_buffer() { cudaFree(p); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

/// CUDA events e[0..n) created and destroyed with the object.
template <int N>
struct events {
  cudaEvent_t e[N];
  events() {
    for (auto& x : e) cudaEventCreate(&x);
  }
  ~events() {
    for (auto& x : e) cudaEventDestroy(x);
  }
  events(const events&) = delete;
  events& operator=(const events&) = delete;
  void record(int i, cudaStream_t s = nullptr) { cudaEventRecord(e[i], s); }
  /// Seconds from event i to event j (waits for j).
  double seconds(int i, int j) {
    cudaEventSynchronize(e[j]);
    float ms = 0.f;
    cudaEventElapsedTime(&ms, e[i], e[j]);
    return ms / 1e3;
  }
};

/// False, with the benchmark skipped, when there is no device or `bytes` (plus 5% and 512 MiB
/// for the runtime and CUB) exceed its free memory.
bool fits(benchmark::State& state, double bytes) {
  std::size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    state.SkipWithError("no CUDA device");
    return false;
  }
  if (bytes * 1.05 + 512.0 * (1 << 20) > static_cast<double>(free_bytes)) {
    state.SkipWithError(("needs " + std::to_string(static_cast<long long>(bytes / (1 << 20))) +
                         " MiB, device has " + std::to_string(free_bytes >> 20) + " MiB free")
                            .c_str());
    return false;
  }
  return true;
}

/// 32-bit mix (lowbias32): a fixed pseudo-random value per index.
__host__ __device__ inline std::uint32_t mix(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/// x[i] = lo + (hi - lo) * u(i), u uniform in [0, 1) from mix(i ^ seed).
__global__ void fill_uniform_kernel(float* x, std::int64_t n, std::uint32_t seed, float lo,
                                    float hi) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float u = static_cast<float>(mix(static_cast<std::uint32_t>(i) ^ seed) >> 8) * 0x1p-24f;
    x[i] = lo + (hi - lo) * u;
  }
}

/// bf16 values uniform in [-1, 1): the upper 16 bits of the float.
__global__ void fill_bf16_kernel(std::uint16_t* x, std::int64_t n, std::uint32_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float u = static_cast<float>(mix(static_cast<std::uint32_t>(i) ^ seed) >> 8) * 0x1p-24f;
    x[i] = static_cast<std::uint16_t>(__float_as_uint(2.0f * u - 1.0f) >> 16);
  }
}

/// keep[i] = 0 for every 10th cell in hashed order, 1 otherwise.
__global__ void fill_keep_kernel(std::uint8_t* keep, std::int32_t n) {
  const std::int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) keep[i] = mix(static_cast<std::uint32_t>(i) ^ 0x5eedU) % 10 != 0 ? 1 : 0;
}

/// out[r] = in[r] + add: the cells a decode step attends (live + the appended ones).
__global__ void add_kernel(std::int32_t* out, const std::int32_t* in, std::int32_t add,
                           std::int32_t n) {
  const std::int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + add;
}

unsigned blocks_for(std::int64_t n) { return static_cast<unsigned>((n + 255) / 256); }
constexpr unsigned kFillBlocks = 1024;

/// K, V, q, out, probs, scores and the attention workspace of `rows` rows of `cells` cells;
/// K and V [rows, cells, head_dim] bf16, q [rows * group, head_dim] fp32.
struct attention_buffers {
  std::int32_t rows, cells;
  cu::attention_shape shape;
  audiokv::core::kv_addressing addr;
  std::size_t ws_bytes;
  device_buffer k, v, q, out, probs, scores, ws;

  static std::size_t kv_bytes(std::int32_t r, std::int32_t n) {
    return static_cast<std::size_t>(r) * n * kRowBytes;
  }
  static std::size_t q_bytes(std::int32_t r) {
    return sizeof(float) * static_cast<std::size_t>(r) * kGroup * kDim;
  }
  /// Device bytes of all buffers.
  static double bytes(std::int32_t r, std::int32_t n) {
    const cu::attention_shape s{r * kGroup, r, kDim, n};
    return 2.0 * kv_bytes(r, n) + 2.0 * q_bytes(r) + 4.0 * r * kGroup * n + 4.0 * r * n +
           static_cast<double>(cu::decode_attention_workspace_bytes(s));
  }

  attention_buffers(std::int32_t r, std::int32_t n)
      : rows(r),
        cells(n),
        shape{r * kGroup, r, kDim, n},
        addr{nullptr, 1, 0, kDim, static_cast<std::int64_t>(n) * kDim},
        ws_bytes(cu::decode_attention_workspace_bytes(shape)),
        k(kv_bytes(r, n)),
        v(kv_bytes(r, n)),
        q(q_bytes(r)),
        out(q_bytes(r)),
        probs(sizeof(float) * static_cast<std::size_t>(r) * kGroup * n),
        scores(sizeof(float) * static_cast<std::size_t>(r) * n),
        ws(ws_bytes) {
    if (!ok()) return;
    const auto elements = static_cast<std::int64_t>(kv_bytes(r, n) / 2);
    fill_bf16_kernel<<<kFillBlocks, 256>>>(k.as<std::uint16_t>(), elements, 1U);
    fill_bf16_kernel<<<kFillBlocks, 256>>>(v.as<std::uint16_t>(), elements, 2U);
    fill_uniform_kernel<<<kFillBlocks, 256>>>(
        q.as<float>(), static_cast<std::int64_t>(r) * kGroup * kDim, 3U, -1.0f, 1.0f);
  }
  bool ok() const { return k.p && v.p && q.p && out.p && probs.p && scores.p && ws.p; }

  /// Attention with V, probabilities and group scores; `live` [rows] device counts or nullptr
  /// (every cell).
  cudaError_t attend(const std::int32_t* live) {
    return cu::decode_attention(shape, cu::dtype::bf16, q.as<float>(), k.p, v.p, addr,
                                out.as<float>(), probs.as<float>(), scores.as<float>(),
                                audiokv::gqa_reduce::mean, live, ws.p, ws_bytes, nullptr, nullptr,
                                live != nullptr ? 1 : 0, 0);
  }
};

/// Times `fn` with CUDA events after one warm-up call. Counters for traffic > 0:
/// bytes_per_second and pct_of_peak of `traffic` bytes per call; kv_pct_of_peak for `kv` > 0.
template <class Fn>
void timed(benchmark::State& state, double traffic, double kv, Fn fn) {
  const cudaError_t e = fn();
  if (e != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    state.SkipWithError(cudaGetErrorString(e != cudaSuccess ? e : cudaGetLastError()));
    return;
  }
  events<2> ev;
  for (auto _ : state) {
    ev.record(0);
    fn();
    ev.record(1);
    state.SetIterationTime(ev.seconds(0, 1));
  }
  if (traffic <= 0) return;
  const double it = static_cast<double>(state.iterations());
  state.counters["bytes_per_second"] =
      benchmark::Counter(traffic * it, benchmark::Counter::kIsRate);
  const double peak = peak_bytes_per_second();
  if (peak <= 0) return;
  state.counters["peak_bytes_per_second"] = peak;
  state.counters["pct_of_peak"] =
      benchmark::Counter(traffic * it * 100.0 / peak, benchmark::Counter::kIsRate);
  if (kv > 0)
    state.counters["kv_pct_of_peak"] =
        benchmark::Counter(kv * it * 100.0 / peak, benchmark::Counter::kIsRate);
}

void BM_attention_with_scores(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  const auto rows = static_cast<std::int32_t>(state.range(1)) * kKvHeads;
  if (!fits(state, attention_buffers::bytes(rows, cells))) return;
  attention_buffers b(rows, cells);
  if (!b.ok()) return state.SkipWithError("cudaMalloc failed");
  const double n = static_cast<double>(rows) * cells;
  const double kv = 2.0 * n * kRowBytes;
  // K, V read; logits written, read and rewritten as probabilities; group scores written.
  timed(state, kv + n * kGroup * 12.0 + n * 4.0, kv, [&] { return b.attend(nullptr); });
}

void BM_hole_fill_rows(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  const auto rows = static_cast<std::int32_t>(state.range(1)) * kKvHeads;
  const std::size_t kv = attention_buffers::kv_bytes(rows, cells);
  const std::size_t ws_bytes = cu::hole_fill_workspace_bytes(cells);
  if (!fits(state, 2.0 * kv + 13.0 * cells + static_cast<double>(ws_bytes))) return;
  device_buffer k(kv), v(kv), keep(cells), move_to(4 * std::size_t(cells)),
      src(4 * std::size_t(cells)), dst(4 * std::size_t(cells)), num_moves(4), ws(ws_bytes);
  if (!k.p || !v.p || !keep.p || !move_to.p || !src.p || !dst.p || !num_moves.p || !ws.p)
    return state.SkipWithError("cudaMalloc failed");
  fill_keep_kernel<<<blocks_for(cells), 256>>>(keep.as<std::uint8_t>(), cells);
  std::int32_t moves = 0;
  if (cu::hole_fill_from_mask(keep.as<std::uint8_t>(), cells, move_to.as<std::int32_t>(),
                              src.as<std::int32_t>(), dst.as<std::int32_t>(),
                              num_moves.as<std::int32_t>(), nullptr, ws.p, ws_bytes,
                              nullptr) != cudaSuccess ||
      cudaMemcpy(&moves, num_moves.p, 4, cudaMemcpyDeviceToHost) != cudaSuccess)
    return state.SkipWithError("hole_fill_from_mask failed");
  // Every row (sequence, KV head) shares the slot map: one call per buffer moves all rows.
  const cu::row_layout layout{0, kRowBytes, static_cast<std::int64_t>(cells) * kRowBytes, kRowBytes,
                              rows};
  const double traffic = 2.0 * 2.0 * moves * static_cast<double>(rows) * kRowBytes;
  timed(state, traffic, 0.0, [&] {
    cudaError_t e = cu::hole_fill_rows(k.p, layout, src.as<std::int32_t>(), dst.as<std::int32_t>(),
                                       num_moves.as<std::int32_t>(), nullptr);
    return e == cudaSuccess
               ? cu::hole_fill_rows(v.p, layout, src.as<std::int32_t>(), dst.as<std::int32_t>(),
                                    num_moves.as<std::int32_t>(), nullptr)
               : e;
  });
  state.counters["moves_per_row"] = moves;
}

void BM_select(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  const auto rows = static_cast<std::int32_t>(state.range(1)) * kKvHeads;
  const auto n = static_cast<std::size_t>(rows) * cells;
  const std::size_t ws_bytes = cu::select_workspace_bytes(rows, cells);
  if (!fits(state, 5.0 * n + static_cast<double>(ws_bytes))) return;
  device_buffer scores(4 * n), evict(n), k(4 * std::size_t(rows)), ws(ws_bytes);
  if (!scores.p || !evict.p || !k.p || !ws.p) return state.SkipWithError("cudaMalloc failed");
  fill_uniform_kernel<<<kFillBlocks, 256>>>(scores.as<float>(), static_cast<std::int64_t>(n), 7U,
                                            0.0f, 1.0f);
  const std::vector<std::int32_t> counts(static_cast<std::size_t>(rows), cells / 10);
  cudaMemcpy(k.p, counts.data(), 4 * counts.size(), cudaMemcpyHostToDevice);
  timed(state, 0.0, 0.0, [&] {
    return cu::select_lowest(scores.as<float>(), nullptr, rows, cells, cells, k.as<std::int32_t>(),
                             evict.as<std::uint8_t>(), nullptr, ws.p, ws_bytes, nullptr);
  });
}

void BM_decode_step(benchmark::State& state) {
  const auto cells = static_cast<std::int32_t>(state.range(0));
  const auto batch = static_cast<std::int32_t>(state.range(1));
  const std::int32_t rows = batch * kKvHeads;
  audiokv::eviction_step_config c;
  c.batch = batch;
  c.num_kv_heads = kKvHeads;
  c.group = kGroup;
  c.capacity = cells;
  c.head_dim = kDim;
  c.dtype = audiokv::kv_dtype::bf16;
  c.cells_per_step = cells - c.trigger_cells() + 1;
  const std::int32_t a = c.cells_per_step;
  // The first run whose append reaches the trigger (runs counted from 1 after reset).
  const std::int32_t trigger_run = (c.trigger_cells() + a - 1) / a;
  const std::size_t step_bytes = cu::eviction_step_workspace_bytes(c);
  if (!fits(state, attention_buffers::bytes(rows, cells) + static_cast<double>(step_bytes))) return;
  attention_buffers b(rows, cells);
  device_buffer ws(step_bytes), attend(4 * std::size_t(rows));
  if (!b.ok() || !ws.p || !attend.p) return state.SkipWithError("cudaMalloc failed");
  cu::eviction_step<> step(c, ws.p, step_bytes);
  float* probs = b.probs.as<float>();

  // Probabilities of every slot for the untimed fill runs.
  cudaError_t e = b.attend(nullptr);
  const auto fill = [&] {
    cudaError_t r = step.reset(nullptr);
    for (std::int32_t i = 1; r == cudaSuccess && i <= trigger_run - 2; ++i)
      r = step.run(probs, cells, b.k.p, b.v.p, nullptr);
    return r;
  };
  // A decode step: attention over live + a cells of every row, then the eviction step.
  const auto decode = [&](events<3>& ev) {
    ev.record(0);
    add_kernel<<<blocks_for(rows), 256>>>(attend.as<std::int32_t>(), step.live_counts(), a, rows);
    cudaError_t r = b.attend(attend.as<std::int32_t>());
    ev.record(1);
    if (r == cudaSuccess) r = step.run(probs, cells, b.k.p, b.v.p, nullptr);
    ev.record(2);
    return r;
  };
  events<3> observe, evict;
  audiokv::eviction_step_statistics s0{}, s1{}, s2{};
  if (e == cudaSuccess) e = fill();
  if (e == cudaSuccess) e = step.read_statistics(s0, nullptr);
  if (e == cudaSuccess) e = decode(observe);
  if (e == cudaSuccess) e = step.read_statistics(s1, nullptr);
  if (e == cudaSuccess) e = decode(evict);
  if (e == cudaSuccess) e = step.read_statistics(s2, nullptr);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return state.SkipWithError(cudaGetErrorString(e));
  if (s1.evictions != s0.evictions || s2.evictions - s1.evictions != rows)
    return state.SkipWithError("the trigger was not reached at the expected step");

  double attn = 0, observe_run = 0, evict_attn = 0, evict_run = 0;
  for (auto _ : state) {
    fill();
    decode(observe);
    decode(evict);
    const double t_attn = observe.seconds(0, 1), t_run = observe.seconds(1, 2);
    attn += t_attn;
    observe_run += t_run;
    evict_attn += evict.seconds(0, 1);
    evict_run += evict.seconds(1, 2);
    state.SetIterationTime(t_attn + t_run);
  }
  const double it = static_cast<double>(state.iterations());
  attn /= it, observe_run /= it, evict_attn /= it, evict_run /= it;
  state.counters["attention_us"] = attn * 1e6;
  state.counters["observe_run_us"] = observe_run * 1e6;
  state.counters["evict_step_us"] = (evict_attn + evict_run) * 1e6;
  state.counters["evict_run_us"] = evict_run * 1e6;
  state.counters["eviction_us"] = (evict_run - observe_run) * 1e6;
  state.counters["eviction_share_beta16"] = (evict_run - observe_run) / 16.0 / (attn + observe_run);
  state.counters["live_per_row_observe"] = static_cast<double>(s0.live_cells) / rows + a;
  state.counters["live_per_row_evict"] = static_cast<double>(s1.live_cells) / rows + a;
  state.counters["cells_evicted"] = static_cast<double>(s2.cells_evicted - s1.cells_evicted);
  state.counters["rows_moved"] = static_cast<double>(s2.rows_moved - s1.rows_moved);
  // K and V rows copied by the eviction's compaction (DRAM traffic: twice, read and write).
  state.counters["bytes_moved"] =
      static_cast<double>(s2.rows_moved - s1.rows_moved) * 2.0 * kRowBytes;
}

/// cells x batch: 8k, 32k, 128k cells (and 64k with `with_64k`) x batch 1, 32.
void shapes(benchmark::internal::Benchmark* b, bool with_64k) {
  for (std::int64_t cells : {8192, 32768, 65536, 131072}) {
    if (cells == 65536 && !with_64k) continue;
    for (std::int64_t batch : {1, 32}) b->Args({cells, batch});
  }
  b->ArgNames({"cells", "batch"})->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_decode_step)->Apply([](benchmark::internal::Benchmark* b) { shapes(b, true); });
BENCHMARK(BM_attention_with_scores)->Apply([](benchmark::internal::Benchmark* b) {
  shapes(b, false);
});
BENCHMARK(BM_hole_fill_rows)->Apply([](benchmark::internal::Benchmark* b) { shapes(b, false); });
BENCHMARK(BM_select)->Apply([](benchmark::internal::Benchmark* b) { shapes(b, true); });

}  // namespace

BENCHMARK_MAIN();
