// SPDX-License-Identifier: Apache-2.0
// Three faults: a stage includes the AudioKV policy (rooms depend one way), includes a forwarding
// header, and opens audiokv::policy instead of audiokv::policy::stages.
#pragma once

#include "../audiokv/planner.hpp"
#include "../median_stage.hpp"

namespace audiokv::policy {}  // namespace audiokv::policy
