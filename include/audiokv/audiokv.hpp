// SPDX-License-Identifier: Apache-2.0
/// @file
/// Umbrella header of the host API: compiles with any C++17 compiler, no CUDA toolkit, no Eigen.
/// The Eigen CPU backend is <audiokv/eigen.hpp>; the CUDA kernels are <audiokv/cuda.cuh>.
#pragma once

#include "config.hpp"
#include "core/compaction.hpp"
#include "core/entropy.hpp"
#include "core/gqa.hpp"
#include "core/importance.hpp"
#include "core/kv_layout.hpp"
#include "core/kv_view.hpp"
#include "core/median.hpp"
#include "core/online_softmax.hpp"
#include "core/prefetch.hpp"
#include "core/quantize.hpp"
#include "core/selection.hpp"
#include "core/trend.hpp"
#include "cpu/compact.hpp"
#include "error.hpp"
#include "policy/audiokv/capacity_forecast.hpp"
#include "policy/audiokv/tiered_cache.hpp"
#include "policy/audiokv_config.hpp"
#include "policy/eviction_policy.hpp"
#include "policy/stages/smoothing_pipeline.hpp"
#include "policy/stages/spectral_stage.hpp"
#include "pool/sequence_batch.hpp"
#include "registry.hpp"
#include "types/eviction_plan.hpp"
#include "types/frame.hpp"
#include "types/pool_split.hpp"
#include "types/prefetch_config.hpp"
#include "version.hpp"
