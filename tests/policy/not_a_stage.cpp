// SPDX-License-Identifier: Apache-2.0
// Must fail to compile: `not_a_stage` has no apply(). Checked by policy.not_a_stage_is_rejected.
#include <audiokv/policy/stages/smoothing_pipeline.hpp>

struct not_a_stage {
  float value = 0.0f;
};

int main() {
  audiokv::smoothing_pipeline<audiokv::median_stage<5>, not_a_stage> pipeline;
  (void)pipeline;
  return 0;
}
