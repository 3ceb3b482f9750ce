// Human-readable numbers for the shell's text output: the one definition is
// query/sql/human_units.h, shared with the SQL functions human_duration() and human_bytes().
#pragma once

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "engine/util/str_format.h"
#include "query/sql/human_units.h"

namespace tracedb::shell {

using query::HumanBytes;
using query::HumanDuration;
using query::WithCommas;

// printf into a std::string (any length): engine/util/str_format.h.
using engine::Fmt;

// Seconds on the monotonic clock, for elapsed times and rates.
inline double Now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace tracedb::shell
