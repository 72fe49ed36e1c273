// SPDX-License-Identifier: Apache-2.0
/// @file
/// Moved to policy/stages/local_rank_stage.hpp; this forwarding header goes in the next release.
#pragma once

#include "stages/local_rank_stage.hpp"
