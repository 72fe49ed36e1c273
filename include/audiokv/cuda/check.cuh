// SPDX-License-Identifier: Apache-2.0
/// @file
/// Error propagation of the CUDA host API: every launcher returns cudaError_t.
#pragma once

#include <cuda_runtime.h>

/// Evaluates a CUDA runtime call and returns its error from the enclosing function on failure.
#define AUDIOKV_CUDA_TRY(expr)                            \
  do {                                                    \
    const cudaError_t audiokv_err_ = (expr);              \
    if (audiokv_err_ != cudaSuccess) return audiokv_err_; \
  } while (0)
