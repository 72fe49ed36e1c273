// SPDX-License-Identifier: Apache-2.0
/// @file
/// Moved to policy/speech/alignment_frontier.hpp; this forwarding header goes in the next release.
#pragma once

#include "speech/alignment_frontier.hpp"
