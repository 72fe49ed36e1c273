// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "asr_error.hpp"
#include "byte_reader.hpp"

namespace asr {

/// CTranslate2 storage types, as numbered by the `model.bin` format.
enum class ct2_dtype : uint8_t { f32 = 0, i8 = 1, i16 = 2, i32 = 3, f16 = 4, bf16 = 5 };

/// @brief One variable of a CTranslate2 `model.bin`: name, shape, storage type and the byte
/// range of its data inside the file image.
struct ct2_variable {
  std::string name;
  std::vector<uint32_t> dims;
  ct2_dtype dtype = ct2_dtype::f32;
  size_t offset = 0;  ///< byte offset of the data in the file
  uint32_t nbytes = 0;
  /// Number of elements, product of dims (1 for a scalar).
  uint64_t numel() const {
    uint64_t n = 1;
    for (uint32_t d : dims) n *= d;
    return n;
  }
};

/// IEEE 754 binary16 -> binary32, exact for every input (subnormals, inf, NaN included).
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24; renormalise into a binary32 normal
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// bfloat16 -> binary32: bf16 is the upper half of a binary32.
inline float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// @brief Parsed CTranslate2 `model.bin` (binary versions 4-6).
///
/// Layout: `u32 version; str spec_name; u32 revision; u32 n_vars;` then per variable
/// `str name; u8 rank; u32 dims[rank]; u8 dtype; u32 nbytes; bytes[nbytes]`, then
/// `u32 n_aliases; (str alias, str target)*`, where `str` = `u16 len_with_nul; bytes; '\0'`.
/// Every length is bounds-checked against the file; `nbytes` must equal numel * sizeof(dtype).
class ct2_model_file {
 public:
  static ct2_model_file load(const std::string& path) {
    ct2_model_file m;
    m.path_ = path;
    m.bytes_ = read_file_bytes(path);
    m.parse();
    return m;
  }

  const std::string& path() const { return path_; }
  const std::string& spec_name() const { return spec_name_; }
  uint32_t version() const { return version_; }
  uint32_t revision() const { return revision_; }
  const std::map<std::string, ct2_variable>& variables() const { return vars_; }
  const std::map<std::string, std::string>& aliases() const { return aliases_; }

  /// True when `name` (or an alias of it) is stored.
  bool has(const std::string& name) const { return find(name) != nullptr; }

  /// Variable by name, following aliases; raises asr_error naming the file and variable.
  const ct2_variable& at(const std::string& name) const {
    const ct2_variable* v = find(name);
    if (v == nullptr) throw asr_error(path_ + ": missing variable '" + name + "'");
    return *v;
  }

  /// Variable converted to float32, checked against the expected shape (empty = any shape).
  std::vector<float> to_float(const std::string& name,
                              const std::vector<uint32_t>& expect_dims = {}) const {
    const ct2_variable& v = at(name);
    if (!expect_dims.empty() && v.dims != expect_dims) {
      throw asr_error(path_ + ": variable '" + name + "' has shape " + shape_str(v.dims) +
                      ", expected " + shape_str(expect_dims));
    }
    const uint64_t n = v.numel();
    std::vector<float> out(static_cast<size_t>(n));
    const uint8_t* p = bytes_.data() + v.offset;
    for (uint64_t i = 0; i < n; ++i) {
      switch (v.dtype) {
        case ct2_dtype::f32: {
          float f;
          std::memcpy(&f, p + 4 * i, 4);
          out[i] = f;
          break;
        }
        case ct2_dtype::f16: {
          uint16_t h;
          std::memcpy(&h, p + 2 * i, 2);
          out[i] = half_to_float(h);
          break;
        }
        case ct2_dtype::bf16: {
          uint16_t h;
          std::memcpy(&h, p + 2 * i, 2);
          out[i] = bf16_to_float(h);
          break;
        }
        case ct2_dtype::i8:
          out[i] = static_cast<float>(static_cast<int8_t>(p[i]));
          break;
        case ct2_dtype::i16: {
          int16_t s;
          std::memcpy(&s, p + 2 * i, 2);
          out[i] = s;
          break;
        }
        case ct2_dtype::i32: {
          int32_t s;
          std::memcpy(&s, p + 4 * i, 4);
          out[i] = static_cast<float>(s);
          break;
        }
      }
    }
    // Quantized weights (int8/int16) carry a per-row `<name>_scale`: w = q / scale.
    if ((v.dtype == ct2_dtype::i8 || v.dtype == ct2_dtype::i16) && ends_with(name, "weight") &&
        has(name + "_scale")) {
      const std::vector<float> scale = to_float(name + "_scale");
      if (v.dims.empty() || v.dims[0] == 0 || scale.size() != v.dims[0]) {
        throw asr_error(path_ + ": variable '" + name + "_scale' does not match rows of '" + name +
                        "'");
      }
      const size_t cols = static_cast<size_t>(n / v.dims[0]);
      for (size_t r = 0; r < scale.size(); ++r) {
        if (!(scale[r] != 0.0f) || !std::isfinite(scale[r])) {
          throw asr_error(path_ + ": variable '" + name + "_scale' has a zero or non-finite entry");
        }
        for (size_t c = 0; c < cols; ++c) out[r * cols + c] /= scale[r];
      }
    }
    return out;
  }

  /// Integer value of a scalar variable (any integer or float dtype).
  int64_t scalar_int(const std::string& name) const {
    const ct2_variable& v = at(name);
    if (v.numel() != 1) throw asr_error(path_ + ": variable '" + name + "' is not a scalar");
    const uint8_t* p = bytes_.data() + v.offset;
    switch (v.dtype) {
      case ct2_dtype::i8:
        return static_cast<int8_t>(p[0]);
      case ct2_dtype::i16: {
        int16_t s;
        std::memcpy(&s, p, 2);
        return s;
      }
      case ct2_dtype::i32: {
        int32_t s;
        std::memcpy(&s, p, 4);
        return s;
      }
      default:
        return static_cast<int64_t>(std::lround(to_float(name)[0]));
    }
  }

  static std::string shape_str(const std::vector<uint32_t>& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
  }

 private:
  static bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  }

  static size_t dtype_size(ct2_dtype t) {
    switch (t) {
      case ct2_dtype::f32:
      case ct2_dtype::i32:
        return 4;
      case ct2_dtype::i16:
      case ct2_dtype::f16:
      case ct2_dtype::bf16:
        return 2;
      case ct2_dtype::i8:
        return 1;
    }
    return 0;
  }

  const ct2_variable* find(const std::string& name) const {
    std::string key = name;
    // Alias chains are resolved with a hop limit so a cyclic alias table cannot loop.
    for (int hop = 0; hop < 8; ++hop) {
      auto it = vars_.find(key);
      if (it != vars_.end()) return &it->second;
      auto a = aliases_.find(key);
      if (a == aliases_.end()) return nullptr;
      key = a->second;
    }
    return nullptr;
  }

  static std::string read_str(byte_reader& r, const char* what) {
    const uint16_t len = r.read<uint16_t>(what);
    if (len == 0) r.fail(std::string("corrupt string length 0 for ") + what);
    r.require(len, what);
    const char* s = reinterpret_cast<const char*>(r.data() + r.pos());
    if (s[len - 1] != '\0') r.fail(std::string("string for ") + what + " is not NUL-terminated");
    std::string out(s, len - 1);
    r.skip(len, what);
    return out;
  }

  void parse() {
    const uint32_t probe = 1;
    uint8_t first;
    std::memcpy(&first, &probe, 1);
    if (first != 1) throw asr_error(path_ + ": big-endian hosts are not supported");

    byte_reader r(bytes_.data(), bytes_.size(), path_);
    if (bytes_.empty()) r.fail("empty file, not a CTranslate2 model.bin");
    version_ = r.read<uint32_t>("binary version");
    if (version_ < 4 || version_ > 6) {
      r.fail("unsupported CTranslate2 binary version " + std::to_string(version_) +
             " (supported: 4-6); not a CTranslate2 model.bin, or a corrupt one");
    }
    spec_name_ = read_str(r, "spec name");
    revision_ = r.read<uint32_t>("spec revision");
    const uint32_t n_vars = r.read<uint32_t>("variable count");
    // Smallest possible variable record: str(2+1) + rank(1) + dtype(1) + nbytes(4).
    if (n_vars > r.remaining() / 9) {
      r.fail("variable count " + std::to_string(n_vars) + " cannot fit in the file");
    }
    for (uint32_t i = 0; i < n_vars; ++i) {
      ct2_variable v;
      v.name = read_str(r, "variable name");
      const uint8_t rank = r.read<uint8_t>("variable rank");
      if (rank > 8) r.fail("variable '" + v.name + "' has rank " + std::to_string(rank) + " > 8");
      for (uint8_t d = 0; d < rank; ++d) v.dims.push_back(r.read<uint32_t>("variable dim"));
      const uint8_t dt = r.read<uint8_t>("variable dtype");
      if (dt > 5) r.fail("variable '" + v.name + "' has unknown dtype " + std::to_string(dt));
      v.dtype = static_cast<ct2_dtype>(dt);
      v.nbytes = r.read<uint32_t>("variable byte count");
      // numel * size must equal nbytes; compute in 64 bits with an overflow guard.
      uint64_t expect = dtype_size(v.dtype);
      for (uint32_t d : v.dims) {
        if (d != 0 && expect > (uint64_t{1} << 40) / d) {
          r.fail("variable '" + v.name + "' shape " + shape_str(v.dims) + " is implausibly large");
        }
        expect *= d;
      }
      if (expect != v.nbytes) {
        r.fail("variable '" + v.name + "' shape " + shape_str(v.dims) + " needs " +
               std::to_string(expect) + " bytes but the record says " + std::to_string(v.nbytes));
      }
      r.require(v.nbytes, ("data of variable '" + v.name + "'").c_str());
      v.offset = r.pos();
      r.skip(v.nbytes, "variable data");
      if (!vars_.emplace(v.name, v).second) r.fail("duplicate variable '" + v.name + "'");
    }
    if (r.remaining() > 0) {
      const uint32_t n_alias = r.read<uint32_t>("alias count");
      if (n_alias > r.remaining() / 6) r.fail("alias count cannot fit in the file");
      for (uint32_t i = 0; i < n_alias; ++i) {
        std::string alias = read_str(r, "alias name");
        std::string target = read_str(r, "alias target");
        aliases_[alias] = target;
      }
    }
    if (r.remaining() != 0) {
      r.fail(std::to_string(r.remaining()) + " unexpected trailing bytes after the alias table");
    }
  }

  std::string path_;
  std::vector<uint8_t> bytes_;
  uint32_t version_ = 0;
  uint32_t revision_ = 0;
  std::string spec_name_;
  std::map<std::string, ct2_variable> vars_;
  std::map<std::string, std::string> aliases_;
};

}  // namespace asr
