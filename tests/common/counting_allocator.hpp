// SPDX-License-Identifier: Apache-2.0
/// @file
/// A replacement global operator new / delete that counts every allocation made while
/// `audiokv::test::g_counting` is set, for "this loop never allocates" checks.
///
/// It defines the replacement operators (which may not be inline), so exactly one translation
/// unit per binary includes it; a second one fails to link with duplicate symbols.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace audiokv::test {

/// Set to count; global operator new (every form) then increments g_allocations.
inline std::atomic<bool> g_counting{false};
inline std::atomic<std::int64_t> g_allocations{0};

/// Runs f() with counting on and returns the allocations it made (counting is off again after,
/// even when f throws). Not reentrant.
template <class F>
std::int64_t count_allocations(F&& f) {
  struct stop {
    ~stop() { g_counting.store(false, std::memory_order_relaxed); }
  };
  const std::int64_t before = g_allocations.load(std::memory_order_relaxed);
  {
    g_counting.store(true, std::memory_order_relaxed);
    const stop at_exit;
    f();
  }
  return g_allocations.load(std::memory_order_relaxed) - before;
}

namespace detail {

inline void count_one() {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  }
}
inline void* counted_alloc(std::size_t size) {
  count_one();
  return std::malloc(size == 0 ? 1 : size);
}
inline void* counted_aligned_alloc(std::size_t size, std::align_val_t align) {
  count_one();
  const std::size_t a = static_cast<std::size_t>(align);
  return std::aligned_alloc(a, (size + a - 1) / a * a);
}
// Out of line so GCC does not pair an inlined operator new with free() and warn
// (-Wmismatched-new-delete): these replacements own both sides.
[[gnu::noinline]] inline void counted_free(void* p) noexcept { std::free(p); }

}  // namespace detail
}  // namespace audiokv::test

void* operator new(std::size_t size) {
  if (void* p = audiokv::test::detail::counted_alloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return audiokv::test::detail::counted_alloc(size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return audiokv::test::detail::counted_alloc(size);
}
void* operator new(std::size_t size, std::align_val_t align) {
  if (void* p = audiokv::test::detail::counted_aligned_alloc(size, align)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t align) { return operator new(size, align); }
void operator delete(void* p) noexcept { audiokv::test::detail::counted_free(p); }
void operator delete[](void* p) noexcept { audiokv::test::detail::counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { audiokv::test::detail::counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { audiokv::test::detail::counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { audiokv::test::detail::counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept {
  audiokv::test::detail::counted_free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  audiokv::test::detail::counted_free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  audiokv::test::detail::counted_free(p);
}
