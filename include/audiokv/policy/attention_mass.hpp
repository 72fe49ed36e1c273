// SPDX-License-Identifier: Apache-2.0
/// @file
/// Moved to policy/speech/attention_mass.hpp; this forwarding header goes in the next release.
#pragma once

#include "speech/attention_mass.hpp"
