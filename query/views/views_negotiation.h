// Horovod negotiations computed in C++ over decoded block columns: the eponymous table-valued
// functions under the negotiation_ticks and negotiations views (query/views/views.cc). In SQL,
// negotiation_ticks is a row_number() window over the RANK_READY ticks, which SQLite evaluates
// by writing every tick into an ephemeral b-tree, and negotiations joins its first rows to the
// NEGOTIATE_* spans (the figures: docs/bench-db.md). Here the blocks
// whose zone maps (block_names) hold a RANK_READY name (and, for negotiations, a NEGOTIATE_*
// name) are selected and decoded once by the block store (engine/db/block_store.h), the ticks are
// sorted by (negotiation, ts DESC, peer) and numbered, and each negotiation's first tick meets its
// span in a merge over span ids. What a tick and a negotiation are is shared with the collective
// table (query/views/negotiation_rows.h). Rows, columns, NULLs and column affinities are those of
// the plain SQL (ViewsReferenceSql() in query/views/views.h), which
// tests/events_differential_test.cc checks.
//   tracedb_negotiation_ticks  negotiation, ready_rank, ts, from_last
//   tracedb_negotiations       id, rank, name, tensor, ts, dur, last_rank, last_ready_after_ns
// Rows come ordered by negotiation (then from_last), and by id, and xBestIndex says so for an
// ascending ORDER BY on those columns. A statement computes each table once; the next statement
// sees the database as it is then.
// Thread safety: per SQLite connection.
#pragma once

#include "engine/db/sqlite_api.h"

namespace tracedb::query {

// Registers the two modules on `db`. Returns an SQLite result code.
int RegisterNegotiationModules(sqlite3* db);

}  // namespace tracedb::query
