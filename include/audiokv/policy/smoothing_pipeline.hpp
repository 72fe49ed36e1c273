// SPDX-License-Identifier: Apache-2.0
/// @file
/// Moved to policy/stages/smoothing_pipeline.hpp; this forwarding header goes in the next release.
#pragma once

#include "stages/smoothing_pipeline.hpp"
