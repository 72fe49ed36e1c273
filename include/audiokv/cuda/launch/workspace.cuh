// SPDX-License-Identifier: Apache-2.0
/// @file
/// Launch helpers shared by the launchers: workspace slicing and grid sizes.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

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

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace detail

}  // namespace audiokv::cuda
