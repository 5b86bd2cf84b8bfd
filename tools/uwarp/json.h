// A small JSON writer for `uwarp --json` output: objects and arrays with commas placed for the
// caller, strings escaped. Output goes to a string.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace uwarp::tool {

class Json {
 public:
  Json& begin_object(std::string_view key = {}) { return open(key, '{'); }
  Json& end_object() { return close('}'); }
  Json& begin_array(std::string_view key = {}) { return open(key, '['); }
  Json& end_array() { return close(']'); }
  Json& field(std::string_view key, std::string_view value) {
    prefix(key);
    quote(value);
    return *this;
  }
  Json& field(std::string_view key, const char* value) {
    return field(key, std::string_view(value));
  }
  Json& field(std::string_view key, std::uint64_t value) {
    prefix(key);
    out_ += std::to_string(value);
    return *this;
  }
  Json& field(std::string_view key, std::uint32_t value) {
    return field(key, std::uint64_t{value});
  }
  Json& field(std::string_view key, int value) {
    prefix(key);
    out_ += std::to_string(value);
    return *this;
  }
  Json& field(std::string_view key, bool value) {
    prefix(key);
    out_ += value ? "true" : "false";
    return *this;
  }
  const std::string& str() const { return out_; }

 private:
  Json& open(std::string_view key, char c) {
    prefix(key);
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  Json& close(char c) {
    out_ += c;
    first_.pop_back();
    return *this;
  }
  void prefix(std::string_view key) {
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
    }
    if (!key.empty()) {
      quote(key);
      out_ += ':';
    }
  }
  void quote(std::string_view s) {
    out_ += '"';
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += ch;
      } else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out_ += buf;
      } else {
        out_ += ch;
      }
    }
    out_ += '"';
  }

  std::string out_;
  std::vector<bool> first_;
};

}  // namespace uwarp::tool
