// SPDX-License-Identifier: Apache-2.0
/// @file
/// Moved to policy/stages/stage_context.hpp; this forwarding header goes in the next release.
#pragma once

#include "stages/stage_context.hpp"
