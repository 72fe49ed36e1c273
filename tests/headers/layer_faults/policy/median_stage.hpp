// SPDX-License-Identifier: Apache-2.0
// A forwarding header, as left at the old path of a moved one: correct itself.
#pragma once

#include "stages/median_stage.hpp"
