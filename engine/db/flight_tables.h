// The flight recorder's tables (docs/flight.md), as compaction writes them: `step_stats`, one
// row per (rank, step) from the recorder's STEPSTATS blocks, on the common clock, and
// `triggers`, one row per trigger instant. Owns their definitions for databases written before
// they existed, and step_stats' JSON `top_names`. Compaction (compactor.cc) and the shard merge
// (shard_merge.cc) call it; nothing here reads events.
// Thread safety: none; one Db per thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/db/clock_model.h"
#include "engine/db/sqlite.h"
#include "engine/segment/segment_format.h"
#include "engine/util/status.h"

namespace tracedb::engine {

// The table's CREATE statement (IF NOT EXISTS), also part of the schema of a new database.
extern const char* const kStepStatsTableSql;

// Creates the table in a database that predates it (a no-op otherwise).
Status EnsureStepStatsTable(Db* db);
// Both tables, `step_stats` and `triggers`, where missing.
Status EnsureFlightTables(Db* db);

// Writes `rows` of `rank`. `to_common` maps the recorder's clock onto the common clock;
// `strings` are the process's strings (id i is strings[i - 1]; an id past them reads
// "<unknown name N>"). A (rank, step, start_ns) already stored is left as it is.
Status InsertStepStats(Db* db, int32_t rank, const std::vector<StepStat>& rows,
                       const ClockModel& to_common, const std::vector<std::string>& strings);

// One row of `triggers` (created when missing); a row already stored is left as it is.
Status InsertTrigger(Db* db, int32_t rank, int64_t ts, const std::string& reason);

// `top` as a JSON array of [name, ns] pairs, most time first (the `top_names` column).
std::string TopNamesJson(const std::vector<std::pair<std::string, int64_t>>& top);

}  // namespace tracedb::engine
