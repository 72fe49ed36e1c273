// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cctype>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "asr_error.hpp"

namespace asr {

/// @brief Minimal JSON document model and parser, enough for CTranslate2's `config.json`.
/// Strict about structure, bounded nesting depth (64) so hostile input cannot overflow the
/// stack; string escapes other than \uXXXX are decoded, \uXXXX is kept as '?'.
class json_value {
 public:
  enum class kind { null, boolean, number, string, array, object };

  static json_value parse(const std::string& text, const std::string& file) {
    size_t pos = 0;
    json_value v = parse_value(text, pos, file, 0);
    skip_ws(text, pos);
    if (pos != text.size()) fail(file, pos, "trailing characters after the JSON value");
    return v;
  }

  kind type() const { return kind_; }
  bool is_array() const { return kind_ == kind::array; }
  bool is_object() const { return kind_ == kind::object; }
  bool is_number() const { return kind_ == kind::number; }
  double number() const { return number_; }
  const std::string& str() const { return string_; }
  const std::vector<json_value>& items() const { return items_; }
  const std::vector<std::pair<std::string, json_value>>& members() const { return members_; }

  const json_value* get(const std::string& key) const {
    for (const auto& m : members_) {
      if (m.first == key) return &m.second;
    }
    return nullptr;
  }

 private:
  [[noreturn]] static void fail(const std::string& file, size_t pos, const std::string& what) {
    throw asr_error(file + ": invalid JSON: " + what + " (at byte offset " + std::to_string(pos) +
                    ")");
  }

  static void skip_ws(const std::string& t, size_t& p) {
    while (p < t.size() && (t[p] == ' ' || t[p] == '\n' || t[p] == '\r' || t[p] == '\t')) ++p;
  }

  static json_value parse_value(const std::string& t, size_t& p, const std::string& file,
                                int depth) {
    if (depth > 64) fail(file, p, "nesting deeper than 64");
    skip_ws(t, p);
    if (p >= t.size()) fail(file, p, "unexpected end of input");
    json_value v;
    const char c = t[p];
    if (c == '{') {
      v.kind_ = kind::object;
      ++p;
      skip_ws(t, p);
      if (p < t.size() && t[p] == '}') {
        ++p;
        return v;
      }
      for (;;) {
        skip_ws(t, p);
        if (p >= t.size() || t[p] != '"') fail(file, p, "expected a string key");
        std::string key = parse_string(t, p, file);
        skip_ws(t, p);
        if (p >= t.size() || t[p] != ':') fail(file, p, "expected ':'");
        ++p;
        v.members_.emplace_back(std::move(key), parse_value(t, p, file, depth + 1));
        skip_ws(t, p);
        if (p < t.size() && t[p] == ',') {
          ++p;
          continue;
        }
        if (p < t.size() && t[p] == '}') {
          ++p;
          return v;
        }
        fail(file, p, "expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.kind_ = kind::array;
      ++p;
      skip_ws(t, p);
      if (p < t.size() && t[p] == ']') {
        ++p;
        return v;
      }
      for (;;) {
        v.items_.push_back(parse_value(t, p, file, depth + 1));
        skip_ws(t, p);
        if (p < t.size() && t[p] == ',') {
          ++p;
          continue;
        }
        if (p < t.size() && t[p] == ']') {
          ++p;
          return v;
        }
        fail(file, p, "expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.kind_ = kind::string;
      v.string_ = parse_string(t, p, file);
      return v;
    }
    if (t.compare(p, 4, "true") == 0 || t.compare(p, 5, "false") == 0) {
      v.kind_ = kind::boolean;
      v.number_ = (c == 't') ? 1.0 : 0.0;
      p += (c == 't') ? 4 : 5;
      return v;
    }
    if (t.compare(p, 4, "null") == 0) {
      p += 4;
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      size_t e = p + 1;
      while (e < t.size() && (std::isdigit(static_cast<unsigned char>(t[e])) || t[e] == '.' ||
                              t[e] == 'e' || t[e] == 'E' || t[e] == '+' || t[e] == '-')) {
        ++e;
      }
      const std::string num = t.substr(p, e - p);
      char* end = nullptr;
      v.kind_ = kind::number;
      v.number_ = std::strtod(num.c_str(), &end);
      if (end != num.c_str() + num.size()) fail(file, p, "malformed number '" + num + "'");
      p = e;
      return v;
    }
    fail(file, p, std::string("unexpected character '") + c + "'");
  }

  static std::string parse_string(const std::string& t, size_t& p, const std::string& file) {
    ++p;  // opening quote
    std::string out;
    while (p < t.size() && t[p] != '"') {
      if (t[p] == '\\') {
        if (p + 1 >= t.size()) fail(file, p, "unterminated escape");
        const char e = t[p + 1];
        p += 2;
        switch (e) {
          case 'n':
            out += '\n';
            break;
          case 't':
            out += '\t';
            break;
          case 'r':
            out += '\r';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'u':
            if (p + 4 > t.size()) fail(file, p, "truncated \\u escape");
            p += 4;
            out += '?';
            break;
          default:
            out += e;
        }
      } else {
        out += t[p++];
      }
    }
    if (p >= t.size()) fail(file, p, "unterminated string");
    ++p;  // closing quote
    return out;
  }

  kind kind_ = kind::null;
  double number_ = 0.0;
  std::string string_;
  std::vector<json_value> items_;
  // A vector (not a map) because std::vector alone is specified to accept an incomplete
  // element type (C++17 [vector.overview]/3).
  std::vector<std::pair<std::string, json_value>> members_;
};

}  // namespace asr
