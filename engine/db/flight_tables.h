// The flight recorder's tables (docs/flight.md), as compaction writes them: `step_stats`, one
// row per (rank, step) from the recorder's STEPSTATS blocks, on the common clock, and
// `triggers`, one row per trigger instant; and step_stats' JSON `top_names`. Their definitions
// are db_schema.cc's, with the other tables created when first written. Compaction
// (compactor.cc) calls it; nothing here reads events.
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

// Writes `rows` of `rank`. `to_common` maps the recorder's clock onto the common clock;
// `strings` are the process's strings (id i is strings[i - 1]; an id past them reads
// "<unknown name N>"). A (rank, step, start_ns) already stored is left as it is.
Status InsertStepStats(Db* db, int32_t rank, const std::vector<StepStat>& rows,
                       const ClockModel& to_common, const std::vector<std::string>& strings);

// One row of `triggers` (the table created when first written); a row already stored is left as it
// is.
Status InsertTrigger(Db* db, int32_t rank, int64_t ts, const std::string& reason);

// `top` as a JSON array of [name, ns] pairs, most time first (the `top_names` column).
std::string TopNamesJson(const std::vector<std::pair<std::string, int64_t>>& top);

}  // namespace tracedb::engine
