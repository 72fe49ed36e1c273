// SPDX-License-Identifier: Apache-2.0
/// @file
/// SnapKV's smoothing of scores along the token axis: an average or a maximum over a sliding
/// kernel, as torch.nn.functional's avg_pool1d / max_pool1d with stride 1 and padding kernel/2.
/// The average pads with zeros and always divides by kernel (count_include_pad=True), so the
/// first and last kernel/2 outputs are down-weighted; the maximum pads with -inf.
#pragma once

#include <cstdint>
#include <limits>

#include "../../error.hpp"

namespace audiokv::policy::scores {

/// How reduce_1d combines the scores under the kernel.
enum class kernel_reduce : std::uint8_t { avg = 0, max = 1 };

/// @brief out[j] = reduce(in[j - kernel/2 .. j + kernel/2]) for j in [0, n). `kernel` odd >= 1.
/// Accumulates in double. in != out. Never allocates.
template <class In, class Out>
void reduce_1d(const In* in, Out* out, std::int32_t n, std::int32_t kernel, kernel_reduce kind) {
  const std::int32_t half = kernel / 2;
  for (std::int32_t j = 0; j < n; ++j) {
    const std::int32_t lo = j - half < 0 ? 0 : j - half;
    const std::int32_t hi = j + half >= n ? n - 1 : j + half;
    if (kind == kernel_reduce::avg) {
      double sum = 0.0;
      for (std::int32_t t = lo; t <= hi; ++t) sum += static_cast<double>(in[t]);
      out[j] = static_cast<Out>(sum / kernel);
    } else {
      double best = -std::numeric_limits<double>::infinity();
      for (std::int32_t t = lo; t <= hi; ++t) {
        if (static_cast<double>(in[t]) > best) best = static_cast<double>(in[t]);
      }
      out[j] = static_cast<Out>(best);
    }
  }
}

/// Throws unless `kernel` is odd and >= 1 (even kernels change the output length in torch).
inline void validate_kernel(const char* where, std::int32_t kernel) {
  AUDIOKV_REQUIRE(kernel >= 1 && kernel % 2 == 1, where, "kernel", kernel, "must be odd and >= 1");
}

}  // namespace audiokv::policy::scores

namespace audiokv {
namespace scores = policy::scores;
}  // namespace audiokv
