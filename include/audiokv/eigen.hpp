// SPDX-License-Identifier: Apache-2.0
/// @file
/// Umbrella header of the Eigen CPU backend (CMake target audiokv::eigen).
#pragma once

#include "audiokv.hpp"
#include "cpu/eigen_attention.hpp"
