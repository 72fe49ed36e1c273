// SPDX-License-Identifier: Apache-2.0
/// @file
/// Configuration of the whole eviction step of a decode step (cpu::eviction_step, the CPU
/// reference, and cuda::eviction_step, its device form): shapes, trigger, eviction count,
/// protections and compaction mode of a batch of (sequence, KV head) rows.
#pragma once

#include <cmath>
#include <cstdint>

#include "../core/gqa.hpp"
#include "../core/selection_key.hpp"
#include "../error.hpp"

namespace audiokv::types {

/// Element type of the K/V rows the step compacts (the same values as cuda::dtype).
enum class kv_dtype : std::uint8_t {
  f32 = 0,  ///< float, 4 bytes
  f16 = 1,  ///< IEEE half, 2 bytes
  bf16 = 2  ///< bfloat16, 2 bytes
};

/// Bytes of one element of `t`.
inline constexpr std::int32_t kv_dtype_bytes(kv_dtype t) { return t == kv_dtype::f32 ? 4 : 2; }

/// How an eviction step closes the holes it leaves in a row's slots.
enum class step_compaction : std::uint8_t {
  /// The newest kept rows move into the holes below the new end (core/hole_filling.hpp): row
  /// copies <= cells evicted; slot order stops being time order (the step keeps a logical ->
  /// slot index per row).
  hole_fill = 0,
  /// Every kept row shifts down to the number of kept rows before it (core/compaction.hpp):
  /// slot order stays time order, row copies up to the kept cells after the first hole.
  stable = 1
};

/// @brief Configuration of an eviction step over `rows() = batch * num_kv_heads` rows of
/// `capacity` slots each.
///
/// One step, per row: the engine has appended `cells_per_step` new K/V rows; importance
/// I = alpha * A + (1 - alpha) * I (A: the GQA-reduced attention probability, new cells start
/// from the newest older cell's I); when the row holds at least trigger_cells() cells, the
/// importance in time order runs through the smoothing pipeline, the entropy of the candidates'
/// scores gives the ratio r = base_rate + lambda * (1 - H / H_max), and the
/// max(ceil(r * candidates), live - target_cells()) lowest-scoring candidates (ties: older
/// first) are evicted, at most every candidate. Candidates are the live cells except the
/// first `sink_cells` and the last `recent_cells` in time order. Plain data; thread-safe to
/// read.
struct eviction_step_config {
  /// Sequences; or (layer, sequence) pairs when the K/V of several layers lie in one
  /// [layers * batch, num_kv_heads, capacity, head_dim] tensor, so one step serves all layers.
  std::int32_t batch = 1;
  std::int32_t num_kv_heads = 1;   ///< KV heads per sequence
  std::int32_t group = 1;          ///< query heads per KV head (GQA group size)
  std::int32_t capacity = 0;       ///< slots per (sequence, KV head) row
  std::int32_t head_dim = 128;     ///< elements per K or V row
  kv_dtype dtype = kv_dtype::f16;  ///< K/V element type (row bytes = head_dim * its size)
  /// Eviction runs in a row once it holds >= ceil(trigger_fraction * capacity) cells.
  float trigger_fraction = 0.9f;
  /// An eviction leaves at most floor(target_fraction * capacity) cells (< the trigger level).
  float target_fraction = 0.8f;
  /// Importance EMA weight of this step's attention.
  float alpha = 0.3f;
  /// Eviction ratio at maximal entropy (core::entropy_eviction_ratio).
  float base_rate = 0.05f;
  /// Gain of the ratio on 1 - H / H_max (core::entropy_eviction_ratio).
  float lambda = 0.2f;
  /// How a GQA group's query-head probabilities reduce to one score per cell.
  gqa_reduce reduce = gqa_reduce::mean;
  /// Oldest cells of a row that are never evicted (attention sinks).
  std::int32_t sink_cells = 4;
  /// Newest cells of a row that are never evicted (recent window).
  std::int32_t recent_cells = 32;
  /// K/V rows the engine appends to every row before each step (0: the step only observes).
  std::int32_t cells_per_step = 1;
  /// How evictions are compacted.
  step_compaction compaction = step_compaction::hole_fill;

  /// Rows of the step: batch * num_kv_heads.
  std::int32_t rows() const { return batch * num_kv_heads; }
  /// Query-head probability rows the step reads: rows() * group.
  std::int32_t prob_rows() const { return rows() * group; }
  /// ceil(trigger_fraction * capacity), at least 1; a product within 1e-6 * capacity of an
  /// integer counts as that integer (0.7f * 100 is 70, not 71).
  std::int32_t trigger_cells() const {
    const auto t = static_cast<std::int32_t>(
        std::ceil(static_cast<double>(trigger_fraction) * capacity - 1e-6 * capacity));
    return t < 1 ? 1 : t;
  }
  /// floor(target_fraction * capacity), with the tolerance of trigger_cells() (0.9f * 100 is 90).
  std::int32_t target_cells() const {
    return static_cast<std::int32_t>(
        std::floor(static_cast<double>(target_fraction) * capacity + 1e-6 * capacity));
  }
  /// Bytes of one K or V row: head_dim * kv_dtype_bytes(dtype).
  std::int64_t row_bytes() const {
    return static_cast<std::int64_t>(head_dim) * kv_dtype_bytes(dtype);
  }

  /// @brief Checks every field; allocates only to throw.
  /// @throws audiokv::error naming `config.<field>` for the first invalid field: a count < 1
  /// (batch, num_kv_heads, group, capacity, head_dim) or < 0 (sink_cells, recent_cells,
  /// cells_per_step); a fraction or rate outside its range; `config.capacity` when the keys of
  /// rows() x capacity cells do not fit 64 bits or rows() * capacity exceeds 2^31 - 1;
  /// `config.recent_cells` when sink_cells + recent_cells > target_cells() (an eviction could
  /// not get back to the target); `config.cells_per_step` when capacity - trigger_cells() + 1
  /// is smaller (an append could overflow a row that stayed just below the trigger).
  void validate(const char* where = "eviction_step_config") const {
    AUDIOKV_REQUIRE(batch >= 1, where, "config.batch", batch, "must be >= 1");
    AUDIOKV_REQUIRE(num_kv_heads >= 1, where, "config.num_kv_heads", num_kv_heads, "must be >= 1");
    AUDIOKV_REQUIRE(group >= 1, where, "config.group", group, "must be >= 1");
    AUDIOKV_REQUIRE(capacity >= 1, where, "config.capacity", capacity, "must be >= 1");
    AUDIOKV_REQUIRE(head_dim >= 1, where, "config.head_dim", head_dim, "must be >= 1");
    AUDIOKV_REQUIRE(dtype == kv_dtype::f32 || dtype == kv_dtype::f16 || dtype == kv_dtype::bf16,
                    where, "config.dtype", static_cast<int>(dtype), "must be f32, f16 or bf16");
    AUDIOKV_REQUIRE(
        static_cast<std::int64_t>(batch) * num_kv_heads * capacity <= INT32_MAX &&
            static_cast<std::int64_t>(batch) * num_kv_heads * group <= INT32_MAX &&
            core::selection_key_fits(static_cast<std::uint32_t>(batch) * num_kv_heads,
                                     static_cast<std::uint32_t>(capacity)),
        where, "config.capacity", capacity,
        "rows() * capacity must be <= 2^31 - 1 and (row, score, slot) keys must fit 64 bits");
    AUDIOKV_REQUIRE(
        std::isfinite(trigger_fraction) && trigger_fraction > 0.0f && trigger_fraction <= 1.0f,
        where, "config.trigger_fraction", trigger_fraction, "must be in (0, 1]");
    AUDIOKV_REQUIRE(std::isfinite(target_fraction) && target_fraction >= 0.0f &&
                        target_cells() < trigger_cells(),
                    where, "config.target_fraction", target_fraction,
                    "must be >= 0 with floor(target_fraction * capacity) < "
                    "ceil(trigger_fraction * capacity)");
    AUDIOKV_REQUIRE(std::isfinite(alpha) && alpha > 0.0f && alpha <= 1.0f, where, "config.alpha",
                    alpha, "must be in (0, 1]");
    AUDIOKV_REQUIRE(std::isfinite(base_rate) && base_rate >= 0.0f && base_rate <= 1.0f, where,
                    "config.base_rate", base_rate, "must be in [0, 1]");
    AUDIOKV_REQUIRE(std::isfinite(lambda) && lambda >= 0.0f, where, "config.lambda", lambda,
                    "must be >= 0");
    AUDIOKV_REQUIRE(reduce == gqa_reduce::mean || reduce == gqa_reduce::max, where, "config.reduce",
                    static_cast<int>(reduce), "must be mean or max");
    AUDIOKV_REQUIRE(sink_cells >= 0, where, "config.sink_cells", sink_cells, "must be >= 0");
    AUDIOKV_REQUIRE(
        recent_cells >= 0 && static_cast<std::int64_t>(sink_cells) + recent_cells <= target_cells(),
        where, "config.recent_cells", recent_cells,
        "must be >= 0 with sink_cells + recent_cells <= "
        "floor(target_fraction * capacity)");
    AUDIOKV_REQUIRE(cells_per_step >= 0 && cells_per_step <= capacity - trigger_cells() + 1, where,
                    "config.cells_per_step", cells_per_step,
                    "must be in [0, capacity - ceil(trigger_fraction * capacity) + 1]");
    AUDIOKV_REQUIRE(
        compaction == step_compaction::hole_fill || compaction == step_compaction::stable, where,
        "config.compaction", static_cast<int>(compaction), "must be hole_fill or stable");
  }
};

/// @brief Counters of an eviction step since construction (cpu::eviction_step::statistics,
/// cuda::eviction_step::read_statistics). Plain data.
struct eviction_step_statistics {
  std::int64_t steps = 0;          ///< step() / run() calls completed
  std::int64_t evictions = 0;      ///< (row, step) pairs that evicted at least one cell
  std::int64_t cells_evicted = 0;  ///< cells evicted, all rows
  /// Row copies made by compaction, all rows; each copies one K row and one V row.
  std::int64_t rows_moved = 0;
  std::int64_t live_cells = 0;  ///< live cells now, summed over the rows
  std::int32_t max_live = 0;    ///< largest live count of a row now

  /// Field-wise equality.
  bool operator==(const eviction_step_statistics& o) const {
    return steps == o.steps && evictions == o.evictions && cells_evicted == o.cells_evicted &&
           rows_moved == o.rows_moved && live_cells == o.live_cells && max_live == o.max_live;
  }
};

}  // namespace audiokv::types

namespace audiokv {
using types::eviction_step_config;
using types::eviction_step_statistics;
using types::kv_dtype;
using types::kv_dtype_bytes;
using types::step_compaction;
}  // namespace audiokv
