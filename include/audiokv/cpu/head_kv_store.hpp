// SPDX-License-Identifier: Apache-2.0
/// @file
/// Shared rows and int8 rows on the CPU: the K/V rows of one (layer, KV head) behind a
/// shared_row_table, with shared rows for runs of repeated frames and an int8 arena for buffer-pool
/// rows, and the decode-step attention over it. The reference store for engines that keep K/V on
/// the host and the oracle for device stores; it uses the same core/ functions as the CUDA kernels
/// (core::quantize_int8, core::multiplicity_bias, core::shared_cell_probability).
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "../core/attention.hpp"
#include "../core/row_copy.hpp"
#include "../core/shared_rows.hpp"
#include "../error.hpp"
#include "../pool/shared_row_table.hpp"
#include "../types/eviction_plan.hpp"
#include "quantize.hpp"

namespace audiokv::cpu {

/// @brief Configuration of one head_kv_store; every feature is off by default.
struct head_kv_store_config {
  std::int32_t cell_capacity = 0;  ///< logical cells (the policy's capacity)
  /// Elements per K (and V) row.
  std::int32_t head_dim = 0;
  /// Shared rows: a new frame shares the newest row when its K and V both match that row's first
  /// frame within share_tolerance (core::rows_match).
  bool share_rows = false;
  /// Shared rows: relative max-abs tolerance; 0 shares bitwise-equal rows only.
  float share_tolerance = 0.0f;
  /// Int8 buffer rows: rows whose cells are all in the buffer pool are stored as int8 with a
  /// per-row scale.
  bool int8_buffer = false;
  /// With int8_buffer: the most full-precision rows the policy can need, i.e. its base and
  /// emergency pools' cells (the saving comes from this bound); the float arena holds
  /// min(full_rows, cell_capacity) rows. 0, and always without int8_buffer: cell_capacity.
  std::int32_t full_rows = 0;

  /// Rows of the full-precision arena: full_rows with int8_buffer, else cell_capacity.
  std::int32_t full_arena_rows() const {
    return int8_buffer && full_rows > 0 && full_rows < cell_capacity ? full_rows : cell_capacity;
  }
  /// Rows of the int8 arena: cell_capacity with int8_buffer, else 0.
  std::int32_t int8_arena_rows() const { return int8_buffer ? cell_capacity : 0; }

  /// Throws audiokv::error naming the first invalid field.
  void validate() const {
    constexpr const char* where = "head_kv_store_config";
    AUDIOKV_REQUIRE(cell_capacity >= 1, where, "config.cell_capacity", cell_capacity,
                    "must be >= 1");
    AUDIOKV_REQUIRE(head_dim >= 1, where, "config.head_dim", head_dim, "must be >= 1");
    AUDIOKV_REQUIRE(share_tolerance >= 0.0f && share_tolerance <= 1.0f, where,
                    "config.share_tolerance", share_tolerance, "must be in [0, 1]");
    AUDIOKV_REQUIRE(full_rows >= 0, where, "config.full_rows", full_rows, "must be >= 0");
    AUDIOKV_REQUIRE(int8_buffer || full_rows == 0, where, "config.full_rows", full_rows,
                    "bounds the float arena only with int8_buffer (every row is full precision "
                    "otherwise); leave it 0");
  }
};

/// @brief K and V rows of one (layer, KV head), logical cells in the policy's slot order.
///
/// Per decode step: append() the new frames, attend() (which also returns each cell's
/// probability for eviction_policy::observe), and after the policy applied a plan, apply() the
/// same plan with the policy's tiers. Attention weights a row standing for m cells by m (logit
/// + ln m), so with exact sharing and no int8 rows it equals attention over the dense cache.
/// Never allocates after construction. Not thread-safe per object.
class head_kv_store {
 public:
  /// Allocates both arenas and the slot table for the configured capacity.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit head_kv_store(const head_kv_store_config& config)
      : config_((config.validate(), config)),
        table_(config.cell_capacity, config.full_arena_rows(), config.int8_arena_rows()) {
    size_arrays(config_);
  }
  /// An independent store with the same rows.
  head_kv_store(const head_kv_store&) = default;
  /// Copy assignment: see the copy constructor.
  head_kv_store& operator=(const head_kv_store&) = default;
  /// Takes every row. `other` is left an empty store of capacity 0 (config().cell_capacity 0,
  /// no rows, its other settings kept): attend() returns zeros, append() is rejected ("the
  /// table has no cell slots"), and reserve() makes it usable again.
  head_kv_store(head_kv_store&& other) noexcept
      : config_(other.config_),
        table_(std::move(other.table_)),
        transition_(std::move(other.transition_)),
        k_full_(std::move(other.k_full_)),
        v_full_(std::move(other.v_full_)),
        k_int8_(std::move(other.k_int8_)),
        v_int8_(std::move(other.v_int8_)),
        k_scale_(std::move(other.k_scale_)),
        v_scale_(std::move(other.v_scale_)),
        run_k_(std::move(other.run_k_)),
        run_v_(std::move(other.run_v_)),
        run_open_(std::exchange(other.run_open_, false)),
        row_weight_(std::move(other.row_weight_)) {
    other.config_.cell_capacity = 0;
  }
  /// Move assignment, with the moved-from state of the move constructor.
  head_kv_store& operator=(head_kv_store&& other) noexcept {
    if (this != &other) {
      config_ = other.config_;
      table_ = std::move(other.table_);
      transition_ = std::move(other.transition_);
      k_full_ = std::move(other.k_full_);
      v_full_ = std::move(other.v_full_);
      k_int8_ = std::move(other.k_int8_);
      v_int8_ = std::move(other.v_int8_);
      k_scale_ = std::move(other.k_scale_);
      v_scale_ = std::move(other.v_scale_);
      run_k_ = std::move(other.run_k_);
      run_v_ = std::move(other.run_v_);
      run_open_ = std::exchange(other.run_open_, false);
      row_weight_ = std::move(other.row_weight_);
      other.config_.cell_capacity = 0;
    }
    return *this;
  }
  ~head_kv_store() = default;

  /// Prefetch: grows the store to `cell_capacity` cells and, with the int8 arena, raises the bound
  /// on full-precision rows to `full_rows` (0 keeps it), preserving every row byte for byte.
  /// Allocates: call it where tiered_cache::prefetch() reserved, outside the decode step.
  /// Smaller requests leave a capacity as it is.
  /// @throws audiokv::error on a negative argument (nothing changes).
  void reserve(std::int32_t cell_capacity, std::int32_t full_rows = 0) {
    constexpr const char* where = "head_kv_store::reserve";
    AUDIOKV_REQUIRE(cell_capacity >= 0, where, "cell_capacity", cell_capacity, "must be >= 0");
    AUDIOKV_REQUIRE(full_rows >= 0, where, "full_rows", full_rows, "must be >= 0");
    head_kv_store_config next = config_;
    next.cell_capacity =
        cell_capacity > config_.cell_capacity ? cell_capacity : config_.cell_capacity;
    if (config_.int8_buffer && config_.full_rows > 0 && full_rows > config_.full_rows) {
      next.full_rows = full_rows;
    }
    if (next.cell_capacity == 0) return;  // a moved-from store asked for no slots
    next.validate();
    size_arrays(next);
    table_.reserve(next.cell_capacity, next.full_arena_rows(), next.int8_arena_rows());
    config_ = next;
  }

  /// The configuration (capacity after reserve()).
  const head_kv_store_config& config() const noexcept { return config_; }
  /// The slot table mapping cells to rows.
  const shared_row_table& table() const noexcept { return table_; }
  /// Cells stored.
  std::int32_t num_cells() const noexcept { return table_.num_cells(); }
  /// Rows in use in the arena of precision `p`.
  std::int32_t num_rows(row_precision p) const noexcept { return table_.num_rows(p); }

  /// Bytes of the K and V rows held now (int8 rows with their two scales).
  std::int64_t kv_bytes() const noexcept {
    const std::int64_t d = config_.head_dim;
    return 2 * (num_rows(row_precision::full) * d * static_cast<std::int64_t>(sizeof(float)) +
                num_rows(row_precision::int8) * (d + static_cast<std::int64_t>(sizeof(float))));
  }
  /// Bytes of the slot table an engine needs on top of the rows: a 4-byte row reference per
  /// cell and a 4-byte multiplicity per row.
  std::int64_t table_bytes() const noexcept {
    return 4 * (static_cast<std::int64_t>(num_cells()) + num_rows(row_precision::full) +
                num_rows(row_precision::int8));
  }
  /// Bytes the same cells take as dense full-precision K and V.
  std::int64_t dense_kv_bytes() const noexcept {
    return 2 * static_cast<std::int64_t>(num_cells()) * config_.head_dim * sizeof(float);
  }

  /// @brief Appends one cell with K row `k` and V row `v` ([head_dim] each).
  /// @param tier  the pool the policy puts the cell in (buffer, or emergency for flagged frames)
  /// @return true when the cell shares the newest row.
  bool append(const float* k, const float* v, pool_tier tier = pool_tier::buffer) {
    constexpr const char* where = "head_kv_store::append";
    validate_row(where, "k", k);
    validate_row(where, "v", v);
    const row_precision p = config_.int8_buffer && tier == pool_tier::buffer ? row_precision::int8
                                                                             : row_precision::full;
    if (shares_newest_row(k, v, p)) {
      table_.append_shared();
      return true;
    }
    const row_ref ref = table_.append_row(p);
    store_row(ref, k, v);
    std::memcpy(run_k_.data(), k, sizeof(float) * config_.head_dim);
    std::memcpy(run_v_.data(), v, sizeof(float) * config_.head_dim);
    run_open_ = config_.share_rows;
    return false;
  }

  /// @brief One decode step of attention for query `q` ([head_dim], unscaled):
  /// out = sum_r p_r v_r with p_r = softmax_r(q . k_r / sqrt(head_dim) + ln m_r).
  /// @param out         [head_dim] output
  /// @param cell_probs  [num_cells()] each cell's probability p_r / m_r, or null
  void attend(const float* q, float* out, float* cell_probs) const {
    constexpr const char* where = "head_kv_store::attend";
    AUDIOKV_REQUIRE(q != nullptr, where, "q", "nullptr", "must point to head_dim floats");
    AUDIOKV_REQUIRE(out != nullptr, where, "out", "nullptr", "must point to head_dim floats");
    const std::int32_t d = config_.head_dim, full = num_rows(row_precision::full);
    const std::int32_t rows = full + num_rows(row_precision::int8);
    const float scale = core::attention_scale(d);
    core::softmax_state state;
    for (std::int32_t r = 0; r < rows; ++r) {
      row_weight_[r] = logit(q, r, full) * scale + bias(r, full);
      state.add(row_weight_[r]);
    }
    for (std::int32_t i = 0; i < d; ++i) out[i] = 0.0f;
    for (std::int32_t r = 0; r < rows; ++r) {
      row_weight_[r] = state.probability(row_weight_[r]);
      add_value(r, full, row_weight_[r], out);
    }
    if (cell_probs == nullptr) return;
    const row_ref* refs = table_.cell_rows();
    for (std::int32_t c = 0; c < num_cells(); ++c) {
      const std::int32_t r =
          refs[c].precision == row_precision::full ? refs[c].row : full + refs[c].row;
      cell_probs[c] = core::shared_cell_probability(
          row_weight_[r], table_.multiplicity(refs[c].precision)[refs[c].row]);
    }
  }

  /// @brief Applies a cell plan the policy applied: drops evicted cells, frees rows no kept cell
  /// references, and moves rows between arenas by the cells' new pools.
  /// @param tiers_after [plan.n_kv_after] the policy's tiers after its apply(), or null to keep
  ///                    every row's precision.
  void apply(const eviction_plan& plan, const pool_tier* tiers_after) {
    AUDIOKV_REQUIRE(static_cast<std::int32_t>(plan.move_to.size()) == plan.n_kv_before,
                    "head_kv_store::apply", "plan.move_to.size()", plan.move_to.size(),
                    "must equal plan.n_kv_before");
    apply(plan.move_to.data(), plan.n_kv_before, tiers_after);
  }

  /// Same, from a bare move map ([n_kv_before], stable, -1 = evicted).
  void apply(const std::int32_t* move_to, std::int32_t n_kv_before, const pool_tier* tiers_after) {
    table_.plan(move_to, n_kv_before, tiers_after, transition_);
    const row_transition& t = transition_;
    const std::int32_t d = config_.head_dim;
    const auto demoted = static_cast<std::int32_t>(t.demote_rows.size());
    for (std::int32_t k = 0; k < demoted; ++k) {
      const std::int64_t from = static_cast<std::int64_t>(t.demote_rows[k]) * d;
      const std::int32_t to = t.int8_before + k;
      quantize_rows(&k_full_[from], d, 1, d, &k_int8_[std::int64_t{to} * d], &k_scale_[to]);
      quantize_rows(&v_full_[from], d, 1, d, &v_int8_[std::int64_t{to} * d], &v_scale_[to]);
    }
    compact_rows(k_full_.data(), v_full_.data(), t.full_move, nullptr, nullptr);
    const auto promoted = static_cast<std::int32_t>(t.promote_rows.size());
    for (std::int32_t k = 0; k < promoted; ++k) {
      const std::int32_t from = t.promote_rows[k];
      const std::int64_t to = static_cast<std::int64_t>(t.full_kept + k) * d;
      dequantize_rows(&k_int8_[std::int64_t{from} * d], &k_scale_[from], 1, d, &k_full_[to], d);
      dequantize_rows(&v_int8_[std::int64_t{from} * d], &v_scale_[from], 1, d, &v_full_[to], d);
    }
    compact_rows(k_int8_.data(), v_int8_.data(), t.int8_move, k_scale_.data(), v_scale_.data());
    table_.apply(move_to, n_kv_before, t);
    run_open_ = run_open_ && n_kv_before > 0 && move_to[n_kv_before - 1] != core::evicted_slot;
  }

  /// Copies cell c's K and V as attention sees them (int8 rows dequantised) into [head_dim].
  void read_cell(std::int32_t c, float* k, float* v) const {
    AUDIOKV_REQUIRE(c >= 0 && c < num_cells(), "head_kv_store::read_cell", "c", c,
                    "must be in [0, num_cells())");
    const row_ref ref = table_.cell_rows()[c];
    const std::int32_t d = config_.head_dim;
    const std::int64_t at = static_cast<std::int64_t>(ref.row) * d;
    if (ref.precision == row_precision::full) {
      std::memcpy(k, &k_full_[at], sizeof(float) * d);
      std::memcpy(v, &v_full_[at], sizeof(float) * d);
      return;
    }
    dequantize_rows(&k_int8_[at], &k_scale_[ref.row], 1, d, k, d);
    dequantize_rows(&v_int8_[at], &v_scale_[ref.row], 1, d, v, d);
  }

 private:
  /// Sizes the row arenas, their scales and the scratch for `c` (growing never loses rows).
  void size_arrays(const head_kv_store_config& c) {
    const std::int64_t d = c.head_dim;
    const std::int64_t full = c.full_arena_rows(), int8 = c.int8_arena_rows();
    k_full_.resize(full * d);
    v_full_.resize(full * d);
    k_int8_.resize(int8 * d);
    v_int8_.resize(int8 * d);
    k_scale_.resize(int8);
    v_scale_.resize(int8);
    row_weight_.resize(full + int8);
    run_k_.resize(c.head_dim);
    run_v_.resize(c.head_dim);
    transition_.reserve(static_cast<std::int32_t>(full), static_cast<std::int32_t>(int8));
  }

  void validate_row(const char* where, const char* name, const float* row) const {
    AUDIOKV_REQUIRE(row != nullptr, where, name, "nullptr", "must point to head_dim floats");
    for (std::int32_t i = 0; i < config_.head_dim; ++i) {
      AUDIOKV_REQUIRE(core::is_finite(row[i]), where, ::audiokv::detail::indexed(name, i), row[i],
                      "must be finite");
    }
  }

  /// Shared rows: the newest cell's row can stand for this frame too.
  bool shares_newest_row(const float* k, const float* v, row_precision p) const {
    if (!run_open_ || num_cells() == 0) return false;
    const row_ref newest = table_.cell_rows()[num_cells() - 1];
    // A cell outside the buffer pool needs a full-precision row.
    if (p == row_precision::full && newest.precision == row_precision::int8) return false;
    const std::int32_t d = config_.head_dim;
    return core::rows_match(run_k_.data(), k, d, config_.share_tolerance) &&
           core::rows_match(run_v_.data(), v, d, config_.share_tolerance);
  }

  void store_row(row_ref ref, const float* k, const float* v) {
    const std::int32_t d = config_.head_dim;
    const std::int64_t at = static_cast<std::int64_t>(ref.row) * d;
    if (ref.precision == row_precision::full) {
      std::memcpy(&k_full_[at], k, sizeof(float) * d);
      std::memcpy(&v_full_[at], v, sizeof(float) * d);
      return;
    }
    quantize_rows(k, d, 1, d, &k_int8_[at], &k_scale_[ref.row]);
    quantize_rows(v, d, 1, d, &v_int8_[at], &v_scale_[ref.row]);
  }

  /// q . k_r over the full rows [0, full) then the int8 rows, dequantised element by element.
  float logit(const float* q, std::int32_t r, std::int32_t full) const {
    const std::int32_t d = config_.head_dim;
    float dot = 0.0f;
    if (r < full) {
      const float* k = &k_full_[static_cast<std::int64_t>(r) * d];
      for (std::int32_t i = 0; i < d; ++i) dot += q[i] * k[i];
      return dot;
    }
    const std::int32_t row = r - full;
    const std::int8_t* k = &k_int8_[static_cast<std::int64_t>(row) * d];
    for (std::int32_t i = 0; i < d; ++i) dot += q[i] * core::dequantize_int8(k[i], k_scale_[row]);
    return dot;
  }

  float bias(std::int32_t r, std::int32_t full) const {
    const std::int32_t m = r < full ? table_.multiplicity(row_precision::full)[r]
                                    : table_.multiplicity(row_precision::int8)[r - full];
    return core::multiplicity_bias(m);
  }

  void add_value(std::int32_t r, std::int32_t full, float p, float* out) const {
    const std::int32_t d = config_.head_dim;
    if (r < full) {
      const float* v = &v_full_[static_cast<std::int64_t>(r) * d];
      for (std::int32_t i = 0; i < d; ++i) out[i] += p * v[i];
      return;
    }
    const std::int32_t row = r - full;
    const std::int8_t* v = &v_int8_[static_cast<std::int64_t>(row) * d];
    for (std::int32_t i = 0; i < d; ++i) out[i] += p * core::dequantize_int8(v[i], v_scale_[row]);
  }

  /// Stable in-place compaction of K and V rows (and their scales) by `move`.
  template <class T>
  void compact_rows(T* k, T* v, const std::vector<std::int32_t>& move, float* k_scale,
                    float* v_scale) {
    const std::int64_t d = config_.head_dim;
    for (std::size_t r = 0; r < move.size(); ++r) {
      const std::int32_t to = move[r];
      if (to == core::evicted_slot || to == static_cast<std::int32_t>(r)) continue;
      const auto bytes = static_cast<std::int64_t>(sizeof(T)) * d;  // the row copy, to < r
      core::copy_row(k + to * d, k + static_cast<std::int64_t>(r) * d, bytes);
      core::copy_row(v + to * d, v + static_cast<std::int64_t>(r) * d, bytes);
      if (k_scale != nullptr) {
        k_scale[to] = k_scale[r];
        v_scale[to] = v_scale[r];
      }
    }
  }

  head_kv_store_config config_;
  shared_row_table table_;
  row_transition transition_;
  std::vector<float> k_full_, v_full_;        // [full rows, head_dim]
  std::vector<std::int8_t> k_int8_, v_int8_;  // [int8 rows, head_dim]
  std::vector<float> k_scale_, v_scale_;      // [int8 rows]
  std::vector<float> run_k_, run_v_;          // [head_dim] first frame of the newest row
  bool run_open_ = false;                     // the newest row may take more frames
  mutable std::vector<float> row_weight_;     // [rows] logits, then probabilities
};

}  // namespace audiokv::cpu
