// SPDX-License-Identifier: Apache-2.0
/// @file
/// Moved to policy/stages/spectral_stage.hpp; this forwarding header goes in the next release.
#pragma once

#include "stages/spectral_stage.hpp"
