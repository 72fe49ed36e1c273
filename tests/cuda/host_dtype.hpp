// SPDX-License-Identifier: Apache-2.0
/// @file
/// Host-side conversions between float and the K/V element types of the GPU tests: inputs are
/// rounded to T on the host first, so the CPU reference reads the same values as the kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace audiokv::test {

/// x rounded to T (round to nearest even).
template <class T>
T from_f(float x);
template <>
inline float from_f<float>(float x) {
  return x;
}
template <>
inline __half from_f<__half>(float x) {
  return __float2half_rn(x);
}
template <>
inline __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

/// x widened to float.
inline float to_f(float x) { return x; }
/// x widened to float.
inline float to_f(__half x) { return __half2float(x); }
/// x widened to float.
inline float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

}  // namespace audiokv::test
