// SPDX-License-Identifier: Apache-2.0
/// @file
/// Moved to policy/speech/speech_rules.hpp; this forwarding header goes in the next release.
#pragma once

#include "speech/speech_rules.hpp"
