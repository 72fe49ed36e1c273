// SPDX-License-Identifier: Apache-2.0
/// @file
/// observe() and plan() of several tiered_caches at once (the KV heads of one layer), up to
/// core::trend_lanes caches side by side in one pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "../../core/importance.hpp"
#include "../../core/trend.hpp"
#include "../../detail/describe.hpp"
#include "../../error.hpp"
#include "../../span.hpp"
#include "../../types/eviction_plan.hpp"
#include "../detail/cell_store.hpp"
#include "importance_lanes.hpp"
#include "importance_tracker.hpp"
#include "planner.hpp"

namespace audiokv::policy::detail {

/// @brief The batched steps of a tiered_cache (`Cache`, which befriends it): each runs up to
/// core::trend_lanes caches together and leaves every cache bit for bit as the single-cache
/// call would. Allocates nothing (with each plan reserved for its cache's capacity()).
template <class Cache>
struct head_batch {
  /// tiered_cache::observe_heads(): checks every argument first (see there), then observes.
  static void observe(span<Cache* const> caches, span<const span<const float>> attention) {
    constexpr const char* where = "tiered_cache::observe_heads";
    AUDIOKV_REQUIRE(
        attention.size() == caches.size(), where, "attention.size()", attention.size(),
        ::audiokv::detail::describe("must equal caches.size() (", caches.size(), ")").c_str());
    for (std::size_t i = 0; i < caches.size(); ++i) {
      const auto name = [i](const char* base) {
        return ::audiokv::detail::indexed(base, static_cast<long long>(i));
      };
      AUDIOKV_REQUIRE(caches[i] != nullptr, where, name("caches"), "nullptr",
                      "must point to a cache");
      for (std::size_t j = 0; j < i; ++j) {
        AUDIOKV_REQUIRE(caches[j] != caches[i], where, name("caches"), "a repeated cache",
                        ::audiokv::detail::describe("must differ from caches[", j, "]").c_str());
      }
    }
    for (std::size_t i = 0; i < caches.size(); ++i) {
      const float* row = attention[i].data();
      const auto size = attention[i].size();
      const std::int32_t cells = caches[i]->store_.size();
      if (size == static_cast<std::size_t>(cells) && (cells == 0 || row != nullptr) &&
          all_finite_non_negative(row, cells)) {
        continue;
      }
      // The branch-free check above passes every valid row; this names the bad argument.
      const auto name = ::audiokv::detail::indexed("attention", static_cast<long long>(i));
      AUDIOKV_REQUIRE(
          size == static_cast<std::size_t>(cells), where, name + ".size()", size,
          ::audiokv::detail::describe("must equal caches[", i, "]->num_cells() (", cells, ")")
              .c_str());
      AUDIOKV_REQUIRE(cells == 0 || row != nullptr, where, name, "nullptr",
                      "must point to the scores");
      for (std::int32_t j = 0; j < cells; ++j) {
        AUDIOKV_REQUIRE(core::is_valid_attention(row[j]), where,
                        ::audiokv::detail::indexed(name.c_str(), j), row[j],
                        "must be finite and >= 0");
      }
    }
    constexpr std::int32_t group = core::trend_lanes;  // caches per pass
    importance_tracker* trackers[group] = {};
    const cell_store* stores[group] = {};
    const float* rows[group] = {};
    std::int32_t lengths[group] = {};
    Cache* owners[group] = {};
    bool resets[group] = {};
    std::int32_t count = 0;
    const auto flush = [&] {
      importance_lanes::observe(trackers, rows, lengths, stores, count, resets);
      for (std::int32_t a = 0; a < count; ++a) {
        if (resets[a]) ++owners[a]->stats_.drift_resets;
        ++owners[a]->stats_.steps;
      }
      count = 0;
    };
    for (std::size_t i = 0; i < caches.size(); ++i) {
      Cache& cache = *caches[i];
      trackers[count] = &cache.importance_;
      stores[count] = &cache.store_;
      rows[count] = attention[i].data();
      lengths[count] = cache.store_.size();
      owners[count] = &cache;
      if (++count == group) flush();
    }
    if (count > 0) flush();
  }

  /// tiered_cache::plan_heads(): checks every argument first (see there), then plans.
  static void plan(span<const Cache* const> caches, span<eviction_plan> plans) {
    constexpr const char* where = "tiered_cache::plan_heads";
    AUDIOKV_REQUIRE(
        plans.size() == caches.size(), where, "plans.size()", plans.size(),
        ::audiokv::detail::describe("must equal caches.size() (", caches.size(), ")").c_str());
    for (std::size_t i = 0; i < caches.size(); ++i) {
      AUDIOKV_REQUIRE(caches[i] != nullptr, where,
                      ::audiokv::detail::indexed("caches", static_cast<long long>(i)), "nullptr",
                      "must point to a cache");
    }
    using planner_type = planner<typename Cache::pipeline_type>;
    constexpr std::int32_t group = core::trend_lanes;  // caches per planning group
    std::optional<planner_type> planners[group];
    const planner_type* heads[group] = {};
    std::int32_t targets[group] = {};
    eviction_plan* outs[group] = {};
    std::int32_t rows = 0;
    const auto flush = [&] {
      planner_type::plan_heads_down_to(heads, targets, /*use_ratio=*/true, outs, rows);
      rows = 0;
    };
    for (std::size_t i = 0; i < caches.size(); ++i) {
      const Cache& cache = *caches[i];
      if (!cache.wants_eviction()) {
        cache.store_.build_empty_plan(plans[i]);
        continue;
      }
      planners[rows].emplace(cache.make_planner());
      heads[rows] = &*planners[rows];
      targets[rows] = cache.pools_.trigger_cells() - 1;
      outs[rows] = &plans[i];
      if (++rows == group) flush();
    }
    if (rows > 0) flush();
  }
};

}  // namespace audiokv::policy::detail
