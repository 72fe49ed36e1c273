// SPDX-License-Identifier: Apache-2.0
/// @file
/// Every float tolerance of the GPU-vs-CPU tests, in one place. K/V in fp16/bf16 are rounded on
/// the host first, so the CPU reference sees the same values; what remains is summation order
/// (split-K merge, warp-shuffle dot products) and FMA contraction.
#pragma once

namespace audiokv::test::tolerance {

inline constexpr float attention_out_abs = 2e-5f;  // |out_gpu - out_cpu|, |v| <= 1
inline constexpr float probability_rel = 2e-5f;    // relative, plus probability_abs
inline constexpr float probability_abs = 1e-7f;
inline constexpr float stage_rel = 1e-5f;  // importance EMA, trend (FMA vs mul+add)
// Selection, masks, move_to, gathered bytes, paged tables and int8 codes: exact.

}  // namespace audiokv::test::tolerance
