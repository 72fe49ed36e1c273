// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "asr_error.hpp"

namespace asr {

/// @brief Bounds-checked little-endian cursor over an in-memory file.
/// Invariant: 0 <= pos_ <= size_; every read checks the remaining length first, so hostile
/// lengths raise asr_error (naming file and offset) instead of reading out of bounds.
class byte_reader {
 public:
  byte_reader(const uint8_t* data, size_t size, std::string file)
      : data_(data), size_(size), file_(std::move(file)) {}

  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }
  const std::string& file() const { return file_; }
  const uint8_t* data() const { return data_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw asr_error(file_ + ": " + what + " (at byte offset " + std::to_string(pos_) + ")");
  }

  void require(size_t n, const char* what) const {
    if (n > remaining()) {
      fail(std::string("truncated file: need ") + std::to_string(n) + " bytes for " + what +
           ", only " + std::to_string(remaining()) + " left");
    }
  }

  template <typename T>
  T read(const char* what) {
    require(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // host is little-endian (checked at load)
    pos_ += sizeof(T);
    return v;
  }

  void skip(size_t n, const char* what) {
    require(n, what);
    pos_ += n;
  }

  void seek(size_t p) {
    if (p > size_) fail("seek past end of file");
    pos_ = p;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  std::string file_;
  size_t pos_ = 0;
};

/// Reads a whole file; raises asr_error naming the file when it cannot be opened or read.
inline std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw asr_error(path + ": cannot open file (missing or unreadable)");
  in.seekg(0, std::ios::end);
  const std::streamoff n = in.tellg();
  if (n < 0) throw asr_error(path + ": cannot determine file size");
  in.seekg(0, std::ios::beg);
  std::vector<uint8_t> bytes(static_cast<size_t>(n));
  if (n > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), n)) {
    throw asr_error(path + ": read failed");
  }
  return bytes;
}

}  // namespace asr
