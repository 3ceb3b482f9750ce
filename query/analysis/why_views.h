// The SQL surface of the why analyses (query/analysis/why.h): four eponymous table-valued
// functions, each computing the whole analysis once per statement, and the views over them
// that query/views/views.cc installs with the other built-in views (docs/sql.md, docs/why.md):
//   tracedb_wait_states           id, rank, step, pattern, wait_ns, waited_for, call, ts,
//                                 late_id
//   tracedb_root_causes           step, rank, name, cost_ns, direct_ns, indirect_ns,
//                                 excess_ns, noise_z, waits, waiting_ranks, call, reported
//   tracedb_critical_path         step, ord, rank, name, ts, dur
//   tracedb_critical_path_whatif  step, rank, name, ns, median_ns, on_path_ns, step_ns,
//                                 whatif_step_ns
//   views: wait_states, wait_state_totals, root_causes (reported rows only), critical_path,
//          critical_path_names, critical_path_whatif
// Thread safety: per SQLite connection.
#pragma once

#include "engine/db/sqlite_api.h"

namespace tracedb::query::analysis {

// Registers the four modules on `db`. Returns an SQLite result code.
int RegisterWhyModules(sqlite3* db);

// The CREATE TEMP VIEW statements of the views above.
const char* WhyViewsSql();

}  // namespace tracedb::query::analysis
