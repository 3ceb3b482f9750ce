// The `events` virtual table: every event of a trace database as one row, decoded on demand
// from the columnar blocks. Constraints on rank, name, cat, kind, track, id, ts, end_ts, dur and
// step are pushed down to the zone maps (blocks, block_names, steps), so most queries decode
// few blocks; `ORDER BY dur DESC LIMIT n` (with or without a name) runs as a top-n search that
// visits blocks by their largest duration and stops early.
//
// Columns: id, rank, tid, track, track_name, lane, name, cat, kind, ts, dur, end_ts, depth,
// parent, bytes, peer, tag, comm, seq, flow, value, step, args (docs/sql.md).
// This file implements SQLite's virtual-table interface and so calls the sqlite3_* API itself.
// Thread safety: per SQLite connection.
#pragma once

#include "engine/sqlite_api.h"

namespace tracedb::query {

// Registers the eponymous module `events` on `db`.
int RegisterEventsModule(sqlite3* db);

}  // namespace tracedb::query
