// SPDX-License-Identifier: Apache-2.0
/// @file
/// The CPU reference of the whole eviction step of a decode step (types/eviction_step_config.hpp):
/// the same phases, per-cell functions (core/eviction_step.hpp, core::importance_update,
/// core::reduce_group, core::hole_rank / mover_rank / compaction_target) and summation order as
/// cuda::eviction_step, on host arrays, one row at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/compaction.hpp"
#include "../core/entropy.hpp"
#include "../core/eviction_step.hpp"
#include "../core/gqa.hpp"
#include "../core/hole_filling.hpp"
#include "../core/importance.hpp"
#include "../core/selection.hpp"
#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../policy/stages/median_stage.hpp"
#include "../policy/stages/smoothing_pipeline.hpp"
#include "../policy/stages/stage_context.hpp"
#include "../span.hpp"
#include "../types/eviction_step_config.hpp"
#include "row_compactor.hpp"

namespace audiokv::cpu {

/// The smoothing of the eviction step by default: the median of five cells in time order.
using eviction_step_pipeline = smoothing_pipeline<median_stage<5>>;

/// @brief One eviction step per decode step over rows() = batch * num_kv_heads rows of
/// `capacity` slots (the CPU reference of cuda::eviction_step).
///
/// Memory, per row r (r = sequence * num_kv_heads + kv head): K and V hold row (r, slot s) at
/// byte (r * capacity + s) * row_bytes(); the step keeps each slot's importance and position
/// (the cell's time index, 0, 1, 2, ... in append order) and a logical index order(r)[i] = slot
/// of the i-th oldest live cell. The live slots are always [0, live(r)).
///
/// step(), per row:
///  1. append: the engine wrote cells_per_step new K/V rows at slots [live, live + a); they get
///     the next positions and the importance of the newest older cell (0 in an empty row);
///  2. importance I[s] = importance_update(I[s], reduce_group(probs of the row's query heads, s))
///     for every live slot s;
///  3. at or above the trigger: scores = Pipeline::apply_per_cell over I in time order (empty
///     stage_context), the entropy of the candidates' scores (lanes of
///     core::step_entropy_lanes), k = core::step_evict_count;
///  4. the k candidates first in (score, time) order (core::evicts_before) are evicted;
///  5. compaction (config.compaction): hole_fill moves the kept slots >= the new live count
///     into the holes below it (the r-th such slot into the r-th hole); stable shifts every kept
///     row down to its rank. K, V, importance and position travel with their row.
/// Construction allocates; step() never does. Not thread-safe; distinct objects are independent.
/// A moved-from step holds no rows (see the move constructor).
template <class Pipeline = eviction_step_pipeline>
class eviction_step {
  static_assert(Pipeline::runs_on_device,
                "audiokv::cpu::eviction_step: every stage must be a cell stage "
                "(policy/stages/cell_stage.hpp), the stages the device step runs");

 public:
  /// @brief A step over `config` with every row empty.
  /// @throws audiokv::error from config.validate(). Allocates O(rows() * capacity).
  explicit eviction_step(const eviction_step_config& config, Pipeline pipeline = Pipeline{})
      : config_(validated(config)), pipeline_(pipeline) {
    const std::size_t rows = static_cast<std::size_t>(config_.rows());
    const std::size_t cells = rows * static_cast<std::size_t>(config_.capacity);
    live_.assign(rows, 0);
    next_position_.assign(rows, 0);
    evict_count_.assign(rows, 0);
    num_moves_.assign(rows, 0);
    order_.assign(cells, 0);
    importance_.assign(cells, 0.0f);
    next_importance_.assign(cells, 0.0f);
    position_.assign(cells, 0);
    scores_.assign(cells, 0.0f);
    evicted_.assign(cells, 0);
    src_.assign(cells, 0);
    dst_.assign(cells, 0);
    const auto c = static_cast<std::size_t>(config_.capacity);
    in_order_.assign(c, 0.0f);
    scratch_.assign(c, 0.0f);
    candidates_.assign(c, 0);
    compactor_ = row_compactor(config_.capacity);
    lanes_.assign(static_cast<std::size_t>(core::step_entropy_lanes), core::entropy_accumulator{});
  }

  /// An independent step with the same rows, state and statistics.
  eviction_step(const eviction_step&) = default;
  /// Copy assignment: see the copy constructor.
  eviction_step& operator=(const eviction_step&) = default;
  /// Takes every row. `other` is left a step over no rows: config().batch 0 (rows() 0), zero
  /// statistics, no arrays; step() on it throws audiokv::error naming "this". Assign a step to
  /// it to use it again.
  eviction_step(eviction_step&& other) noexcept(std::is_nothrow_move_constructible_v<Pipeline>)
      : config_(other.config_), pipeline_(std::move(other.pipeline_)) {
    take_rows(other);
  }
  /// Move assignment, with the moved-from state of the move constructor.
  eviction_step& operator=(eviction_step&& other) noexcept(
      std::is_nothrow_move_assignable_v<Pipeline>) {
    if (this != &other) {
      pipeline_ = std::move(other.pipeline_);
      config_ = other.config_;
      take_rows(other);
    }
    return *this;
  }
  ~eviction_step() = default;

  /// @brief One decode step of every row (see the class comment).
  /// @param probs             [prob_rows(), probs_row_stride] attention probabilities, query
  ///                          head g of row r in row r * group + g, slot order; read for the
  ///                          slots [0, live + cells_per_step) of each row, each finite and
  ///                          >= 0 (core::is_valid_attention)
  /// @param probs_row_stride  floats between rows of probs (>= capacity)
  /// @param k, v              [rows() * capacity * row_bytes()] bytes, or nullptr (not moved)
  /// @throws audiokv::error naming "probs" (nullptr), "probs_row_stride" (< capacity) or
  /// "probs[q][slot]" (the first probability, in row then slot order, that is NaN, infinite or
  /// negative, with its value); the state is then unchanged. Never allocates.
  void step(const float* probs, std::int64_t probs_row_stride, void* k, void* v) {
    constexpr const char* where = "cpu::eviction_step::step";
    AUDIOKV_REQUIRE(config_.batch > 0, where, "this", "a moved-from step",
                    "holds no rows (assign a step to it)");
    AUDIOKV_REQUIRE(probs != nullptr, where, "probs", "nullptr", "must point to the probabilities");
    AUDIOKV_REQUIRE(probs_row_stride >= config_.capacity, where, "probs_row_stride",
                    probs_row_stride, "must be >= config.capacity");
    // Phases 1-2 of every row into the second importance buffer, each probability checked in
    // the same pass; the state changes only once every row's probabilities are valid.
    bool valid = true;
    for (std::int32_t r = 0; r < config_.rows(); ++r) {
      valid &= next_importance(r, row_probs(probs, probs_row_stride, r), probs_row_stride);
    }
    if (!valid) report_invalid_probability(where, probs, probs_row_stride);
    importance_.swap(next_importance_);
    for (std::int32_t r = 0; r < config_.rows(); ++r) {
      step_row(r, static_cast<unsigned char*>(k), static_cast<unsigned char*>(v));
    }
    ++stats_.steps;
  }

  /// The validated configuration.
  const eviction_step_config& config() const noexcept { return config_; }
  /// Live cells of row r (occupying slots [0, live(r))).
  std::int32_t live(std::int32_t r) const { return live_[r]; }
  /// [capacity] importance of each slot of row r (slots >= live(r) hold stale values).
  span<const float> importance(std::int32_t r) const { return row_of(importance_, r); }
  /// [capacity] position (time index) of the cell in each slot of row r.
  span<const std::int32_t> positions(std::int32_t r) const { return row_of(position_, r); }
  /// [capacity] slot of the i-th oldest live cell of row r, i < live(r).
  span<const std::int32_t> order(std::int32_t r) const { return row_of(order_, r); }
  /// [capacity] the last smoothed scores of row r in time order (written when it triggered).
  span<const float> scores(std::int32_t r) const { return row_of(scores_, r); }
  /// [capacity] 1 for the time-order cells of row r the last step evicted (before compaction).
  span<const std::uint8_t> evicted(std::int32_t r) const { return row_of(evicted_, r); }
  /// Cells row r evicted in the last step.
  std::int32_t evict_count(std::int32_t r) const { return evict_count_[r]; }
  /// Row copies of row r in the last step (each one K row and one V row); with hole-filling
  /// they are move_src(r)[m] -> move_dst(r)[m] for m below this count.
  std::int32_t num_moves(std::int32_t r) const { return num_moves_[r]; }
  /// [capacity] source slots of the last step's hole-filling copies of row r, ascending.
  span<const std::int32_t> move_src(std::int32_t r) const { return row_of(src_, r); }
  /// [capacity] destination slots (holes) of those copies, ascending.
  span<const std::int32_t> move_dst(std::int32_t r) const { return row_of(dst_, r); }
  /// Counters since construction.
  eviction_step_statistics statistics() const {
    eviction_step_statistics s = stats_;
    for (const std::int32_t n : live_) {
      s.live_cells += n;
      s.max_live = n > s.max_live ? n : s.max_live;
    }
    return s;
  }

 private:
  static const eviction_step_config& validated(const eviction_step_config& config) {
    config.validate("cpu::eviction_step");
    return config;
  }

  template <class T>
  span<const T> row_of(const std::vector<T>& v, std::int32_t r) const {
    return span<const T>(v.data() + static_cast<std::size_t>(r) * config_.capacity,
                         static_cast<std::size_t>(config_.capacity));
  }

  /// Moves the statistics and every array of `other` here; `other` keeps none and no rows.
  void take_rows(eviction_step& other) noexcept {
    stats_ = std::exchange(other.stats_, eviction_step_statistics{});
    take(other, &eviction_step::live_, &eviction_step::next_position_, &eviction_step::evict_count_,
         &eviction_step::num_moves_, &eviction_step::order_, &eviction_step::position_,
         &eviction_step::src_, &eviction_step::dst_, &eviction_step::importance_,
         &eviction_step::scores_, &eviction_step::next_importance_, &eviction_step::evicted_,
         &eviction_step::in_order_, &eviction_step::scratch_, &eviction_step::candidates_,
         &eviction_step::compactor_, &eviction_step::lanes_);
    other.config_.batch = 0;
  }
  template <class... Member>
  void take(eviction_step& other, Member... member) noexcept {
    ((this->*member = std::move(other.*member)), ...);
    ((other.*member).clear(), ...);
  }

  /// The probability rows of step row r: query heads r * group ... r * group + group - 1.
  const float* row_probs(const float* probs, std::int64_t stride, std::int32_t r) const {
    return probs + static_cast<std::int64_t>(r) * config_.group * stride;
  }

  /// Phases 1 and 2 of row r into next_importance_: the appended cells' entry importance (the
  /// newest older cell's, 0 in an empty row), then the EMA over every live slot. Returns false
  /// when a probability it read is not core::is_valid_attention. Writes nothing else.
  bool next_importance(std::int32_t r, const float* probs, std::int64_t stride) {
    const std::int64_t base = static_cast<std::int64_t>(r) * config_.capacity;
    const float* importance = importance_.data() + base;
    float* next = next_importance_.data() + base;
    const std::int32_t live0 = live_[r];
    const std::int32_t live = live0 + config_.cells_per_step;
    const float entry = live0 > 0 ? importance[order_[base + live0 - 1]] : 0.0f;
    const std::int32_t group = config_.group;
    const float alpha = config_.alpha;
    // The GQA reduction row by row (core::group_fold over g = 0 .. G - 1, reduce_group's
    // order), each probability checked as it is read, then the EMA: every loop is contiguous
    // and vectorises.
    int valid = 1;
    for (std::int32_t s = 0; s < live; ++s) {
      valid &= static_cast<int>(core::is_valid_attention(probs[s]));
      next[s] = core::group_fold(0.0f, probs[s], 0, config_.reduce);
    }
    const gqa_reduce reduce = config_.reduce;
    for (std::int32_t g = 1; g < group; ++g) {
      const float* row = probs + g * stride;
      if (reduce == gqa_reduce::max) {
        for (std::int32_t s = 0; s < live; ++s) {
          valid &= static_cast<int>(core::is_valid_attention(row[s]));
          next[s] = core::group_fold(next[s], row[s], 1, gqa_reduce::max);
        }
      } else {
        for (std::int32_t s = 0; s < live; ++s) {
          valid &= static_cast<int>(core::is_valid_attention(row[s]));
          next[s] = core::group_fold(next[s], row[s], 1, gqa_reduce::mean);
        }
      }
    }
    for (std::int32_t s = 0; s < live; ++s) {
      next[s] = core::importance_update(s < live0 ? importance[s] : entry,
                                        core::group_finish(next[s], group, reduce), alpha);
    }
    return valid != 0;
  }

  /// Throws naming the first probability, rows then slots, that next_importance() rejected.
  [[noreturn]] void report_invalid_probability(const char* where, const float* probs,
                                               std::int64_t stride) const {
    for (std::int32_t r = 0; r < config_.rows(); ++r) {
      const std::int32_t live = live_[r] + config_.cells_per_step;
      for (std::int32_t g = 0; g < config_.group; ++g) {
        const std::int64_t q = static_cast<std::int64_t>(r) * config_.group + g;
        const float* row = probs + q * stride;
        for (std::int32_t s = 0; s < live; ++s) {
          AUDIOKV_REQUIRE(
              core::is_valid_attention(row[s]), where,
              ::audiokv::detail::indexed(
                  ::audiokv::detail::indexed("probs", static_cast<long long>(q)).c_str(), s),
              row[s], "must be finite and >= 0");
        }
      }
    }
    ::audiokv::detail::throw_invalid(where, "probs", "a value", "must be finite and >= 0");
  }

  /// Phases 1 (positions and order of the appended cells; their importance is already in
  /// place) and 3-5 of row r.
  void step_row(std::int32_t r, unsigned char* k, unsigned char* v) {
    const std::int32_t cap = config_.capacity;
    const std::int64_t base = static_cast<std::int64_t>(r) * cap;
    float* importance = importance_.data() + base;
    std::int32_t* position = position_.data() + base;
    std::int32_t* order = order_.data() + base;
    float* scores = scores_.data() + base;
    std::uint8_t* evicted = evicted_.data() + base;

    // 1. append (the importance of the new cells was written with phase 2)
    const std::int32_t live0 = live_[r];
    for (std::int32_t t = 0; t < config_.cells_per_step; ++t) {
      position[live0 + t] = next_position_[r] + t;
      order[live0 + t] = live0 + t;
    }
    const std::int32_t live = live0 + config_.cells_per_step;
    next_position_[r] += config_.cells_per_step;
    live_[r] = live;

    // 3. trigger, smoothing, ratio, count
    std::fill(evicted, evicted + cap, std::uint8_t{0});
    evict_count_[r] = 0;
    num_moves_[r] = 0;
    if (!core::step_triggered(live, config_.trigger_cells())) return;
    for (std::int32_t i = 0; i < live; ++i) in_order_[i] = importance[order[i]];
    pipeline_.apply_per_cell(in_order_.data(), scores, scratch_.data(), live, stage_context{});
    const std::int32_t first = core::step_first_candidate(live, config_.sink_cells);
    const std::int32_t n_cand =
        core::step_candidates(live, config_.sink_cells, config_.recent_cells);
    std::fill(lanes_.begin(), lanes_.end(), core::entropy_accumulator{});
    for (std::int32_t c = 0; c < n_cand; ++c) {
      lanes_[c % core::step_entropy_lanes].add(scores[first + c]);
    }
    for (std::int32_t half = core::step_entropy_lanes / 2; half >= 1; half /= 2) {
      for (std::int32_t t = 0; t < half; ++t)
        core::step_entropy_merge_round(lanes_.data(), half, t);
    }
    const float ratio = core::entropy_eviction_ratio(lanes_[0].normalized_entropy(),
                                                     config_.base_rate, config_.lambda);
    const std::int32_t n_evict = core::step_evict_count(live, n_cand, config_.trigger_cells(),
                                                        config_.target_cells(), ratio);
    if (n_evict == 0) return;
    ++stats_.evictions;

    // 4. selection: the n_evict candidates first in (score, time index) order
    for (std::int32_t c = 0; c < n_cand; ++c) candidates_[c] = first + c;
    const auto before = [scores](std::int32_t a, std::int32_t b) {
      return core::evicts_before(scores[a], a, scores[b], b);
    };
    std::nth_element(candidates_.begin(), candidates_.begin() + (n_evict - 1),
                     candidates_.begin() + n_cand, before);
    for (std::int32_t c = 0; c < n_evict; ++c) evicted[candidates_[c]] = 1;
    evict_count_[r] = n_evict;
    stats_.cells_evicted += n_evict;

    // 5. compaction
    const std::int64_t rb = config_.row_bytes();
    const row_compactor::result done = compactor_.compact(
        config_.compaction, live, evicted, importance, position, order, src_.data() + base,
        dst_.data() + base, k != nullptr ? k + base * rb : nullptr,
        v != nullptr ? v + base * rb : nullptr, rb);
    num_moves_[r] = done.moves;
    stats_.rows_moved += done.moves;
    live_[r] = done.kept;
  }

  eviction_step_config config_;
  Pipeline pipeline_;
  eviction_step_statistics stats_{};
  std::vector<std::int32_t> live_, next_position_, evict_count_, num_moves_;
  std::vector<std::int32_t> order_, position_, src_, dst_;
  std::vector<float> importance_, scores_;
  std::vector<float> next_importance_;  // phase 2 writes here; swapped in once all rows passed
  std::vector<std::uint8_t> evicted_;
  // per-row scratch
  std::vector<float> in_order_, scratch_;
  std::vector<std::int32_t> candidates_;
  row_compactor compactor_;  // phase 5 and its scratch
  std::vector<core::entropy_accumulator> lanes_;
};

}  // namespace audiokv::cpu
