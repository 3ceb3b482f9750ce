// Human-readable numbers, one definition for the shell's text output and the SQL functions
// human_duration() and human_bytes() (query/sql/functions.cc): 1,234,567; 12.3 MB; 4.56 ms.
// Units: bytes in powers of 1000 (B, KB, MB, GB, TB, PB; "%.0f B", else one decimal); durations
// from ns: "%.0f ns" below 1 µs, "%.2f us" below 1 ms, "%.2f ms" below 1 s, else "%.3f s".
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace tracedb::engine {

std::string WithCommas(uint64_t v);
std::string HumanBytes(double bytes);
std::string HumanDuration(double ns);

}  // namespace tracedb::engine
