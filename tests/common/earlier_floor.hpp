// SPDX-License-Identifier: Apache-2.0
/// @file
/// The coverage floor the defaults had before the segment floor, for the tests that pin its
/// arithmetic or its recorded digests whatever the defaults are.
#pragma once

#include <audiokv/policy/speech/speech_rules.hpp>

namespace audiokv::test {

/// The segment_ms floor (segment_cells 0) with a constant past density and no age decay.
inline void use_segment_ms_floor(speech_rules_config& config, float past_density = 0.25f) {
  config.coverage.segment_cells = 0;
  config.frontier.past_density = past_density;
  config.frontier.past_decay_floor = 0.0f;
}

}  // namespace audiokv::test
