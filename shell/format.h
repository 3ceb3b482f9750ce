// Human-readable numbers for the shell's text output: the one definition is
// engine/util/human_units.h, shared with the SQL functions human_duration() and human_bytes().
#pragma once

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "engine/util/human_units.h"
#include "engine/util/str_format.h"

namespace tracedb::shell {

using engine::HumanBytes;
using engine::HumanDuration;
using engine::WithCommas;

// printf into a std::string (any length): engine/util/str_format.h.
using engine::Fmt;

// Seconds on the monotonic clock, for elapsed times and rates.
inline double Now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace tracedb::shell
