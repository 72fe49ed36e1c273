// SPDX-License-Identifier: Apache-2.0
/// @file
/// Moved to policy/stages/trend_stage.hpp; this forwarding header goes in the next release.
#pragma once

#include "stages/trend_stage.hpp"
