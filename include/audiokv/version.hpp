// SPDX-License-Identifier: Apache-2.0
/// @file
/// Library version, kept equal to the CMake project version.
#pragma once

/// Major version: incompatible API changes.
#define AUDIOKV_VERSION_MAJOR 0
/// Minor version: compatible additions.
#define AUDIOKV_VERSION_MINOR 1
/// Patch version: fixes.
#define AUDIOKV_VERSION_PATCH 0

namespace audiokv {
/// @brief The version as major * 10000 + minor * 100 + patch.
inline constexpr int version_number =
    AUDIOKV_VERSION_MAJOR * 10000 + AUDIOKV_VERSION_MINOR * 100 + AUDIOKV_VERSION_PATCH;
}  // namespace audiokv
