// Small helpers to print JSON from the shell: string escaping and number formatting.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace tracedb::shell {

// Appends `s` as a JSON string literal (with quotes), escaping control characters, quotes and
// backslashes; invalid UTF-8 bytes are replaced by U+FFFD.
void AppendJsonString(std::string* out, std::string_view s);

inline std::string JsonString(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

}  // namespace tracedb::shell
