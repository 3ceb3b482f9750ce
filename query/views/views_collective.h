// Collective matching computed in C++ over decoded block columns: the eponymous table-valued
// function under the collective_calls and collective_arrivals views (query/views/views.cc), and
// through them collectives, stragglers, collective_wait and `tracedb report stragglers`. In SQL the
// arrivals are four window functions over (comm, seq), which SQLite evaluates by writing every
// row into ephemeral b-trees (the figures: docs/bench-db.md); here the blocks
// that can hold a collective call (block_names: cat mpi, comm or nccl, RANK_READY ticks,
// NEGOTIATE_* spans) are selected and decoded by the block store (engine/db/block_store.h), and
// each (comm, seq) partition is sorted by (ts DESC, rank, id) and its min/max/count/last rank
// computed. A scan streams the partitions, one held at a time: a first pass over the call blocks
// in (rank, time) order checks that every rank's seq on every communicator never decreases and
// lists the blocks; then, per communicator (NULL first, then ascending), the ranks' calls are
// merged by seq, reading each rank's blocks of that communicator one at a time (memory: the
// block list and a block's calls per rank, not the job's calls; CPU: one more pass, and one pass
// per communicator). A job where a rank's seq goes back, or with Horovod ticks, and a second
// scan within one statement (the inner loop of a join) hold every call instead (the table sorted
// whole by (comm, seq, ts DESC, rank, id), computed once per statement). Rows, columns and NULLs
// are those of the plain SQL (ViewsReferenceSql() in query/views/views.h), which
// tests/events_differential_test.cc checks.
//   tracedb_collective_arrivals  rank, name, comm, seq, id, ts, dur, end_ts, late_ns, wait_ns,
//                                ranks, last_rank
// Rows come ordered by (comm, seq) (NULL comm first, as SQLite sorts), and xBestIndex says so
// for an ORDER BY or GROUP BY on (comm[, seq]): `collectives` aggregates them without a sorter.
// A scan reads one snapshot of the database (a read transaction); the next statement sees the
// database as it is then.
// Thread safety: per SQLite connection.
#pragma once

#include "engine/db/sqlite_api.h"

namespace tracedb::query {

// Registers the module on `db`. Returns an SQLite result code.
int RegisterCollectiveModules(sqlite3* db);

}  // namespace tracedb::query
