// SPDX-License-Identifier: Apache-2.0
/// @file
/// Compiler switches shared by every header: one macro family for host/device functions.
#pragma once

#if defined(__CUDACC__) || (defined(__clang__) && defined(__CUDA__))
/// Marks a function callable from host and device code (inline on the host compiler).
#define AUDIOKV_HOST_DEVICE __host__ __device__ __forceinline__
/// Marks a device-only helper (plain inline on the host compiler).
#define AUDIOKV_DEVICE __device__ __forceinline__
#define AUDIOKV_CUDA_COMPILER 1  // set in both nvcc passes, like EIGEN_GPUCC
#else
/// Marks a function callable from host and device code (inline on the host compiler).
#define AUDIOKV_HOST_DEVICE inline
/// Marks a device-only helper (plain inline on the host compiler).
#define AUDIOKV_DEVICE inline
#endif

#if defined(__CUDA_ARCH__)
#define AUDIOKV_DEVICE_PASS 1  // device pass only, like EIGEN_GPU_COMPILE_PHASE
#endif

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
#define AUDIOKV_HAS_CONCEPTS 1
#endif

#include <cassert>
/// Debug-only invariant check, usable on host and device; compiled out under NDEBUG.
#define AUDIOKV_ASSERT(cond) assert(cond)
