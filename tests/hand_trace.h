// Helpers of the tests that build small traces by hand (the views', the why analyses', the MPI
// report's) and read them back through SQL: a rank with its one thread track, and the rows of a
// statement as text. One copy here instead of one per test file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/db/trace_writer.h"

namespace tracedb::testing {

// Declares rank `rank` of a `world_size`-rank job made by `source` (and on `host` when given) and
// its one thread track, "main" with tid 100 + rank; returns the track. A failure fails the
// calling test (and the track returned is then 0).
uint32_t AddRankTrack(engine::TraceWriter* tw, int rank, int world_size, const std::string& source,
                      const std::string& host = "");

// The rows of `sql` on `db`, each its columns' text joined by '|', NULL as "NULL". An error fails
// the calling test and ends the rows there.
std::vector<std::string> SqlRows(engine::Db* db, const std::string& sql);

}  // namespace tracedb::testing
