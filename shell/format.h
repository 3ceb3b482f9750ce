// Human-readable numbers for the shell's text output: the one definition is
// query/human_units.h, shared with the SQL functions human_duration() and human_bytes().
#pragma once

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "query/human_units.h"

namespace tracedb::shell {

using query::HumanBytes;
using query::HumanDuration;
using query::WithCommas;

// printf into a std::string (any length).
std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string Fmt(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list again;
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, again);
  va_end(again);
  return out;
}

// Seconds on the monotonic clock, for elapsed times and rates.
inline double Now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace tracedb::shell
