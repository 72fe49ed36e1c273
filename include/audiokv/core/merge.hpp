// SPDX-License-Identifier: Apache-2.0
/// @file
/// Merging of K/V rows: the weighted mean that folds evicted cells into the kept cell that
/// stands for them (policy/speech/attention_mass.hpp decides which, and with which weights).
#pragma once

#include <cstdint>

#include "../config.hpp"

namespace audiokv::core {

/// @brief Folds the rows of slots [first, last] into row `keeper` (first <= keeper <= last):
///   row_keeper[d] = sum_c w_c row_c[d] / sum_c w_c,  c in [first, last]
/// with the sums in double, each dimension in slot order, so the result does not depend on the
/// caller (host or device). Rows are `stride` floats apart; weights are w[c] > 0. Allocates
/// nothing.
AUDIOKV_HOST_DEVICE void merge_rows(float* rows, std::int64_t stride, std::int32_t dim,
                                    const double* w, std::int32_t first, std::int32_t last,
                                    std::int32_t keeper) {
  double total = 0.0;
  for (std::int32_t c = first; c <= last; ++c) total += w[c];
  for (std::int32_t d = 0; d < dim; ++d) {
    double sum = 0.0;
    for (std::int32_t c = first; c <= last; ++c) sum += w[c] * rows[c * stride + d];
    rows[keeper * stride + d] = static_cast<float>(sum / total);
  }
}

}  // namespace audiokv::core
