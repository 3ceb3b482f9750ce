// Per-rank step times computed in C++ over main.steps: the eponymous table-valued function under
// the step_times view (query/views/views.cc). In SQL the view is a lead() window over the steps of
// each rank and a correlated max(blocks.max_end) for each rank's last step; SQLite's window
// machinery is slow per row (the figures: docs/bench-db.md). Here the steps are
// read once in their key order (rank, ts), each step lasts until the next one of its rank, and the
// last one of a rank until the end of the rank's last block (NULL when the rank has no block).
// Rows, columns, types and NULLs are those of the plain SQL definition (ViewsReferenceSql() in
// query/views/views.h), which tests/events_differential_test.cc and tests/views_steps_test.cc
// check.
//   tracedb_step_times  rank, step, start_ts, dur
// Rows come in (rank, start_ts) order. A statement computes the table once (a cursor keeps its
// rows when SQLite filters it again); the next statement sees the database as it is then.
// Thread safety: per SQLite connection.
#pragma once

#include "engine/db/sqlite_api.h"

namespace tracedb::query {

// Registers the module on `db`. Returns an SQLite result code.
int RegisterStepsModules(sqlite3* db);

}  // namespace tracedb::query
