// SPDX-License-Identifier: Apache-2.0
/// @file
/// Moved to policy/speech/temporal_coverage.hpp; this forwarding header goes in the next release.
#pragma once

#include "speech/temporal_coverage.hpp"
