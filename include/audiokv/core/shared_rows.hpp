// SPDX-License-Identifier: Apache-2.0
/// @file
/// Shared rows: one physical K/V row standing for m logical cells (a run of repeated frames).
///   match:        max_i |x_i - r_i| <= tolerance * max_i |r_i|   (r: the run's first row)
///   attention:    logit_row = q . k_row * scale + ln m, so the row's softmax weight is
///                 m * exp(q . k_row * scale): exactly the weight of m identical cells;
///   probability:  each of the m cells receives p_row / m.
/// With tolerance 0 only bitwise-equal rows share (+0 and -0 compare equal), and attention
/// over the shared cache equals attention over the unshared one up to rounding.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "math.hpp"

namespace audiokv::core {

/// True when `row` may be represented by `representative` (both [dim]).
AUDIOKV_HOST_DEVICE bool rows_match(const float* representative, const float* row, std::int32_t dim,
                                    float tolerance) {
  float max_abs = 0.0f, max_diff = 0.0f;
  for (std::int32_t i = 0; i < dim; ++i) {
    const float r = representative[i], d = row[i] - r;
    max_abs = max_of(max_abs, r < 0.0f ? -r : r);
    max_diff = max_of(max_diff, d < 0.0f ? -d : d);
  }
  // NaN differences fail the comparison, so a NaN row never shares.
  return max_diff <= tolerance * max_abs;
}

/// Logit bias of a row standing for `multiplicity` >= 1 cells: ln m.
AUDIOKV_HOST_DEVICE float multiplicity_bias(std::int32_t multiplicity) {
  return log_of(static_cast<float>(multiplicity));
}

/// Probability of one of the `multiplicity` cells behind a row of probability p_row.
AUDIOKV_HOST_DEVICE float shared_cell_probability(float row_probability,
                                                  std::int32_t multiplicity) {
  return row_probability / static_cast<float>(multiplicity);
}

}  // namespace audiokv::core
