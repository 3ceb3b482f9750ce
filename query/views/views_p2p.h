// Point-to-point message matching computed in C++ over decoded block columns: the eponymous
// table-valued functions under the p2p_sends, p2p_receives and p2p_messages views
// (query/views/views.cc). In SQL the matching is a window function per side and a self-join of
// `events` on (rank, flow) that SQLite runs as nested loops over the virtual table (14 s of CPU
// at 1M events, quadratic beyond); here the MPI blocks (block_names, cat 'mpi') are decoded once
// and matched by the one matcher (query/views/comm_match.h, the why model's too): receives are
// paired with their completions by a binary search over the postings sorted by (rank, flow), the
// n-th message of each (rank, comm, peer, tag) is numbered by sorting, and sends meet receives
// in a sort-merge join. Rows, columns and NULLs are those of the plain SQL definitions
// (ViewsReferenceSql() in query/views/views.h), which tests/events_differential_test.cc checks.
//   tracedb_p2p_sends     id, src, comm, src_in_comm, dst_in_comm, tag, ts, end_ts, bytes, n
//   tracedb_p2p_receives  id, dst, comm, dst_in_comm, src_in_comm, tag, posted_ts, end_ts,
//                         bytes, n
//   tracedb_p2p_messages  send_id, recv_id, src, dst, comm, tag, bytes, send_ts, recv_end_ts,
//                         latency_ns
// A statement computes each table once (a cursor keeps its rows when SQLite filters it again,
// as the inner side of a join); the next statement sees the database as it is then.
// Thread safety: per SQLite connection.
#pragma once

#include "engine/db/sqlite_api.h"

namespace tracedb::query {

// Registers the three modules on `db`. Returns an SQLite result code.
int RegisterP2pModules(sqlite3* db);

}  // namespace tracedb::query
