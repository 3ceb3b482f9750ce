// The span statistics views computed in C++ over decoded block columns: the eponymous
// table-valued functions under span_stats and name_stats_all (query/views/views.cc). In SQL they
// are a GROUP BY over `events WHERE kind = 'span'` with count, sum, avg, max, count(DISTINCT rank)
// and three percentile() aggregates, which SQLite evaluates row by row (a value per aggregate
// per row through the row engine; the figures: docs/bench-db.md).
// Here the blocks are decoded (kind, name, dur) and each group keeps its count, sums, max and
// either its first durations or, past 976 of them, a log-linear histogram (exact_select.h); a
// percentile that falls in a bucket of more than one value takes further passes over the blocks,
// each keeping only the values (at most 2048, or more within a budget shared by all groups) or the
// finer counts of that bucket. Memory is bounded per group (~8 KB, up to ~50 KB while a large group
// is being refined) plus 4M durations (32 MiB) shared by all groups, not per span; a job whose
// groups all hold 976 spans or fewer is read once, a larger one typically twice (at most 7 times,
// whatever the distribution). All passes read one snapshot of the database (a read transaction),
// and a pass that does not see the spans the first saw is an error. Rows, columns, types and order
// are those of the plain SQL (ViewsReferenceSql() in query/views/views.h), which
// tests/events_differential_test.cc checks:
//   tracedb_span_stats      rank, name, count, total_ns, mean_ns, p50_ns, p95_ns, p99_ns, max_ns
//   tracedb_name_stats_all  name, count, ranks, total_ns, mean_ns, p50_ns, p95_ns, p99_ns, max_ns
// Groups are keyed by the name's text (two string ids with the same text are one group; a name
// id without a string is the NULL group), as GROUP BY name groups them. Rows come ordered by
// (rank, name) or name (NULL first, then text by bytes), and xBestIndex says so for an ORDER BY
// on those columns. `rank = x` on tracedb_span_stats reads only that rank's blocks.
// total_ns fails the statement with "integer overflow", as sum() does. mean_ns is
// CAST(sum / count AS INTEGER) with the sum added up in doubles as SQLite's avg() does; that is
// exact, and identical to SQLite whatever the row order, while the running sum of a group stays
// below 2^53 ns (104 days of span time in one group).
// A statement computes the table once per distinct argument; the next statement sees the
// database as it is then.
// Thread safety: per SQLite connection.
#pragma once

#include "engine/db/sqlite_api.h"

namespace tracedb::query {

// Registers both modules on `db`. Returns an SQLite result code.
int RegisterSpanStatsModules(sqlite3* db);

}  // namespace tracedb::query
