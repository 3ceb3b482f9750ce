// The tool version written into segment files and databases.
#pragma once

namespace tracedb::engine {
inline constexpr const char* kTracedbVersion = "0.1.0";
}  // namespace tracedb::engine
