// The `events` virtual table: every event of a trace database as one row, decoded on demand
// from the columnar blocks. Constraints on rank, name, cat, kind, track, id, parent, ts,
// end_ts, dur and step are checked against the zone maps (blocks, block_names, steps,
// name_stats) so most queries decode few blocks; those and depth and the typed arguments are
// evaluated a block at a time. `ORDER BY dur DESC LIMIT n` runs as a top-n search; GROUP BY,
// DISTINCT and ORDER BY on rank/track/name/cat/kind/depth (and the track's tid, name, lane)
// get their rows in order, so SQLite needs no sorter. docs/sql.md says exactly what is pushed
// down and what is promised to SQLite; events_internal.h lists the parts.
//
// Columns: id, rank, tid, track, track_name, lane, name, cat, kind, ts, dur, end_ts, depth,
// parent, bytes, peer, tag, comm, seq, flow, value, step, args (docs/sql.md).
// This module implements SQLite's virtual-table interface and so calls the sqlite3_* API itself.
// Thread safety: per SQLite connection.
#pragma once

#include "engine/db/sqlite_api.h"

namespace tracedb::query {

// Registers the eponymous module `events` on `db`.
int RegisterEventsModule(sqlite3* db);

}  // namespace tracedb::query
