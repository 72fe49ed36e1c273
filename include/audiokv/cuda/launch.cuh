// SPDX-License-Identifier: Apache-2.0
/// @file
/// Host launchers of the CUDA backend, one header per feature under cuda/launch/. Common
/// contract of every launcher:
///  - enqueues on the caller's `stream` and returns immediately; never synchronises;
///  - never allocates: scratch comes from the caller's `workspace` (256-byte aligned, at least
///    the matching `*_workspace_bytes(shape)`, which is a pure host computation to call once at
///    setup);
///  - fixed grids computed from the shape alone, so a call can be captured in a CUDA graph and
///    replayed (counts that change between replays are read from device memory: `live_cells`,
///    `k`);
///  - returns cudaSuccess, cudaErrorInvalidValue for an unsupported or inconsistent argument
///    (before enqueuing anything), or the launch error. Not thread-safe per workspace.
/// Any number of translation units of one program may include this header: the launchers are
/// inline and the kernels static (each translation unit compiles and registers its own copy).
/// The linker keeps one copy of each launcher, which launches the kernels of the translation
/// unit it came from, so compile every translation unit that includes this header for the same
/// CUDA architectures.
#pragma once

#include "launch/attention.cuh"
#include "launch/compact.cuh"
#include "launch/hole_fill.cuh"
#include "launch/lse.cuh"
#include "launch/page_granular.cuh"
#include "launch/paged.cuh"
#include "launch/pipeline.cuh"
#include "launch/quantize.cuh"
#include "launch/select.cuh"
#include "launch/sequence.cuh"
#include "launch/shared_rows.cuh"
#include "launch/workspace.cuh"
