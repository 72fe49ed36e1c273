// SPDX-License-Identifier: Apache-2.0
// GPU benchmarks: attention with scores, scoring, compaction (4k-128k cells x 8 KV heads x
// head_dim 128, bf16), selection latency, and the eviction step's share of a decode step at
// beta = 16 steps between evictions. Counters: bytes_per_second and pct_of_peak (peak = 2 x
// memory clock x bus width, from cudaDeviceProp).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <audiokv/cuda.cuh>
#include <cstdint>
#include <vector>

#include "device_peak.hpp"

namespace {

namespace cu = audiokv::cuda;
constexpr int kKvHeads = 8, kQHeads = 32, kDim = 128;

using audiokv::bench::peak_bytes_per_second;

struct buffers {
  void* k = nullptr;
  void* v = nullptr;
  void* dst = nullptr;
  float *q = nullptr, *out = nullptr, *probs = nullptr, *scores = nullptr, *imp = nullptr,
        *med = nullptr;
  std::uint8_t* keep = nullptr;
  std::int32_t *move = nullptr, *after = nullptr, *kcount = nullptr;
  void* ws = nullptr;
  std::size_t ws_bytes = 0;
  explicit buffers(int n) {
    const std::size_t kv = static_cast<std::size_t>(n) * kKvHeads * kDim * 2;
    const std::size_t cells = static_cast<std::size_t>(n) * kKvHeads;
    const cu::attention_shape shape{kQHeads, kKvHeads, kDim, n};
    ws_bytes = cu::decode_attention_workspace_bytes(shape);
    ws_bytes = std::max(ws_bytes, cu::select_workspace_bytes(kKvHeads, n));
    ws_bytes = std::max(ws_bytes, cu::move_to_workspace_bytes(kKvHeads, n));
    cudaMalloc(&k, kv);
    cudaMalloc(&v, kv);
    cudaMalloc(&dst, kv);
    cudaMemset(k, 0x3c, kv);
    cudaMemset(v, 0x3c, kv);
    cudaMalloc(&q, kQHeads * kDim * 4);
    cudaMemset(q, 0, kQHeads * kDim * 4);
    cudaMalloc(&out, kQHeads * kDim * 4);
    cudaMalloc(&probs, static_cast<std::size_t>(n) * kQHeads * 4);
    cudaMalloc(&scores, cells * 4);
    cudaMalloc(&imp, cells * 4);
    cudaMalloc(&med, cells * 4);
    cudaMemset(imp, 0, cells * 4);
    cudaMalloc(&keep, cells);
    cudaMemset(keep, 1, cells);
    cudaMalloc(&move, cells * 4);
    cudaMalloc(&after, kKvHeads * 4);
    cudaMalloc(&kcount, kKvHeads * 4);
    std::vector<std::int32_t> kc(kKvHeads, n / 4);
    cudaMemcpy(kcount, kc.data(), kKvHeads * 4, cudaMemcpyHostToDevice);
    cudaMalloc(&ws, ws_bytes);
  }
  ~buffers() {
    for (void* p : {k, v, dst, static_cast<void*>(q), static_cast<void*>(out),
                    static_cast<void*>(probs), static_cast<void*>(scores), static_cast<void*>(imp),
                    static_cast<void*>(med), static_cast<void*>(keep), static_cast<void*>(move),
                    static_cast<void*>(after), static_cast<void*>(kcount), ws})
      cudaFree(p);
  }
};

const audiokv::core::kv_addressing kAddr{nullptr, 1, 0, kKvHeads* kDim, kDim};

cudaError_t attention(buffers& b, int n, bool with_v) {
  return cu::decode_attention({kQHeads, kKvHeads, kDim, n}, cu::dtype::bf16, b.q, b.k,
                              with_v ? b.v : nullptr, kAddr, with_v ? b.out : nullptr, b.probs,
                              b.scores, audiokv::gqa_reduce::mean, nullptr, b.ws, b.ws_bytes,
                              nullptr);
}

cudaError_t eviction(buffers& b, int n) {
  cudaError_t e = cu::importance_update(b.imp, b.scores, kKvHeads, n, n, 0.3f, nullptr, nullptr);
  if (e == cudaSuccess) e = cu::median<5>(b.imp, b.med, kKvHeads, n, n, nullptr);
  if (e == cudaSuccess) e = cu::trend(b.med, b.med, kKvHeads, n, n, 0.6f, 0.3f, nullptr);
  if (e == cudaSuccess)
    e = cu::select_lowest(b.med, nullptr, kKvHeads, n, n, b.kcount, nullptr, b.keep, b.ws,
                          b.ws_bytes, nullptr);
  if (e == cudaSuccess)
    e = cu::move_to_from_mask(b.keep, kKvHeads, n, n, b.move, b.after, b.ws, b.ws_bytes, nullptr);
  const cu::row_layout layout{0, kKvHeads * kDim * 2, kDim * 2, kDim * 2, kKvHeads};
  if (e == cudaSuccess) e = cu::gather_rows(b.k, b.dst, layout, b.move, kKvHeads, n, n, nullptr);
  return e;
}

/// Times `fn` with CUDA events after one warm-up call; sets bytes counters.
template <class Fn>
void timed(benchmark::State& state, double bytes, Fn fn) {
  if (fn() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    state.SkipWithError("launch failed (no GPU?)");
    return;
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (auto _ : state) {
    cudaEventRecord(start);
    fn();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.f;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  state.counters["bytes_per_second"] = benchmark::Counter(
      bytes * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  const double peak = peak_bytes_per_second();
  if (peak > 0) {
    // pct_of_peak = achieved / peak * 100, from the same per-iteration bytes.
    state.counters["pct_of_peak"] =
        benchmark::Counter(bytes * static_cast<double>(state.iterations()) * 100.0 / peak,
                           benchmark::Counter::kIsRate);
  }
}

void BM_attention_with_scores(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  buffers b(n);
  timed(state, 2.0 * n * kKvHeads * kDim * 2, [&] { return attention(b, n, true); });
}
void BM_scoring(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  buffers b(n);
  timed(state, 1.0 * n * kKvHeads * kDim * 2, [&] { return attention(b, n, false); });
}
void BM_compaction_gather(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  buffers b(n);
  const cu::row_layout layout{0, kKvHeads * kDim * 2, kDim * 2, kDim * 2, kKvHeads};
  // keep = all: reads and writes every row once.
  timed(state, 2.0 * n * kKvHeads * kDim * 2, [&] {
    cudaError_t e =
        cu::move_to_from_mask(b.keep, kKvHeads, n, n, b.move, b.after, b.ws, b.ws_bytes, nullptr);
    return e == cudaSuccess ? cu::gather_rows(b.k, b.dst, layout, b.move, kKvHeads, n, n, nullptr)
                            : e;
  });
}
void BM_selection(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  buffers b(n);
  timed(state, 1.0 * n * kKvHeads * 4, [&] {
    return cu::select_lowest(b.scores, nullptr, kKvHeads, n, n, b.kcount, nullptr, b.keep, b.ws,
                             b.ws_bytes, nullptr);
  });
}
/// One decode step (attention + scores + EMA) plus 1/16 of an eviction (beta = 16): reports
/// eviction_share = eviction time / 16 / step time.
void BM_eviction_share_beta16(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  buffers b(n);
  double attn_s = 0, evict_s = 0;
  cudaEvent_t e0, e1, e2;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventCreate(&e2);
  if (attention(b, n, true) != cudaSuccess || eviction(b, n) != cudaSuccess) {
    state.SkipWithError("launch failed (no GPU?)");
    return;
  }
  for (auto _ : state) {
    cudaEventRecord(e0);
    attention(b, n, true);
    cudaEventRecord(e1);
    eviction(b, n);
    cudaEventRecord(e2);
    cudaEventSynchronize(e2);
    float a = 0, e = 0;
    cudaEventElapsedTime(&a, e0, e1);
    cudaEventElapsedTime(&e, e1, e2);
    attn_s += a / 1e3;
    evict_s += e / 1e3;
    state.SetIterationTime(a / 1e3 + e / 1e3 / 16.0);
  }
  state.counters["eviction_share"] = (evict_s / 16.0) / (attn_s + evict_s / 16.0);
  state.counters["eviction_us"] = evict_s / static_cast<double>(state.iterations()) * 1e6;
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
}

#define AUDIOKV_CELLS \
  RangeMultiplier(2)->Range(4096, 131072)->UseManualTime()->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_attention_with_scores)->AUDIOKV_CELLS;
BENCHMARK(BM_scoring)->AUDIOKV_CELLS;
BENCHMARK(BM_compaction_gather)->AUDIOKV_CELLS;
BENCHMARK(BM_selection)->AUDIOKV_CELLS;
BENCHMARK(BM_eviction_share_beta16)->AUDIOKV_CELLS;

}  // namespace

BENCHMARK_MAIN();
