// SPDX-License-Identifier: Apache-2.0
/// @file
/// Selection on the device: keys of core/selection_key.hpp, sorted by the launcher with CUB's
/// DeviceRadixSort, then the first k[h] candidates of every row are marked.
#pragma once

#include <cstdint>

#include "../../core/selection_key.hpp"

namespace audiokv::cuda::kernels {

// Kernels are static (internal linkage): every translation unit that includes this header
// compiles and registers its own copy, so any number of them link into one program.

/// Thread per (cell, row): key = (row, score bits or excluded, cell).
static __global__ void selection_keys_kernel(const float* scores, const std::uint8_t* candidate,
                                             std::int32_t num_cells, std::int32_t stride,
                                             std::int32_t slot_bits, std::uint64_t* keys) {
  const std::int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= num_cells) return;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.y) * stride + j;
  const bool is_candidate = candidate == nullptr || candidate[i] != 0;
  keys[static_cast<std::int64_t>(blockIdx.y) * num_cells + j] = core::selection_key(
      blockIdx.y, is_candidate ? core::ordered_score_bits(scores[i]) : core::excluded_score_bits,
      static_cast<std::uint32_t>(j), slot_bits);
}

/// Thread per sorted key: row h's keys occupy [h * num_cells, (h + 1) * num_cells) in order,
/// so rank r < k[h] of a candidate means evicted. Every (row, cell) is written exactly once.
static __global__ void selection_mark_kernel(const std::uint64_t* sorted_keys, std::int32_t rows,
                                             std::int32_t num_cells, std::int32_t stride,
                                             std::int32_t slot_bits, const std::int32_t* k,
                                             std::uint8_t* evict, std::uint8_t* keep) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= static_cast<std::int64_t>(rows) * num_cells) return;
  const auto h = static_cast<std::int32_t>(r / num_cells);
  const auto rank = static_cast<std::int32_t>(r % num_cells);
  const std::uint64_t key = sorted_keys[r];
  const bool out = rank < k[h] && core::key_score_bits(key, slot_bits) != core::excluded_score_bits;
  const std::int64_t i = static_cast<std::int64_t>(h) * stride + core::key_slot(key, slot_bits);
  if (evict != nullptr) evict[i] = out ? 1 : 0;
  if (keep != nullptr) keep[i] = out ? 0 : 1;
}

}  // namespace audiokv::cuda::kernels
