// SPDX-License-Identifier: Apache-2.0
/// @file
/// The identity of a cache: a process-wide unique id stamped on its plans, new for a copy,
/// kept by a move.
#pragma once

#include <atomic>
#include <cstdint>

namespace audiokv::policy::detail {

/// A process-wide unique, nonzero id (a relaxed atomic counter: uniqueness is all it needs).
inline std::uint64_t next_cache_id() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

/// @brief The identity of one cache, stamped on its plans (eviction_plan::cache_id).
///
/// A copy is a different cache: copying (construction or assignment) draws a new id, so a
/// plan made by the source is rejected by the copy even though both have the same history.
/// A move relocates the same cache: the target takes the id (plans made before the move stay
/// valid on it) and the moved-from object draws a new one.
class cache_identity {
 public:
  cache_identity() noexcept : id_(next_cache_id()) {}
  cache_identity(const cache_identity&) noexcept : id_(next_cache_id()) {}
  cache_identity(cache_identity&& other) noexcept : id_(other.id_) { other.id_ = next_cache_id(); }
  cache_identity& operator=(const cache_identity& other) noexcept {
    if (this != &other) id_ = next_cache_id();
    return *this;
  }
  cache_identity& operator=(cache_identity&& other) noexcept {
    if (this != &other) {
      id_ = other.id_;
      other.id_ = next_cache_id();
    }
    return *this;
  }
  ~cache_identity() = default;

  std::uint64_t value() const noexcept { return id_; }

 private:
  std::uint64_t id_;
};

}  // namespace audiokv::policy::detail
