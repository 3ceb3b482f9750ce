// Collective matching computed in C++ over decoded block columns: the eponymous table-valued
// function under the collective_calls and collective_arrivals views (query/views/views.cc), and
// through them collectives, stragglers, collective_wait and `tracedb report stragglers`. In SQL the
// arrivals are four window functions over (comm, seq), which SQLite evaluates by writing every
// row into ephemeral b-trees (the figures: docs/bench-db.md); here the blocks
// that can hold a collective call (block_names: cat mpi, comm or nccl, RANK_READY ticks,
// NEGOTIATE_* spans) are selected and decoded once by the block store (engine/db/block_store.h),
// the calls are sorted by (comm, seq, ts DESC, rank) and each partition's min/max/count/last rank
// is computed in one pass. Rows, columns and NULLs are those of the plain SQL (ViewsReferenceSql()
// in query/views/views.h), which tests/events_differential_test.cc checks.
//   tracedb_collective_arrivals  rank, name, comm, seq, id, ts, dur, end_ts, late_ns, wait_ns,
//                                ranks, last_rank
// Rows come ordered by (comm, seq) (NULL comm first, as SQLite sorts), and xBestIndex says so
// for an ORDER BY or GROUP BY on (comm[, seq]): `collectives` aggregates them without a sorter.
// A statement computes the table once; the next statement sees the database as it is then.
// Thread safety: per SQLite connection.
#pragma once

#include "engine/db/sqlite_api.h"

namespace tracedb::query {

// Registers the module on `db`. Returns an SQLite result code.
int RegisterCollectiveModules(sqlite3* db);

}  // namespace tracedb::query
