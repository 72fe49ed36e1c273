// SPDX-License-Identifier: Apache-2.0
/// @file
/// Umbrella of the CUDA backend (nvcc translation units only): decode attention with
/// probabilities, scoring, the temporal and sequence stages, deterministic selection,
/// contiguous and paged compaction, int8 rows, and the whole eviction step of a decode step
/// (cuda/launch/eviction_step.cuh). See cuda/launch.cuh for the host API contract.
#pragma once

#include "audiokv.hpp"
#include "cuda/check.cuh"
#include "cuda/dispatch.cuh"
#include "cuda/dtype.cuh"
#include "cuda/launch.cuh"
#include "cuda/launch/eviction_step.cuh"
#include "cuda/params.cuh"
