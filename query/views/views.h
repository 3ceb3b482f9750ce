// The built-in views over `events` and the summary tables, created as TEMP views on every
// connection that has the tracedb module (so the database file itself stays plain SQLite).
// docs/sql.md lists them with their columns.
#pragma once

#include "engine/db/sqlite_api.h"

namespace tracedb::query {

// The SQL that creates every view (idempotent: CREATE TEMP VIEW IF NOT EXISTS).
const char* ViewsSql();

// The same views with every view that the shipped SQL computes differently (in C++ under a
// table-valued function, or reformulated for speed) in its plain-SQL definition: the reference
// tests/events_differential_test.cc compares the shipped views with, over a plain copy of
// `events`. The same view names, columns and rows.
const char* ViewsReferenceSql();

// Registers the `events` module and the SQL functions, and creates the views.
// Returns an SQLite result code; *err (sqlite3_malloc'ed) explains a failure.
int InstallSqlSurface(sqlite3* db, char** err);

}  // namespace tracedb::query
