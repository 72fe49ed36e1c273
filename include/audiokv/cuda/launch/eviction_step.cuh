// SPDX-License-Identifier: Apache-2.0
/// @file
/// The whole eviction step of a decode step on the device, one call per step for a batch of
/// (sequence, KV head) rows: importance from the step's attention probabilities, the cell-stage
/// smoothing pipeline, the trigger and the entropy ratio, a radix selection and in-place
/// compaction (hole-filling or stable) of K, V and the per-cell state. Fixed grids, counts in
/// device memory, no allocation and no host synchronisation in run(), so a sequence of steps can
/// be captured in a CUDA graph. CPU reference of exactly this step: cpu/eviction_step.hpp.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../../policy/stages/median_stage.hpp"
#include "../../policy/stages/smoothing_pipeline.hpp"
#include "../../types/eviction_step_config.hpp"
#include "../check.cuh"
#include "../kernels/eviction_step_kernel.cuh"
#include "eviction_step_layout.hpp"
#include "workspace.cuh"

namespace audiokv::cuda {

/// @brief The workspace layout of a device eviction step over `config`.
/// @throws audiokv::error from config.validate(). Host only; allocates nothing.
inline eviction_step_layout eviction_step_workspace_layout(const eviction_step_config& config) {
  config.validate("cuda::eviction_step_workspace_layout");
  return make_eviction_step_layout(config);
}

/// @brief Bytes of device workspace a cuda::eviction_step over `config` needs (its state and
/// scratch: 53 bytes per cell plus 48 per row, each array 256-byte aligned). Call once at setup.
/// @throws audiokv::error from config.validate(). Host only; allocates nothing.
inline std::size_t eviction_step_workspace_bytes(const eviction_step_config& config) {
  return eviction_step_workspace_layout(config).total;
}

/// @brief The device eviction step (see types/eviction_step_config.hpp for the rule and
/// cpu::eviction_step for its reference, which it matches step by step).
///
/// Memory: K and V are [batch, num_kv_heads, capacity, head_dim] (row r = sequence *
/// num_kv_heads + head holds slots [r * capacity, (r + 1) * capacity)); every other array is in
/// the caller's workspace (eviction_step_workspace_bytes), which holds the step's state between
/// calls. A decode step: the engine writes each row's cells_per_step new K/V rows at slots
/// [live, live + cells_per_step) (live_counts() before the call), computes attention over those
/// live + cells_per_step slots (probabilities in slot order), then calls run(). Afterwards the
/// live slots of row r are again [0, live_counts()[r]), positions() gives each slot's time index
/// and order() the slots in time order.
///
/// The smoothing runs `Pipeline` (cell stages only, empty stage_context) over each triggered
/// row's importance in time order. Not thread-safe; one object per workspace. Construction
/// allocates nothing, on host or device.
template <class Pipeline = smoothing_pipeline<median_stage<5>>>
class eviction_step {
  static_assert(Pipeline::runs_on_device,
                "audiokv::cuda::eviction_step: every stage must be a cell stage "
                "(policy/stages/cell_stage.hpp)");

 public:
  /// @brief A step over `config` whose state and scratch live in `workspace`.
  /// @param workspace        device memory, 256-byte aligned, owned by the caller and kept
  ///                         alive (and untouched) as long as the object is used
  /// @param workspace_bytes  at least eviction_step_workspace_bytes(config)
  /// @throws audiokv::error from config.validate(), or naming "workspace" (nullptr or not
  /// 256-byte aligned) or "workspace_bytes" (too small). Touches no device memory: call reset()
  /// before the first run().
  eviction_step(const eviction_step_config& config, void* workspace, std::size_t workspace_bytes,
                Pipeline pipeline = Pipeline{})
      : config_(config), pipeline_(pipeline) {
    constexpr const char* where = "cuda::eviction_step";
    config.validate(where);
    layout_ = eviction_step_workspace_layout(config);
    AUDIOKV_REQUIRE(
        workspace != nullptr &&
            reinterpret_cast<std::uintptr_t>(workspace) % eviction_step_layout::alignment == 0,
        where, "workspace", workspace, "must be a 256-byte aligned device pointer");
    AUDIOKV_REQUIRE(workspace_bytes >= layout_.total, where, "workspace_bytes", workspace_bytes,
                    "must be >= eviction_step_workspace_bytes(config)");
    base_ = static_cast<unsigned char*>(workspace);
    grid_ = make_eviction_step_grid(config);
    auto* b = base_;
    p_.live = reinterpret_cast<std::int32_t*>(b + layout_.live);
    p_.next_position = reinterpret_cast<std::int32_t*>(b + layout_.next_position);
    p_.evict_count = reinterpret_cast<std::int32_t*>(b + layout_.evict_count);
    p_.num_moves = reinterpret_cast<std::int32_t*>(b + layout_.num_moves);
    p_.stats = reinterpret_cast<long long*>(b + layout_.stats);
    p_.order = reinterpret_cast<std::int32_t*>(b + layout_.order);
    p_.new_order = reinterpret_cast<std::int32_t*>(b + layout_.new_order);
    p_.position = reinterpret_cast<std::int32_t*>(b + layout_.position);
    p_.importance = reinterpret_cast<float*>(b + layout_.importance);
    p_.in_order = reinterpret_cast<float*>(b + layout_.in_order);
    p_.scores = reinterpret_cast<float*>(b + layout_.scores);
    p_.scratch = reinterpret_cast<float*>(b + layout_.scratch);
    p_.evicted = b + layout_.evicted;
    p_.keep_physical = reinterpret_cast<std::int32_t*>(b + layout_.keep_physical);
    p_.move_logical = reinterpret_cast<std::int32_t*>(b + layout_.move_logical);
    p_.move_physical = reinterpret_cast<std::int32_t*>(b + layout_.move_physical);
    p_.hole_of_rank = reinterpret_cast<std::int32_t*>(b + layout_.hole_of_rank);
    p_.src = reinterpret_cast<std::int32_t*>(b + layout_.src);
    p_.dst = reinterpret_cast<std::int32_t*>(b + layout_.dst);
    p_.rows = config.rows();
    p_.capacity = config.capacity;
    p_.group = config.group;
    p_.cells_per_step = config.cells_per_step;
    p_.trigger_cells = config.trigger_cells();
    p_.target_cells = config.target_cells();
    p_.sink_cells = config.sink_cells;
    p_.recent_cells = config.recent_cells;
    p_.alpha = config.alpha;
    p_.base_rate = config.base_rate;
    p_.lambda = config.lambda;
    p_.reduce = config.reduce;
    p_.row_bytes = config.row_bytes();
  }

  /// A second object on the same workspace (use one of them: one object per workspace).
  eviction_step(const eviction_step&) = default;
  /// Copy assignment: see the copy constructor.
  eviction_step& operator=(const eviction_step&) = default;
  /// Takes the workspace. `other` is left with none: config().batch 0, null device arrays,
  /// and reset(), run() and read_statistics() return cudaErrorInvalidValue without touching
  /// the workspace the moved-to object now uses.
  eviction_step(eviction_step&& other) noexcept(std::is_nothrow_move_constructible_v<Pipeline>)
      : config_(other.config_),
        pipeline_(std::move(other.pipeline_)),
        layout_(other.layout_),
        grid_(other.grid_),
        p_(other.p_),
        base_(std::exchange(other.base_, nullptr)),
        reset_(std::exchange(other.reset_, false)) {
    other.config_.batch = 0;
    other.p_ = kernels::eviction_step_params{};
  }
  /// Move assignment, with the moved-from state of the move constructor.
  eviction_step& operator=(eviction_step&& other) noexcept(
      std::is_nothrow_move_assignable_v<Pipeline>) {
    if (this != &other) {
      pipeline_ = std::move(other.pipeline_);
      config_ = other.config_;
      layout_ = other.layout_;
      grid_ = other.grid_;
      p_ = other.p_;
      base_ = std::exchange(other.base_, nullptr);
      reset_ = std::exchange(other.reset_, false);
      other.config_.batch = 0;
      other.p_ = kernels::eviction_step_params{};
    }
    return *this;
  }
  ~eviction_step() = default;

  /// @brief Empties every row and zeroes the counters (enqueues memsets on `stream`). Call once
  /// before the first run(), and to start over. Never allocates or synchronises.
  /// @return cudaErrorInvalidValue for a moved-from step, else the memset error, or
  /// cudaSuccess.
  cudaError_t reset(cudaStream_t stream) {
    if (base_ == nullptr) return cudaErrorInvalidValue;
    AUDIOKV_CUDA_TRY(
        cudaMemsetAsync(base_ + layout_.live, 0, layout_.order - layout_.live, stream));
    reset_ = true;
    return cudaSuccess;
  }

  /// @brief One decode step of every row on `stream` (see the class comment and
  /// cpu::eviction_step::step): append, importance, smoothing, trigger and ratio, selection,
  /// in-place compaction of K, V, importance and positions.
  /// @param probs             [prob_rows(), probs_row_stride] device fp32 probabilities, query
  ///                          head g of row r in row r * group + g, slot order
  /// @param probs_row_stride  floats between rows of probs (>= capacity)
  /// @param k, v              device K and V ([rows() * capacity * row_bytes()] bytes), or
  ///                          nullptr (that buffer is not moved)
  /// The device cannot reject a NaN, infinite or negative probability as the CPU reference
  /// does (cpu::eviction_step::step throws); it ranks whatever scores result by the total order
  /// of core/selection.hpp (NaN lowest, so such a cell is evicted first), the order the CPU
  /// functions use, so both pick the same cells from the same scores.
  /// Enqueues a fixed sequence of 7 kernels that depends only on the configuration and the
  /// alignment of k and v, so the same call can be captured in a CUDA graph and replayed; never
  /// allocates or synchronises. Per-cell work of a row that does not evict: the append and the
  /// importance update; the smoothing, selection (radix select, a block per row) and compaction
  /// kernels return at once.
  /// @return cudaErrorInvalidValue (before enqueuing anything) for a null probs, a stride below
  /// capacity, a stable compaction whose staged rows exceed 48 KiB of shared memory, or when
  /// reset() was never called (or the step was moved from); else the first launch error, or
  /// cudaSuccess.
  cudaError_t run(const float* probs, std::int64_t probs_row_stride, void* k, void* v,
                  cudaStream_t stream) {
    const bool stable = config_.compaction == step_compaction::stable;
    if (!reset_ || probs == nullptr || probs_row_stride < config_.capacity ||
        (stable && grid_.stable_shared_bytes > 48 * 1024))
      return cudaErrorInvalidValue;
    auto* kb = static_cast<unsigned char*>(k);
    auto* vb = static_cast<unsigned char*>(v);
    constexpr int t = eviction_step_grid::threads;
    constexpr int rt = eviction_step_grid::row_threads;
    static_assert(rt == core::step_entropy_lanes, "the plan kernel runs one thread per lane");
    const dim3 cells(static_cast<unsigned>(grid_.cell_blocks), static_cast<unsigned>(grid_.rows));
    const auto rows = static_cast<unsigned>(grid_.rows);

    kernels::step_append_kernel<<<rows, t, 0, stream>>>(p_);
    AUDIOKV_CUDA_TRY(cudaGetLastError());
    kernels::step_importance_kernel<<<cells, t, 0, stream>>>(p_, probs, probs_row_stride);
    AUDIOKV_CUDA_TRY(cudaGetLastError());
    kernels::step_plan_kernel<Pipeline><<<rows, rt, 0, stream>>>(pipeline_, p_);
    AUDIOKV_CUDA_TRY(cudaGetLastError());
    kernels::step_select_kernel<rt><<<rows, rt, 0, stream>>>(p_);
    AUDIOKV_CUDA_TRY(cudaGetLastError());
    kernels::step_compact_plan_kernel<rt><<<rows, rt, 0, stream>>>(p_, !stable);
    AUDIOKV_CUDA_TRY(cudaGetLastError());
    // One width for K and V (rows row_bytes apart); a null buffer aligns to everything.
    const int width = core::row_copy_width(config_.row_bytes(), kb, vb);
    if (stable) {
      const auto smem = static_cast<std::size_t>(grid_.stable_shared_bytes);
      kernels::step_stable_rows_kernel<<<rows, t, smem, stream>>>(p_, kb, vb, grid_.stable_tile,
                                                                  width);
    } else {
      const dim3 moves(static_cast<unsigned>(grid_.move_blocks), rows);
      kernels::step_hole_fill_rows_kernel<<<moves, t, 0, stream>>>(p_, kb, vb, width);
    }
    AUDIOKV_CUDA_TRY(cudaGetLastError());
    kernels::step_finish_kernel<<<static_cast<unsigned>(grid_.finish_blocks), t, 0, stream>>>(p_);
    return cudaGetLastError();
  }

  /// @brief Copies the counters to the host: waits for `stream` (synchronises) and allocates a
  /// host buffer of 5 * rows() values. Not for the decode loop.
  /// @return the copy or synchronisation error, or cudaSuccess (then `out` holds the counters).
  cudaError_t read_statistics(eviction_step_statistics& out, cudaStream_t stream) const {
    if (base_ == nullptr) return cudaErrorInvalidValue;
    const auto rows = static_cast<std::size_t>(config_.rows());
    std::vector<long long> stats(rows * 4);
    std::vector<std::int32_t> live(rows);
    AUDIOKV_CUDA_TRY(cudaMemcpyAsync(stats.data(), p_.stats, stats.size() * sizeof(long long),
                                     cudaMemcpyDeviceToHost, stream));
    AUDIOKV_CUDA_TRY(cudaMemcpyAsync(live.data(), p_.live, rows * sizeof(std::int32_t),
                                     cudaMemcpyDeviceToHost, stream));
    AUDIOKV_CUDA_TRY(cudaStreamSynchronize(stream));
    eviction_step_statistics s;
    s.steps = rows > 0 ? stats[0] : 0;
    for (std::size_t r = 0; r < rows; ++r) {
      s.evictions += stats[4 * r + 1];
      s.cells_evicted += stats[4 * r + 2];
      s.rows_moved += stats[4 * r + 3];
      s.live_cells += live[r];
      s.max_live = live[r] > s.max_live ? live[r] : s.max_live;
    }
    out = s;
    return cudaSuccess;
  }

  /// The validated configuration.
  const eviction_step_config& config() const noexcept { return config_; }
  /// Where each array lives in the workspace.
  const eviction_step_layout& layout() const noexcept { return layout_; }
  /// The fixed launch grids.
  const eviction_step_grid& grid() const noexcept { return grid_; }
  /// Device [rows()] live cells of each row (slots [0, live)): where the engine appends.
  const std::int32_t* live_counts() const noexcept { return p_.live; }
  /// Device [rows(), capacity] time index of the cell in each slot.
  const std::int32_t* positions() const noexcept { return p_.position; }
  /// Device [rows(), capacity] importance of each slot.
  const float* importance() const noexcept { return p_.importance; }
  /// Device [rows(), capacity] slot of the i-th oldest live cell of each row.
  const std::int32_t* order() const noexcept { return p_.order; }
  /// Device [rows(), capacity] the last smoothed scores of each row that triggered, time order.
  const float* scores() const noexcept { return p_.scores; }
  /// Device [rows(), capacity] 1 for the time-order cells the last step evicted; written for
  /// the cells [0, live before the eviction) of the rows whose evict_counts() is > 0 only.
  const std::uint8_t* evicted() const noexcept { return p_.evicted; }
  /// Device [rows()] cells each row evicted in the last step.
  const std::int32_t* evict_counts() const noexcept { return p_.evict_count; }
  /// Device [rows()] row copies each row made in the last step.
  const std::int32_t* num_moves() const noexcept { return p_.num_moves; }
  /// Device [rows(), capacity] hole-filling sources of the last step (first num_moves of a row).
  const std::int32_t* move_src() const noexcept { return p_.src; }
  /// Device [rows(), capacity] hole-filling destinations of the last step.
  const std::int32_t* move_dst() const noexcept { return p_.dst; }

 private:
  eviction_step_config config_;
  Pipeline pipeline_;
  eviction_step_layout layout_{};
  eviction_step_grid grid_{};
  kernels::eviction_step_params p_{};
  unsigned char* base_ = nullptr;
  bool reset_ = false;
};

}  // namespace audiokv::cuda
