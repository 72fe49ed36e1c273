// SPDX-License-Identifier: Apache-2.0
/// @file
/// The byte I/O of snapshots: little-endian fixed-width writer and reader, checked reads that
/// name the bad field, and the FNV-1a 64 checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "../../detail/describe.hpp"
#include "../../error.hpp"

namespace audiokv::policy::detail {

/// FNV-1a 64 of [data, data + n), continuing from `hash` (offset basis 14695981039346656037,
/// prime 1099511628211).
inline std::uint64_t fnv1a64(const std::byte* data, std::size_t n,
                             std::uint64_t hash = 14695981039346656037ull) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    hash ^= static_cast<std::uint64_t>(data[i]);
    hash *= 1099511628211ull;
  }
  return hash;
}

/// Writes little-endian fixed-width values to a byte buffer the caller sized.
class snapshot_writer {
 public:
  explicit snapshot_writer(std::byte* out) noexcept : out_(out) {}
  void u8(std::uint8_t v) noexcept { out_[at_++] = static_cast<std::byte>(v); }
  void u32(std::uint32_t v) noexcept {
    for (int b = 0; b < 4; ++b) u8(static_cast<std::uint8_t>(v >> (8 * b)));
  }
  void u64(std::uint64_t v) noexcept {
    for (int b = 0; b < 8; ++b) u8(static_cast<std::uint8_t>(v >> (8 * b)));
  }
  void i32(std::int32_t v) noexcept { u32(static_cast<std::uint32_t>(v)); }
  void i64(std::int64_t v) noexcept { u64(static_cast<std::uint64_t>(v)); }
  void f32(float v) noexcept {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    u32(bits);
  }
  void f64(double v) noexcept {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    u64(bits);
  }
  std::size_t written() const noexcept { return at_; }
  const std::byte* data() const noexcept { return out_; }

 private:
  std::byte* out_;
  std::size_t at_ = 0;
};

/// Reads little-endian fixed-width values from a byte buffer whose length the caller checked.
/// check() throws audiokv::error naming "snapshot" with `where` and the message.
class snapshot_reader {
 public:
  snapshot_reader(const char* where, const std::byte* in) noexcept : where_(where), in_(in) {}
  std::uint8_t u8() noexcept { return static_cast<std::uint8_t>(in_[at_++]); }
  std::uint32_t u32() noexcept {
    std::uint32_t v = 0;
    for (int b = 0; b < 4; ++b) v |= static_cast<std::uint32_t>(u8()) << (8 * b);
    return v;
  }
  std::uint64_t u64() noexcept {
    std::uint64_t v = 0;
    for (int b = 0; b < 8; ++b) v |= static_cast<std::uint64_t>(u8()) << (8 * b);
    return v;
  }
  std::int32_t i32() noexcept { return static_cast<std::int32_t>(u32()); }
  std::int64_t i64() noexcept { return static_cast<std::int64_t>(u64()); }
  float f32() noexcept {
    const std::uint32_t bits = u32();
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  double f64() noexcept {
    const std::uint64_t bits = u64();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  /// A 0/1 byte; anything else throws naming `field` (with `index` when >= 0).
  bool flag(const char* field, long long index = -1) {
    const std::uint8_t v = u8();
    check(v <= 1, static_cast<int>(v), field, index, "must be 0 or 1");
    return v != 0;
  }
  /// Unless `ok`, throws audiokv::error naming "snapshot", whose message gives the field
  /// (field[index] when index >= 0), the expectation, the value and the byte offset after the
  /// field: "snapshot: num_cells must be ... (it is 5000; the field ends at byte 40)".
  /// The message is built only on failure, so a passing check allocates nothing.
  template <class Value>
  void check(bool ok, const Value& value, const char* field, long long index,
             const char* expectation) const {
    if (!ok) fail(value, field, index, expectation);
  }
  /// check() of a field without index.
  template <class Value>
  void check(bool ok, const Value& value, const char* field, const char* expectation) const {
    if (!ok) fail(value, field, -1, expectation);
  }
  std::size_t offset() const noexcept { return at_; }
  const char* where() const noexcept { return where_; }
  /// The next byte to read.
  const std::byte* here() const noexcept { return in_ + at_; }

 private:
  template <class Value>
  [[noreturn]] void fail(const Value& value, const char* field, long long index,
                         const char* expectation) const {
    const std::string name =
        index >= 0 ? ::audiokv::detail::indexed(field, index) : std::string(field);
    ::audiokv::detail::throw_invalid_part(
        where_, "snapshot",
        ::audiokv::detail::describe(name, " ", expectation, " (it is ", value,
                                    "; the field ends at byte ", at_, ")"));
  }

  const char* where_;
  const std::byte* in_;
  std::size_t at_ = 0;
};

}  // namespace audiokv::policy::detail
