// SPDX-License-Identifier: Apache-2.0
/// @file
/// Hole-filling compaction for an engine that keeps one cache's K/V rows in one buffer: the
/// cache plans in time order (its own logical index, unchanged), and a slot_map beside it maps
/// each logical cell to the physical slot of its row. A stable plan becomes a hole-filling move
/// list (rule of core/hole_filling.hpp), with row moves <= cells evicted.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../core/compaction.hpp"
#include "../detail/describe.hpp"
#include "../error.hpp"
#include "../span.hpp"
#include "../types/eviction_plan.hpp"
#include "../types/move_map.hpp"

namespace audiokv::pool {

/// @brief Physical row moves of one hole-filling compaction.
///
/// Invariants (checked by every executor before any row moves): `move_to.size() == n_before`;
/// `move_to[p]` is the new slot of the row in physical slot p, or -1 when it is evicted; kept
/// rows occupy [0, n_after) afterwards; `src` and `dst` list the moved rows (src[k] -> dst[k]),
/// both ascending, src[k] >= n_after > dst[k], and dst[k] is an evicted slot. Rows not listed
/// stay in place.
struct hole_fill_plan {
  std::vector<std::int32_t> move_to;  ///< [n_before] physical slot -> new physical slot or -1
  std::vector<std::int32_t> src;      ///< [num_moves] ascending, >= n_after
  std::vector<std::int32_t> dst;      ///< [num_moves] ascending, < n_after, evicted slots
  std::int32_t n_before = 0;          ///< slots in use before the compaction
  std::int32_t n_after = 0;           ///< slots in use after it: [0, n_after)
  /// generation of the eviction_plan it was made from (slot_map::apply checks both).
  std::uint64_t plan_generation = 0;
  /// slot_map::generation() when it was made; apply() rejects a stale one.
  std::uint64_t map_generation = 0;

  /// Reserves every array for `capacity` slots, so later plans never allocate.
  void reserve(std::int32_t capacity) {
    move_to.reserve(capacity);
    src.reserve(capacity);
    dst.reserve(capacity);
  }
  /// Rows copied by this compaction (each in every head of K and of V).
  std::int32_t num_moves() const noexcept { return static_cast<std::int32_t>(src.size()); }
};

namespace detail {

/// Checks a hole_fill_plan over `num_slots` slots in O(num_moves): n_after <= n_before <=
/// num_slots, move_to sized n_before, src[k] >= n_after > dst[k], both strictly ascending,
/// move_to[src[k]] == dst[k] and dst[k] evicted — so every write lands on an evicted row that
/// no move reads. The error names `name` (or `name[index]` when index >= 0) and the field, e.g.
/// "plan.src[3]" or "plans[1].n_before"; names are built only to throw, so a valid plan is
/// checked without allocating.
inline void validate_hole_fill(const char* where, const char* name, std::int32_t index,
                               const hole_fill_plan& plan, std::int32_t num_slots) {
  const auto field = [&](const char* f) {
    return (index < 0 ? std::string(name) : ::audiokv::detail::indexed(name, index)) + f;
  };
  AUDIOKV_REQUIRE(plan.n_before >= 0 && plan.n_before <= num_slots, where, field(".n_before"),
                  plan.n_before,
                  ::audiokv::detail::describe("must be in [0, ", num_slots, "]").c_str());
  AUDIOKV_REQUIRE(plan.n_after >= 0 && plan.n_after <= plan.n_before, where, field(".n_after"),
                  plan.n_after, "must be in [0, n_before]");
  AUDIOKV_REQUIRE(static_cast<std::int32_t>(plan.move_to.size()) == plan.n_before, where,
                  field(".move_to.size()"), plan.move_to.size(), "must equal n_before");
  AUDIOKV_REQUIRE(plan.dst.size() == plan.src.size(), where, field(".dst.size()"), plan.dst.size(),
                  "must equal src.size()");
  for (std::size_t k = 0; k < plan.src.size(); ++k) {
    const std::int32_t s = plan.src[k];
    const std::int32_t d = plan.dst[k];
    AUDIOKV_REQUIRE(s >= plan.n_after && s < plan.n_before && (k == 0 || s > plan.src[k - 1]),
                    where,
                    ::audiokv::detail::indexed(field(".src").c_str(), static_cast<long long>(k)), s,
                    "must be ascending in [n_after, n_before)");
    AUDIOKV_REQUIRE(d >= 0 && d < plan.n_after && (k == 0 || d > plan.dst[k - 1]) &&
                        plan.move_to[d] == core::evicted_slot && plan.move_to[s] == d,
                    where,
                    ::audiokv::detail::indexed(field(".dst").c_str(), static_cast<long long>(k)), d,
                    "must be ascending in [0, n_after), an evicted slot, and move_to[src[k]]");
  }
}

}  // namespace detail

/// @brief The logical -> physical index of one cache's rows under hole-filling compaction.
///
/// Logical cell i is the cache's cell i (time order, what the stages see); slot(i) is where its
/// K/V row (and anything else that travels with the row, e.g. the position) lives. Physical
/// occupancy is always dense: the slots in use are exactly [0, size()), so the engine appends the
/// next row at slot size(). Attention computed over the slots gives probabilities in slot order;
/// gather() reorders them into the cache's order for observe().
///
/// Usage per eviction: `cache.plan(p); map.plan(p, h); cpu::compact(k, h); cpu::compact(v, h);
/// cache.apply(p); map.apply(p, h);`. append, plan (into a reserved plan), apply and gather never
/// allocate; a throwing call changes nothing.
class slot_map {
 public:
  slot_map() = default;
  /// @param capacity cells the map can hold (the cache's capacity()).
  explicit slot_map(std::int32_t capacity) { reserve(capacity); }
  /// An independent map with the same slots.
  slot_map(const slot_map&) = default;
  /// Copy assignment: see the copy constructor.
  slot_map& operator=(const slot_map&) = default;
  /// Takes the slots; `other` is left an empty map of capacity 0 (as default-constructed, its
  /// generation advanced so moves planned before are stale), which reserve() makes usable.
  slot_map(slot_map&& other) noexcept
      : slot_(std::move(other.slot_)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)),
        generation_(other.generation_++) {}
  /// Move assignment, with the moved-from state of the move constructor.
  slot_map& operator=(slot_map&& other) noexcept {
    if (this != &other) {
      slot_ = std::move(other.slot_);
      size_ = std::exchange(other.size_, 0);
      capacity_ = std::exchange(other.capacity_, 0);
      generation_ = other.generation_++;
    }
    return *this;
  }
  ~slot_map() = default;

  /// Grows the capacity (never shrinks); allocates.
  void reserve(std::int32_t capacity) {
    AUDIOKV_REQUIRE(capacity >= 0, "slot_map::reserve", "capacity", capacity, "must be >= 0");
    if (capacity > capacity_) {
      slot_.resize(static_cast<std::size_t>(capacity));
      capacity_ = capacity;
    }
  }

  /// Cells (= slots in use: [0, size())).
  std::int32_t size() const noexcept { return size_; }
  /// Cells the map can hold without reserve().
  std::int32_t capacity() const noexcept { return capacity_; }
  /// Changes on every append and apply.
  std::uint64_t generation() const noexcept { return generation_; }
  /// Physical slot of logical cell i (0 <= i < size(), unchecked).
  std::int32_t slot(std::int32_t i) const noexcept { return slot_[i]; }
  /// [size()] physical slot of every logical cell (a gather index for attention kernels).
  span<const std::int32_t> slots() const noexcept {
    return span<const std::int32_t>(slot_.data(), static_cast<std::size_t>(size_));
  }

  /// The engine appended `count` rows at slots size() .. size() + count - 1; they become the
  /// newest logical cells.
  /// @throws audiokv::error naming "count" when negative or beyond capacity().
  void append(std::int32_t count) {
    AUDIOKV_REQUIRE(count >= 0 && count <= capacity_ - size_, "slot_map::append", "count", count,
                    ::audiokv::detail::describe("must be in [0, capacity() - size()] = [0, ",
                                                capacity_ - size_, "]")
                        .c_str());
    for (std::int32_t i = 0; i < count; ++i) slot_[size_ + i] = size_ + i;
    size_ += count;
    ++generation_;
  }

  /// @brief Turns the cache's (stable, logical) plan into the hole-filling moves of the rows.
  /// @param plan  a plan made for the cache this map mirrors (move_to[i] is the new logical
  ///              index of cell i, -1 when evicted; n_kv_before == size()).
  /// @param out   receives the moves; reserved for capacity() it does not allocate.
  /// @throws audiokv::error naming "plan.n_kv_before", "plan.move_to.size()" or
  ///         "plan.move_to[i]"; `out` is then unchanged.
  void plan(const eviction_plan& plan, hole_fill_plan& out) const {
    constexpr const char* where = "slot_map::plan";
    validate_logical(where, plan);
    const std::int32_t n = size_;
    out.move_to.resize(static_cast<std::size_t>(n));
    out.src.clear();
    out.dst.clear();
    // Physical keep mask in move_to: -1 evicted, otherwise provisionally "stays".
    for (std::int32_t p = 0; p < n; ++p) out.move_to[p] = core::evicted_slot;
    for (std::int32_t i = 0; i < n; ++i)
      if (plan.move_to[i] != core::evicted_slot) out.move_to[slot_[i]] = slot_[i];
    const std::int32_t n_after = plan.n_kv_after;
    // The r-th hole below n_after receives the r-th kept slot at or beyond n_after.
    std::int32_t hole = 0;
    for (std::int32_t p = n_after; p < n; ++p) {
      if (out.move_to[p] == core::evicted_slot) continue;
      while (out.move_to[hole] != core::evicted_slot) ++hole;
      out.move_to[p] = hole;
      out.src.push_back(p);
      out.dst.push_back(hole);
      ++hole;
    }
    out.n_before = n;
    out.n_after = n_after;
    out.plan_generation = plan.generation;
    out.map_generation = generation_;
  }

  /// @brief Commits a compaction: logical cell i becomes plan.move_to[i] and its row sits at
  /// moves.move_to[slot(i)]. Call after the rows moved (and with the cache's apply()).
  /// @throws audiokv::error naming "moves.map_generation", "moves.plan_generation" or the
  ///         plan's fields when `moves` was not made from `plan` by this map in this state.
  void apply(const eviction_plan& plan, const hole_fill_plan& moves) {
    constexpr const char* where = "slot_map::apply";
    validate_logical(where, plan);
    AUDIOKV_REQUIRE(moves.map_generation == generation_, where, "moves.map_generation",
                    moves.map_generation,
                    ::audiokv::detail::describe("must equal the map's generation ", generation_,
                                                " (the moves are stale)")
                        .c_str());
    AUDIOKV_REQUIRE(
        moves.plan_generation == plan.generation && moves.n_before == size_ &&
            moves.n_after == plan.n_kv_after &&
            static_cast<std::int32_t>(moves.move_to.size()) == size_,
        where, "moves.plan_generation", moves.plan_generation,
        ::audiokv::detail::describe("must come from this plan (generation ", plan.generation, ", ",
                                    size_, " -> ", plan.n_kv_after, " cells)")
            .c_str());
    // move_to[i] <= i, so a forward pass never overwrites an entry it still has to read.
    for (std::int32_t i = 0; i < size_; ++i) {
      const std::int32_t to = plan.move_to[i];
      if (to != core::evicted_slot) slot_[to] = moves.move_to[slot_[i]];
    }
    size_ = plan.n_kv_after;
    ++generation_;
  }

  /// @brief logical[i] = physical[slot(i)] for i < size(): per-slot values (attention
  /// probabilities of the rows) in the cache's order.
  /// @throws audiokv::error naming "physical.size()" or "logical.size()" when shorter than
  ///         size().
  void gather(span<const float> physical, span<float> logical) const {
    constexpr const char* where = "slot_map::gather";
    AUDIOKV_REQUIRE(physical.size() >= static_cast<std::size_t>(size_), where, "physical.size()",
                    physical.size(),
                    ::audiokv::detail::describe("must be >= size() = ", size_).c_str());
    AUDIOKV_REQUIRE(logical.size() >= static_cast<std::size_t>(size_), where, "logical.size()",
                    logical.size(),
                    ::audiokv::detail::describe("must be >= size() = ", size_).c_str());
    for (std::int32_t i = 0; i < size_; ++i) logical[i] = physical[slot_[i]];
  }

 private:
  /// A stable logical plan over exactly size() cells.
  void validate_logical(const char* where, const eviction_plan& plan) const {
    AUDIOKV_REQUIRE(plan.n_kv_before == size_, where, "plan.n_kv_before", plan.n_kv_before,
                    ::audiokv::detail::describe("must equal the map's size() = ", size_).c_str());
    AUDIOKV_REQUIRE(static_cast<std::int32_t>(plan.move_to.size()) == size_, where,
                    "plan.move_to.size()", plan.move_to.size(),
                    ::audiokv::detail::describe("must equal the map's size() = ", size_).c_str());
    const std::int32_t kept =
        types::detail::require_stable_move_map(where, "plan.move_to", plan.move_to.data(), size_);
    AUDIOKV_REQUIRE(
        plan.n_kv_after == kept, where, "plan.n_kv_after", plan.n_kv_after,
        ::audiokv::detail::describe("must equal the kept cells of plan.move_to (", kept, ")")
            .c_str());
  }

  std::vector<std::int32_t> slot_;  ///< [capacity] physical slot of logical cell i
  std::int32_t size_ = 0;
  std::int32_t capacity_ = 0;
  std::uint64_t generation_ = 0;
};

}  // namespace audiokv::pool

namespace audiokv {
using pool::hole_fill_plan;
using pool::slot_map;
}  // namespace audiokv
