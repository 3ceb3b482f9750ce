// Strict parsing of integers written by people and programs (command-line values, environment
// variables, URL parameters, numbers in imported files): the one policy of the project. The whole
// text is a decimal integer: an optional '-', digits, nothing else (no spaces, no '+', no hex),
// and within int64_t. Anything else is refused, never read as its prefix or clamped.
// (Before, four copies used strtoll, which takes leading spaces and '+', and one of them did not
// check for overflow; three used from_chars, the policy kept.) Header-only: the recorder uses it.
#pragma once

#include <charconv>
#include <cstdint>
#include <string_view>
#include <system_error>

namespace tracedb::engine {

// True and *out set when `text` is a whole decimal int64; false (and *out untouched) otherwise.
inline bool ParseInt64(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  *out = v;
  return true;
}

// True when `text` is one or more ASCII digits and nothing else (no sign): a name that is a
// number (a rank directory, a file extension, a Horovod peer), before ParseInt64 reads it.
inline bool AllDigits(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace tracedb::engine
