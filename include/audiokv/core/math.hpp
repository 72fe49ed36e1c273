// SPDX-License-Identifier: Apache-2.0
/// @file
/// Scalar math usable on host and device: std:: functions on the host, CUDA intrinsics on the
/// device, so core/ code never needs --expt-relaxed-constexpr.
#pragma once

#include <cmath>
#include <cstdint>

#include "../config.hpp"

namespace audiokv::core {

template <class T>
/// The smaller of a and b (a on ties); host and device, unlike std::min.
AUDIOKV_HOST_DEVICE constexpr T min_of(T a, T b) {
  return b < a ? b : a;
}
template <class T>
/// The larger of a and b (a on ties); host and device, unlike std::max.
AUDIOKV_HOST_DEVICE constexpr T max_of(T a, T b) {
  return a < b ? b : a;
}
template <class T>
/// x limited to [lo, hi] (lo <= hi).
AUDIOKV_HOST_DEVICE constexpr T clamp_to(T x, T lo, T hi) {
  return min_of(max_of(x, lo), hi);
}

/// e^x in float: expf on the device, std::exp on the host.
AUDIOKV_HOST_DEVICE float exp_of(float x) {
#if defined(AUDIOKV_DEVICE_PASS)
  return ::expf(x);
#else
  return std::exp(x);
#endif
}
/// 2^x in float: exp2f on the device, std::exp2 on the host.
AUDIOKV_HOST_DEVICE float exp2_of(float x) {
#if defined(AUDIOKV_DEVICE_PASS)
  return ::exp2f(x);
#else
  return std::exp2(x);
#endif
}
/// ln x in float: logf on the device, std::log on the host.
AUDIOKV_HOST_DEVICE float log_of(float x) {
#if defined(AUDIOKV_DEVICE_PASS)
  return ::logf(x);
#else
  return std::log(x);
#endif
}
/// Square root in float: sqrtf on the device, std::sqrt on the host.
AUDIOKV_HOST_DEVICE float sqrt_of(float x) {
#if defined(AUDIOKV_DEVICE_PASS)
  return ::sqrtf(x);
#else
  return std::sqrt(x);
#endif
}
/// True unless x is NaN or infinite.
AUDIOKV_HOST_DEVICE bool is_finite(float x) {
#if defined(AUDIOKV_DEVICE_PASS)
  return ::isfinite(x);
#else
  return std::isfinite(x);
#endif
}

}  // namespace audiokv::core
