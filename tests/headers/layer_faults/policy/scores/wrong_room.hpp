// SPDX-License-Identifier: Apache-2.0
// Two faults: a scorer includes a baseline (rooms depend one way) and opens the baselines'
// namespace.
#pragma once

#include "../baselines/h2o.hpp"

namespace audiokv::policy::baselines {}  // namespace audiokv::policy::baselines
