// SPDX-License-Identifier: Apache-2.0
/// @file
/// Kernels of the whole eviction step on the device (launcher: cuda/launch/eviction_step.cuh;
/// CPU reference: cpu/eviction_step.hpp), one family per header: the shared parameters
/// (eviction_step_params.cuh), append, importance and scoring (step_score_kernels.cuh),
/// selection and the compaction plan (step_select_kernels.cuh), and the row moves and the
/// finish (step_move_kernels.cuh). Every kernel reads the live and eviction counts from device
/// memory and returns early in a row with nothing to do, so the grids stay fixed.
#pragma once

#include "eviction_step_params.cuh"
#include "step_move_kernels.cuh"
#include "step_score_kernels.cuh"
#include "step_select_kernels.cuh"
