// SPDX-License-Identifier: Apache-2.0
/// @file
/// The only runtime -> compile-time boundary of the CUDA backend. Each macro is a switch whose
/// cases declare the compile-time name and paste the body; an unsupported value returns
/// cudaErrorInvalidValue from the enclosing launcher. Instantiated combinations:
///   dtype    f32 (float), f16 (__half), bf16 (__nv_bfloat16)
///   head_dim 64, 128
#pragma once

#include <cuda_runtime.h>

#include "dtype.cuh"

/// Runs `...` with `T` bound to the C++ type of the runtime audiokv::cuda::dtype `dt`.
#define AUDIOKV_DISPATCH_DTYPE(dt, T, ...) \
  switch (dt) {                            \
    case ::audiokv::cuda::dtype::f32: {    \
      using T = float;                     \
      __VA_ARGS__                          \
    } break;                               \
    case ::audiokv::cuda::dtype::f16: {    \
      using T = __half;                    \
      __VA_ARGS__                          \
    } break;                               \
    case ::audiokv::cuda::dtype::bf16: {   \
      using T = __nv_bfloat16;             \
      __VA_ARGS__                          \
    } break;                               \
    default:                               \
      return cudaErrorInvalidValue;        \
  }

/// Runs `...` with `constexpr int D` equal to the runtime head_dim `hd` (64 or 128).
#define AUDIOKV_DISPATCH_HEAD_DIM(hd, D, ...) \
  switch (hd) {                               \
    case 64: {                                \
      constexpr int D = 64;                   \
      __VA_ARGS__                             \
    } break;                                  \
    case 128: {                               \
      constexpr int D = 128;                  \
      __VA_ARGS__                             \
    } break;                                  \
    default:                                  \
      return cudaErrorInvalidValue;           \
  }
