// SPDX-License-Identifier: Apache-2.0
/// @file
/// Host launchers of the CUDA backend. Common contract of every function here:
///  - enqueues on the caller's `stream` and returns immediately; never synchronises;
///  - never allocates: scratch comes from the caller's `workspace` (256-byte aligned, at least
///    the matching `*_workspace_bytes(shape)`, which is a pure host computation to call once at
///    setup);
///  - fixed grids computed from the shape alone, so a call can be captured in a CUDA graph and
///    replayed (counts that change between replays are read from device memory: `live_cells`,
///    `k`);
///  - returns cudaSuccess, cudaErrorInvalidValue for an unsupported or inconsistent argument
///    (before enqueuing anything), or the launch error. Not thread-safe per workspace.
/// Any number of translation units of one program may include this header: the launchers are
/// inline and the kernels static (each translation unit compiles and registers its own copy).
/// The linker keeps one copy of each launcher, which launches the kernels of the translation
/// unit it came from, so compile every translation unit that includes this header for the same
/// CUDA architectures.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "../core/selection_key.hpp"
#include "check.cuh"
#include "dispatch.cuh"
#include "kernels/attention_kernel.cuh"
#include "kernels/compact_kernel.cuh"
#include "kernels/paged_kernel.cuh"
#include "kernels/quantize_kernel.cuh"
#include "kernels/select_kernel.cuh"
#include "kernels/sequence_kernel.cuh"
#include "kernels/shared_rows_kernel.cuh"
#include "params.cuh"

namespace audiokv::cuda {

namespace detail {

inline constexpr std::size_t workspace_alignment = 256;

inline std::size_t align_up(std::size_t bytes) {
  return (bytes + workspace_alignment - 1) / workspace_alignment * workspace_alignment;
}

/// Hands out aligned slices of a caller-owned buffer; with a null base it only measures.
class workspace_carver {
 public:
  explicit workspace_carver(void* base) : base_(static_cast<unsigned char*>(base)) {}
  template <class T>
  T* take(std::size_t count) {
    T* p = base_ != nullptr ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += align_up(count * sizeof(T));
    return p;
  }
  std::size_t used() const { return used_; }

 private:
  unsigned char* base_;
  std::size_t used_ = 0;
};

inline unsigned blocks_for(std::int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

/// Split-K plan of the attention kernel: a pure function of the shape.
struct attention_split {
  std::int32_t cells_per_split = 0;
  std::int32_t num_splits = 0;
};
inline attention_split plan_attention_split(std::int32_t num_cells) {
  std::int32_t per = (num_cells + 1023) / 1024;
  per = per < 256 ? 256 : (per + 31) / 32 * 32;
  const std::int32_t n = num_cells > 0 ? num_cells : 1;
  return {per, (n + per - 1) / per};
}

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace detail

// ---- F10: decode attention with probabilities, and scoring ----

/// @brief Workspace of decode_attention / attention_scores for `shape`.
inline std::size_t decode_attention_workspace_bytes(const attention_shape& shape) {
  const auto split = detail::plan_attention_split(shape.num_cells);
  detail::workspace_carver w(nullptr);
  w.take<core::softmax_state>(static_cast<std::size_t>(split.num_splits) * shape.num_q_heads);
  w.take<float>(static_cast<std::size_t>(split.num_splits) * shape.num_q_heads * shape.head_dim);
  w.take<core::softmax_state>(static_cast<std::size_t>(shape.num_q_heads));
  return w.used();
}

/// @brief One decode step of one layer: out = softmax(q K^T / sqrt(d)) V and the per-cell
/// probabilities, in one pass over K/V (online softmax, split over blocks, merged in a fixed
/// order: deterministic), GQA without repeating K/V.
/// @param q           [num_q_heads, head_dim] fp32
/// @param k, v        K/V of element type `kv_type`, rows addressed by `addr` (element offsets,
///                    unit dim stride, 16-byte aligned rows); v == nullptr computes scores only
/// @param out         [num_q_heads, head_dim] fp32, or nullptr
/// @param probs       [num_q_heads, shape.num_cells] fp32 probabilities (cells >= live count
///                    are left untouched)
/// @param scores      [num_kv_heads, shape.num_cells] group-reduced probabilities, or nullptr
/// @param live_cells  [1] device count of live cells (<= shape.num_cells), or nullptr
/// @param logit_bias  [num_kv_heads, shape.num_cells] fp32 added to each logit (F11: ln m of a
///                    shared row, core::multiplicity_bias), or nullptr
/// Launches 3 kernels on `stream`; never allocates or synchronises; graph-capturable.
inline cudaError_t decode_attention(const attention_shape& shape, dtype kv_type, const float* q,
                                    const void* k, const void* v, const core::kv_addressing& addr,
                                    float* out, float* probs, float* scores, gqa_reduce mode,
                                    const std::int32_t* live_cells, void* workspace,
                                    std::size_t workspace_bytes, cudaStream_t stream,
                                    const float* logit_bias = nullptr) {
  if (shape.num_kv_heads < 1 || shape.num_q_heads % shape.num_kv_heads != 0 ||
      shape.num_cells < 0 || q == nullptr || k == nullptr || probs == nullptr ||
      workspace_bytes < decode_attention_workspace_bytes(shape) || workspace == nullptr)
    return cudaErrorInvalidValue;
  if (shape.num_cells == 0) return cudaSuccess;
  const std::int64_t vec = 16 / dtype_bytes(kv_type);
  if (!detail::aligned16(k) || (v != nullptr && !detail::aligned16(v)) ||
      addr.entry_stride % vec != 0 || addr.head_stride % vec != 0 || addr.page_stride % vec != 0)
    return cudaErrorInvalidValue;
  const auto split = detail::plan_attention_split(shape.num_cells);
  AUDIOKV_DISPATCH_DTYPE(
      kv_type, T, {AUDIOKV_DISPATCH_HEAD_DIM(shape.head_dim, D, {
        using geo = kernels::attention_geometry<T, D>;
        attention_params<T> p;
        detail::workspace_carver w(workspace);
        p.partial_state = w.take<core::softmax_state>(static_cast<std::size_t>(split.num_splits) *
                                                      shape.num_q_heads);
        p.partial_acc =
            w.take<float>(static_cast<std::size_t>(split.num_splits) * shape.num_q_heads * D);
        p.final_state = w.take<core::softmax_state>(static_cast<std::size_t>(shape.num_q_heads));
        p.q = q;
        p.k = static_cast<const T*>(k);
        p.v = static_cast<const T*>(v);
        p.addr = addr;
        p.out = out;
        p.probs = probs;
        p.scores = scores;
        p.live_cells = live_cells;
        p.logit_bias = logit_bias;
        p.num_q_heads = shape.num_q_heads;
        p.num_kv_heads = shape.num_kv_heads;
        p.group_size = shape.num_q_heads / shape.num_kv_heads;
        p.num_cells = shape.num_cells;
        p.num_splits = split.num_splits;
        p.cells_per_split = split.cells_per_split;
        p.scale = core::attention_scale(D);
        p.mode = mode;
        const int q_chunks = (p.group_size + geo::max_group - 1) / geo::max_group;
        const dim3 grid(static_cast<unsigned>(split.num_splits),
                        static_cast<unsigned>(shape.num_kv_heads * q_chunks));
        if (v != nullptr) {
          kernels::attention_partial_kernel<T, D, true><<<grid, geo::threads, 0, stream>>>(p);
          kernels::attention_combine_kernel<T, D, true><<<shape.num_q_heads, D, 0, stream>>>(p);
        } else {
          kernels::attention_partial_kernel<T, D, false><<<grid, geo::threads, 0, stream>>>(p);
          kernels::attention_combine_kernel<T, D, false><<<shape.num_q_heads, 32, 0, stream>>>(p);
        }
        AUDIOKV_CUDA_TRY(cudaGetLastError());
        const dim3 pgrid(detail::blocks_for(shape.num_cells, 256),
                         static_cast<unsigned>(shape.num_kv_heads));
        kernels::attention_probs_kernel<T><<<pgrid, 256, 0, stream>>>(p);
        AUDIOKV_CUDA_TRY(cudaGetLastError());
      })})
  return cudaSuccess;
}

/// @brief The standalone scoring kernel: probabilities (and group scores) from q and K only.
/// Same contract as decode_attention with v == nullptr and out == nullptr.
inline cudaError_t attention_scores(const attention_shape& shape, dtype kv_type, const float* q,
                                    const void* k, const core::kv_addressing& addr, float* probs,
                                    float* scores, gqa_reduce mode, const std::int32_t* live_cells,
                                    void* workspace, std::size_t workspace_bytes,
                                    cudaStream_t stream) {
  return decode_attention(shape, kv_type, q, k, nullptr, addr, nullptr, probs, scores, mode,
                          live_cells, workspace, workspace_bytes, stream);
}

// ---- F11: shared rows (rows = KV heads, each with its own slot table) ----

/// @brief bias[h, r] = ln multiplicity[h, r] for r < num_rows: the logit_bias of
/// decode_attention over physical rows. @param multiplicity, bias [rows, row_stride].
inline cudaError_t multiplicity_bias(const std::int32_t* multiplicity, float* bias,
                                     std::int32_t rows, std::int32_t num_rows,
                                     std::int32_t row_stride, cudaStream_t stream) {
  if (rows < 0 || num_rows < 0 || row_stride < num_rows) return cudaErrorInvalidValue;
  if (rows == 0 || num_rows == 0) return cudaSuccess;
  kernels::
      multiplicity_bias_kernel<<<dim3(detail::blocks_for(num_rows, 256), rows), 256, 0, stream>>>(
          multiplicity, bias, num_rows, row_stride);
  return cudaGetLastError();
}

/// @brief cell_probs[h, c] = row_probs[h, cell_row[h, c]] / multiplicity[h, cell_row[h, c]]:
/// each logical cell's probability, for the policy's observe().
/// @param row_probs, multiplicity [rows, row_stride]  @param cell_row, cell_probs
/// [rows, cell_stride]
inline cudaError_t shared_cell_probs(const float* row_probs, const std::int32_t* multiplicity,
                                     const std::int32_t* cell_row, float* cell_probs,
                                     std::int32_t rows, std::int32_t num_cells,
                                     std::int32_t cell_stride, std::int32_t row_stride,
                                     cudaStream_t stream) {
  if (rows < 0 || num_cells < 0 || cell_stride < num_cells || row_stride < 0)
    return cudaErrorInvalidValue;
  if (rows == 0 || num_cells == 0) return cudaSuccess;
  kernels::
      shared_cell_probs_kernel<<<dim3(detail::blocks_for(num_cells, 256), rows), 256, 0, stream>>>(
          row_probs, multiplicity, cell_row, cell_probs, num_cells, cell_stride, row_stride);
  return cudaGetLastError();
}

// ---- F2-F4: temporal and sequence stages (rows = KV heads, `stride` floats apart) ----

/// @brief importance[h, j] = alpha * attention[h, j] + (1 - alpha) * importance[h, j] for
/// j < live count. @param importance, attention [rows, stride]. No workspace.
inline cudaError_t importance_update(float* importance, const float* attention, std::int32_t rows,
                                     std::int32_t num_cells, std::int32_t stride, float alpha,
                                     const std::int32_t* live_cells, cudaStream_t stream) {
  if (rows < 0 || num_cells < 0 || stride < num_cells) return cudaErrorInvalidValue;
  if (rows == 0 || num_cells == 0) return cudaSuccess;
  kernels::
      importance_update_kernel<<<dim3(detail::blocks_for(num_cells, 256), rows), 256, 0, stream>>>(
          importance, attention, num_cells, live_cells, stride, alpha);
  return cudaGetLastError();
}

/// @brief Entry prior of new cells [first, first + count): importance[h, first - 1] or 0.
inline cudaError_t importance_enter(float* importance, std::int32_t rows, std::int32_t stride,
                                    std::int32_t first, std::int32_t count, bool neighbour_prior,
                                    cudaStream_t stream) {
  if (rows < 0 || first < 0 || count < 0 || first + count > stride) return cudaErrorInvalidValue;
  if (rows == 0 || count == 0) return cudaSuccess;
  kernels::importance_enter_kernel<<<dim3(detail::blocks_for(count, 256), rows), 256, 0, stream>>>(
      importance, stride, first, count, neighbour_prior);
  return cudaGetLastError();
}

/// @brief scores[h, j] = reduce over the group's query heads of attention (F27), for
/// probabilities produced by the engine's own attention kernel.
/// @param attention [num_kv_heads * group, stride]  @param scores [num_kv_heads, stride]
inline cudaError_t reduce_group(const float* attention, float* scores, std::int32_t num_kv_heads,
                                std::int32_t group, std::int32_t num_cells, std::int32_t stride,
                                gqa_reduce mode, cudaStream_t stream) {
  if (num_kv_heads < 0 || group < 1 || num_cells < 0 || stride < num_cells)
    return cudaErrorInvalidValue;
  if (num_kv_heads == 0 || num_cells == 0) return cudaSuccess;
  kernels::reduce_group_kernel<<<dim3(detail::blocks_for(num_cells, 256), num_kv_heads), 256, 0,
                                 stream>>>(attention, scores, group, num_cells, stride, mode);
  return cudaGetLastError();
}

/// @brief out[h, j] = median_at<W>(in[h, :num_cells], j), edge padded. out must not alias in.
template <int W = 5>
cudaError_t median(const float* in, float* out, std::int32_t rows, std::int32_t num_cells,
                   std::int32_t stride, cudaStream_t stream) {
  if (rows < 0 || num_cells < 0 || stride < num_cells || in == out) return cudaErrorInvalidValue;
  if (rows == 0 || num_cells == 0) return cudaSuccess;
  kernels::median_kernel<W><<<dim3(detail::blocks_for(num_cells, 256), rows), 256, 0, stream>>>(
      in, out, num_cells, stride);
  return cudaGetLastError();
}

/// @brief Holt trend per row (core/trend.hpp), output clamped at 0; out may alias in.
/// Sequential per row (one thread per row).
inline cudaError_t trend(const float* in, float* out, std::int32_t rows, std::int32_t num_cells,
                         std::int32_t stride, float level_weight, float slope_gain,
                         cudaStream_t stream) {
  if (rows < 0 || num_cells < 0 || stride < num_cells) return cudaErrorInvalidValue;
  if (rows == 0 || num_cells == 0) return cudaSuccess;
  kernels::trend_kernel<<<detail::blocks_for(rows, 32), 32, 0, stream>>>(
      in, out, rows, num_cells, stride, level_weight, slope_gain);
  return cudaGetLastError();
}

// ---- F8: deterministic selection ----

/// @brief Workspace of select_lowest for `rows` rows of `num_cells` cells.
inline std::size_t select_workspace_bytes(std::int32_t rows, std::int32_t num_cells) {
  const std::size_t n = static_cast<std::size_t>(rows) * num_cells;
  std::size_t sort_bytes = 0;
  cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes, static_cast<const std::uint64_t*>(nullptr),
                                 static_cast<std::uint64_t*>(nullptr), static_cast<int>(n), 0, 64);
  detail::workspace_carver w(nullptr);
  w.take<std::uint64_t>(n);
  w.take<std::uint64_t>(n);
  w.take<unsigned char>(sort_bytes);
  return w.used();
}

/// @brief For every row h, marks the k[h] candidates that come first in the order
/// (score, cell) — core::evicts_before, the CPU tie rule — as evicted. Identical sets to
/// cpu::reference::select_lowest.
/// @param scores     [rows, stride] fp32, no NaN
/// @param candidate  [rows, stride] 1 = may be evicted, or nullptr (all)
/// @param k          [rows] device counts
/// @param evict      [rows, stride] 1 = evicted, or nullptr
/// @param keep       [rows, stride] 1 = kept (the complement), or nullptr
/// One radix sort over (row, score, cell) keys (CUB); never allocates or synchronises.
inline cudaError_t select_lowest(const float* scores, const std::uint8_t* candidate,
                                 std::int32_t rows, std::int32_t num_cells, std::int32_t stride,
                                 const std::int32_t* k, std::uint8_t* evict, std::uint8_t* keep,
                                 void* workspace, std::size_t workspace_bytes,
                                 cudaStream_t stream) {
  if (rows < 0 || num_cells < 0 || stride < num_cells || k == nullptr ||
      !core::selection_key_fits(static_cast<std::uint32_t>(rows),
                                static_cast<std::uint32_t>(num_cells)) ||
      static_cast<std::int64_t>(rows) * num_cells > INT32_MAX ||
      workspace_bytes < select_workspace_bytes(rows, num_cells))
    return cudaErrorInvalidValue;
  if (rows == 0 || num_cells == 0) return cudaSuccess;
  const std::size_t n = static_cast<std::size_t>(rows) * num_cells;
  const std::int32_t slot_bits = core::bits_for(static_cast<std::uint32_t>(num_cells));
  const int end_bit = 32 + slot_bits + core::bits_for(static_cast<std::uint32_t>(rows));
  detail::workspace_carver w(workspace);
  std::uint64_t* keys_in = w.take<std::uint64_t>(n);
  std::uint64_t* keys_out = w.take<std::uint64_t>(n);
  std::size_t sort_bytes = 0;
  AUDIOKV_CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes,
                                                  static_cast<const std::uint64_t*>(keys_in),
                                                  keys_out, static_cast<int>(n), 0, 64));
  void* sort_tmp = w.take<unsigned char>(sort_bytes);
  kernels::
      selection_keys_kernel<<<dim3(detail::blocks_for(num_cells, 256), rows), 256, 0, stream>>>(
          scores, candidate, num_cells, stride, slot_bits, keys_in);
  AUDIOKV_CUDA_TRY(cudaGetLastError());
  AUDIOKV_CUDA_TRY(cub::DeviceRadixSort::SortKeys(
      sort_tmp, sort_bytes, static_cast<const std::uint64_t*>(keys_in), keys_out,
      static_cast<int>(n), 0, end_bit, stream));
  kernels::selection_mark_kernel<<<detail::blocks_for(static_cast<std::int64_t>(n), 256), 256, 0,
                                   stream>>>(keys_out, rows, num_cells, stride, slot_bits, k, evict,
                                             keep);
  return cudaGetLastError();
}

// ---- F9: compaction of contiguous layouts ----

/// @brief Workspace of move_to_from_mask.
inline std::size_t move_to_workspace_bytes(std::int32_t rows, std::int32_t num_cells) {
  const std::size_t n = static_cast<std::size_t>(rows) * num_cells;
  std::size_t scan_bytes = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const std::int32_t*>(nullptr),
                                static_cast<std::int32_t*>(nullptr), static_cast<int>(n));
  detail::workspace_carver w(nullptr);
  w.take<std::int32_t>(n);
  w.take<std::int32_t>(n);
  w.take<unsigned char>(scan_bytes);
  return w.used();
}

/// @brief move_to[h, j] = number of kept cells before j in row h (or -1 when dropped) and
/// n_kv_after[h] = kept cells, from a device-wide prefix sum (core::compaction_target).
/// @param keep [rows, stride]  @param move_to [rows, stride]  @param n_kv_after [rows] or null
inline cudaError_t move_to_from_mask(const std::uint8_t* keep, std::int32_t rows,
                                     std::int32_t num_cells, std::int32_t stride,
                                     std::int32_t* move_to, std::int32_t* n_kv_after,
                                     void* workspace, std::size_t workspace_bytes,
                                     cudaStream_t stream) {
  if (rows < 0 || num_cells < 0 || stride < num_cells ||
      static_cast<std::int64_t>(rows) * num_cells > INT32_MAX ||
      workspace_bytes < move_to_workspace_bytes(rows, num_cells))
    return cudaErrorInvalidValue;
  if (rows == 0 || num_cells == 0) return cudaSuccess;
  const std::size_t n = static_cast<std::size_t>(rows) * num_cells;
  detail::workspace_carver w(workspace);
  std::int32_t* counts = w.take<std::int32_t>(n);
  std::int32_t* prefix = w.take<std::int32_t>(n);
  std::size_t scan_bytes = 0;
  AUDIOKV_CUDA_TRY(cub::DeviceScan::ExclusiveSum(
      nullptr, scan_bytes, static_cast<const std::int32_t*>(counts), prefix, static_cast<int>(n)));
  void* scan_tmp = w.take<unsigned char>(scan_bytes);
  const dim3 grid(detail::blocks_for(num_cells, 256), static_cast<unsigned>(rows));
  kernels::keep_counts_kernel<<<grid, 256, 0, stream>>>(keep, num_cells, stride, counts);
  AUDIOKV_CUDA_TRY(cudaGetLastError());
  AUDIOKV_CUDA_TRY(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes,
                                                 static_cast<const std::int32_t*>(counts), prefix,
                                                 static_cast<int>(n), stream));
  kernels::move_to_kernel<<<grid, 256, 0, stream>>>(keep, prefix, num_cells, stride, move_to,
                                                    n_kv_after);
  return cudaGetLastError();
}

/// @brief Out-of-place, byte-exact gather: dst row (move_to[j], h) = src row (j, h) for every
/// kept cell j < num_cells and head h (layout.page_stride is ignored; rows are
/// j * entry_stride + h * head_stride bytes from the base). The plan is shared by all heads
/// (plan_rows == 1) or per head (plan_rows == num_heads, move_to row h drives head h).
/// dst must not overlap src (the engine ping-pongs two buffers or compacts from a copy).
/// @param move_to [plan_rows, move_stride] (a plan's move_to uploaded, or move_to_from_mask's)
inline cudaError_t gather_rows(const void* src, void* dst, const row_layout& layout,
                               const std::int32_t* move_to, std::int32_t plan_rows,
                               std::int32_t move_stride, std::int32_t num_cells,
                               cudaStream_t stream) {
  if (num_cells < 0 || layout.row_bytes <= 0 || layout.num_heads <= 0 ||
      (plan_rows != 1 && plan_rows != layout.num_heads) || src == dst)
    return cudaErrorInvalidValue;
  if (num_cells == 0) return cudaSuccess;
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  const auto all_multiple = [&](std::int64_t m) {
    return reinterpret_cast<std::uintptr_t>(s) % m == 0 &&
           reinterpret_cast<std::uintptr_t>(d) % m == 0 && layout.entry_stride % m == 0 &&
           layout.head_stride % m == 0 && layout.row_bytes % m == 0;
  };
  const unsigned blocks = 2048;
  if (all_multiple(16)) {
    kernels::gather_rows_kernel<uint4>
        <<<blocks, 256, 0, stream>>>(s, d, layout, move_to, plan_rows, move_stride, num_cells);
  } else if (all_multiple(4)) {
    kernels::gather_rows_kernel<unsigned>
        <<<blocks, 256, 0, stream>>>(s, d, layout, move_to, plan_rows, move_stride, num_cells);
  } else {
    kernels::gather_rows_kernel<unsigned char>
        <<<blocks, 256, 0, stream>>>(s, d, layout, move_to, plan_rows, move_stride, num_cells);
  }
  return cudaGetLastError();
}

// ---- F26: paged compaction (rule in core/paged.hpp) ----

/// @brief Shape of a paged compaction: the batch's page table capacity.
struct paged_shape {
  std::int32_t batch = 0;
  std::int32_t nnz_pages = 0;  // indptr[batch] (an upper bound is fine)
  std::int32_t page_size = 1;
};

/// @brief Workspace of paged_compact.
inline std::size_t paged_workspace_bytes(const paged_shape& shape) {
  detail::workspace_carver w(nullptr);
  const std::size_t np = static_cast<std::size_t>(shape.nnz_pages);
  w.take<std::int32_t>(np * shape.page_size);
  for (int i = 0; i < 6; ++i) w.take<std::int32_t>(np);
  w.take<std::int32_t>(4 * static_cast<std::size_t>(shape.batch));
  w.take<std::int32_t>(static_cast<std::size_t>(shape.batch));
  return w.used();
}

/// @brief Page-table compaction of a batch (rule of core/paged.hpp; oracle
/// cpu::plan_paged_compaction) and the row copies on up to two pools (K and V).
/// @param indices, indptr, last_page_len  input CSR table ([nnz], [batch + 1], [batch])
/// @param keep         [nnz_pages * page_size] 1 = keep
/// @param spare_pages  [num_spare] free page ids copy pages may use
/// @param new_indices  [nnz_pages]  @param new_indptr [batch + 1]  @param new_last_page_len
///                     [batch]  @param freed_pages [nnz_pages]  @param freed_indptr [batch + 1]
/// @param status       [2] {1 ok / 0 spares short (table unchanged, nothing moved), spares
///                     needed}
/// @param k_pool, v_pool  pools to move rows in (either may be nullptr), both with `layout`
/// Five launches on `stream`; never allocates or synchronises.
inline cudaError_t paged_compact(const paged_shape& shape, const std::int32_t* indices,
                                 const std::int32_t* indptr, const std::int32_t* last_page_len,
                                 const std::uint8_t* keep, const std::int32_t* spare_pages,
                                 std::int32_t num_spare, std::int32_t* new_indices,
                                 std::int32_t* new_indptr, std::int32_t* new_last_page_len,
                                 std::int32_t* freed_pages, std::int32_t* freed_indptr,
                                 std::int32_t* status, void* k_pool, void* v_pool,
                                 const row_layout& layout, void* workspace,
                                 std::size_t workspace_bytes, cudaStream_t stream) {
  if (shape.batch < 0 || shape.nnz_pages < 0 || shape.page_size < 1 || num_spare < 0 ||
      workspace_bytes < paged_workspace_bytes(shape))
    return cudaErrorInvalidValue;
  if (shape.batch == 0) return cudaSuccess;
  kernels::paged_table t{indices,     indptr,      last_page_len,   keep,
                         spare_pages, shape.batch, shape.page_size, num_spare};
  kernels::paged_result r{new_indices, new_indptr,   new_last_page_len,
                          freed_pages, freed_indptr, status};
  detail::workspace_carver w(workspace);
  const std::size_t np = static_cast<std::size_t>(shape.nnz_pages);
  kernels::paged_scratch s;
  s.src_of = w.take<std::int32_t>(np * shape.page_size);
  s.slot_reuse = w.take<std::int32_t>(np);
  s.slot_rank = w.take<std::int32_t>(np);
  s.slot_dest = w.take<std::int32_t>(np);
  s.reused = w.take<std::int32_t>(np);
  s.fe_rank = w.take<std::int32_t>(np);
  s.fe_ids = w.take<std::int32_t>(np);
  s.seq = w.take<std::int32_t>(4 * static_cast<std::size_t>(shape.batch));
  s.spare_offset = w.take<std::int32_t>(static_cast<std::size_t>(shape.batch));
  constexpr int threads = kernels::paged_block;
  kernels::paged_analyse_kernel<<<shape.batch, threads, 0, stream>>>(t, s);
  kernels::paged_batch_kernel<<<1, threads, 0, stream>>>(t, s, r);
  kernels::paged_table_kernel<<<shape.batch, threads, 0, stream>>>(t, s, r);
  AUDIOKV_CUDA_TRY(cudaGetLastError());
  for (void* pool : {k_pool, v_pool}) {
    if (pool == nullptr) continue;
    auto* bytes = static_cast<unsigned char*>(pool);
    const bool vec16 = reinterpret_cast<std::uintptr_t>(bytes) % 16 == 0 &&
                       layout.page_stride % 16 == 0 && layout.entry_stride % 16 == 0 &&
                       layout.head_stride % 16 == 0 && layout.row_bytes % 16 == 0;
    const dim3 grid(64, static_cast<unsigned>(shape.batch));
    if (vec16) {
      kernels::paged_move_kernel<uint4><<<grid, 256, 0, stream>>>(t, s, status, bytes, layout);
    } else {
      kernels::paged_move_kernel<unsigned char>
          <<<grid, 256, 0, stream>>>(t, s, status, bytes, layout);
    }
    AUDIOKV_CUDA_TRY(cudaGetLastError());
  }
  return cudaSuccess;
}

// ---- F12: int8 rows ----

/// @brief q[r, :dim] and scales[r] from rows x[r * row_stride, :dim] of element type `type`.
/// @param x [num_rows, row_stride]  @param q [num_rows, dim]  @param scales [num_rows]
inline cudaError_t quantize_rows(dtype type, const void* x, std::int64_t row_stride,
                                 std::int32_t num_rows, std::int32_t dim, std::int8_t* q,
                                 float* scales, cudaStream_t stream) {
  if (num_rows < 0 || dim < 1 || row_stride < dim) return cudaErrorInvalidValue;
  if (num_rows == 0) return cudaSuccess;
  AUDIOKV_DISPATCH_DTYPE(type, T, {
    kernels::quantize_rows_kernel<T>
        <<<detail::blocks_for(static_cast<std::int64_t>(num_rows) * 32, 256), 256, 0, stream>>>(
            static_cast<const T*>(x), row_stride, num_rows, dim, q, scales);
  })
  return cudaGetLastError();
}

/// @brief x[r * row_stride + i] = q[r, i] * scales[r], converted to `type` (round to nearest).
inline cudaError_t dequantize_rows(dtype type, const std::int8_t* q, const float* scales,
                                   std::int32_t num_rows, std::int32_t dim, void* x,
                                   std::int64_t row_stride, cudaStream_t stream) {
  if (num_rows < 0 || dim < 1 || row_stride < dim) return cudaErrorInvalidValue;
  if (num_rows == 0) return cudaSuccess;
  AUDIOKV_DISPATCH_DTYPE(type, T, {
    kernels::dequantize_rows_kernel<T>
        <<<detail::blocks_for(static_cast<std::int64_t>(num_rows) * dim, 256), 256, 0, stream>>>(
            q, scales, num_rows, dim, static_cast<T*>(x), row_stride);
  })
  return cudaGetLastError();
}

}  // namespace audiokv::cuda
