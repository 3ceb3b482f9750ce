// printf into a std::string of any length: the one copy for the shell's text output and the
// query layer's sentences (query/analysis/why_summary.cc). Thread safety: a pure function.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace tracedb::engine {

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

}  // namespace tracedb::engine
