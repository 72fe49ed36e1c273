// SPDX-License-Identifier: Apache-2.0
/// @file
/// The eviction step's kernels up to the eviction count: append the step's cells, update the
/// importance from the step's attention, and score the cells through the pipeline into the
/// count k of each row (CPU reference: cpu/eviction_step.hpp). Every kernel reads the live
/// count from device memory and returns early in a row with nothing to do.
#pragma once

#include <cstdint>

#include "../../core/entropy.hpp"
#include "../../core/eviction_step.hpp"
#include "../../core/gqa.hpp"
#include "../../core/importance.hpp"
#include "../../policy/stages/cell_stage.hpp"
#include "../../policy/stages/smoothing_pipeline.hpp"
#include "../../policy/stages/stage_context.hpp"
#include "eviction_step_params.cuh"
#include "pipeline_kernel.cuh"

namespace audiokv::cuda::kernels {

// Kernels are static (internal linkage): every translation unit that includes this header
// compiles and registers its own copy, so any number of them link into one program.

/// Block per row: the engine's cells_per_step new rows at slots [live, live + a) get the next
/// positions, the newest older cell's importance and the next time indices; then live += a.
static __global__ void step_append_kernel(eviction_step_params p) {
  const std::int32_t r = blockIdx.x;
  const std::int64_t b = p.base(r);
  const std::int32_t live0 = p.live[r];
  const float entry = live0 > 0 ? p.importance[b + p.order[b + live0 - 1]] : 0.0f;
  for (std::int32_t t = threadIdx.x; t < p.cells_per_step; t += blockDim.x) {
    p.importance[b + live0 + t] = entry;
    p.position[b + live0 + t] = p.next_position[r] + t;
    p.order[b + live0 + t] = live0 + t;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    p.live[r] = live0 + p.cells_per_step;
    p.next_position[r] += p.cells_per_step;
  }
}

/// Thread per (slot, row): I = importance_update(I, reduce_group(probs of the row's group)).
static __global__ void step_importance_kernel(eviction_step_params p, const float* probs,
                                              std::int64_t probs_stride) {
  const std::int32_t s = blockIdx.x * blockDim.x + threadIdx.x;
  const std::int32_t r = blockIdx.y;
  if (s >= p.live[r]) return;
  const float* group = probs + static_cast<std::int64_t>(r) * p.group * probs_stride;
  float& imp = p.importance[p.base(r) + s];
  imp = core::importance_update(imp, core::reduce_group(group, p.group, probs_stride, s, p.reduce),
                                p.alpha);
}

/// Block per row (core::step_entropy_lanes threads): below the trigger k = 0; else the
/// importance in time order through the pipeline into scores, the entropy of the candidates'
/// scores in the lane order of core/eviction_step.hpp, and k.
template <class Pipeline>
static __global__ void __launch_bounds__(core::step_entropy_lanes)
    step_plan_kernel(Pipeline pipeline, eviction_step_params p) {
  static_assert(Pipeline::runs_on_device,
                "audiokv::cuda::step_plan_kernel: every stage must be a cell stage");
  const std::int32_t r = blockIdx.x;
  const std::int64_t b = p.base(r);
  const std::int32_t live = p.live[r];
  if (!core::step_triggered(live, p.trigger_cells)) {
    if (threadIdx.x == 0) p.evict_count[r] = 0;
    return;
  }
  float* in = p.in_order + b;
  for (std::int32_t i = threadIdx.x; i < live; i += blockDim.x) {
    in[i] = p.importance[b + p.order[b + i]];
  }
  __syncthreads();
  const stage_context ctx{};
  float* scores = p.scores + b;
  if constexpr (Pipeline::num_stages == 0) {
    for (std::int32_t i = threadIdx.x; i < live; i += blockDim.x) scores[i] = in[i];
    __syncthreads();
  } else {
    float* const buffers[2] = {Pipeline::num_stages % 2 == 1 ? scores : p.scratch + b,
                               Pipeline::num_stages % 2 == 1 ? p.scratch + b : scores};
    run_pipeline_stages<0>(pipeline, in, buffers, live, ctx);  // ends with __syncthreads
  }
  const std::int32_t first = core::step_first_candidate(live, p.sink_cells);
  const std::int32_t n_cand = core::step_candidates(live, p.sink_cells, p.recent_cells);
  // Lane t sums candidates t, t + lanes, ... in ascending order, then the fixed tree.
  __shared__ alignas(
      8) unsigned char lane_bytes[core::step_entropy_lanes * sizeof(core::entropy_accumulator)];
  auto* lanes = reinterpret_cast<core::entropy_accumulator*>(lane_bytes);
  core::entropy_accumulator acc;
  for (std::int32_t c = threadIdx.x; c < n_cand; c += core::step_entropy_lanes) {
    acc.add(scores[first + c]);
  }
  lanes[threadIdx.x] = acc;
  __syncthreads();
  for (std::int32_t half = core::step_entropy_lanes / 2; half >= 1; half /= 2) {
    core::step_entropy_merge_round(lanes, half, static_cast<std::int32_t>(threadIdx.x));
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float ratio =
        core::entropy_eviction_ratio(lanes[0].normalized_entropy(), p.base_rate, p.lambda);
    p.evict_count[r] = core::step_evict_count(live, n_cand, p.trigger_cells, p.target_cells, ratio);
  }
}

}  // namespace audiokv::cuda::kernels
