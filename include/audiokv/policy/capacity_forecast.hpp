// SPDX-License-Identifier: Apache-2.0
/// @file
/// Moved to policy/audiokv/capacity_forecast.hpp; this forwarding header goes in the next release.
#pragma once

#include "audiokv/capacity_forecast.hpp"
