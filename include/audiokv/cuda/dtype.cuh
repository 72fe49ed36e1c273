// SPDX-License-Identifier: Apache-2.0
/// @file
/// K/V element types of the kernels (fp32, fp16, bf16) and their 16-byte vector loads.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../config.hpp"

namespace audiokv::cuda {

/// Runtime tag of a K/V element type; cuda/dispatch.cuh turns it into a template argument.
enum class dtype : std::uint8_t { f32 = 0, f16 = 1, bf16 = 2 };

/// Bytes of one element of `t`.
inline constexpr std::int32_t dtype_bytes(dtype t) { return t == dtype::f32 ? 4 : 2; }

namespace detail {

/// x widened to float (exact). Host and device: the GPU tests round their inputs with the same
/// conversions the kernels use.
AUDIOKV_HOST_DEVICE float to_float(float x) { return x; }
/// x widened to float (exact).
AUDIOKV_HOST_DEVICE float to_float(__half x) { return __half2float(x); }
/// x widened to float (exact).
AUDIOKV_HOST_DEVICE float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

/// x rounded to T (round to nearest even).
template <class T>
AUDIOKV_HOST_DEVICE T from_float(float x);
/// x itself.
template <>
AUDIOKV_HOST_DEVICE float from_float<float>(float x) {
  return x;
}
/// x rounded to fp16 (round to nearest even).
template <>
AUDIOKV_HOST_DEVICE __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
/// x rounded to bf16 (round to nearest even).
template <>
AUDIOKV_HOST_DEVICE __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

/// Loads 16 bytes (16 / sizeof(T) elements, 16-byte aligned) and widens them to float.
template <class T>
AUDIOKV_DEVICE void load16_as_float(const T* p, float* out);

template <>
AUDIOKV_DEVICE void load16_as_float<float>(const float* p, float* out) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
}

template <>
AUDIOKV_DEVICE void load16_as_float<__half>(const __half* p, float* out) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

template <>
AUDIOKV_DEVICE void load16_as_float<__nv_bfloat16>(const __nv_bfloat16* p, float* out) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

}  // namespace detail
}  // namespace audiokv::cuda
