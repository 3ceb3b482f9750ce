// The built-in views over `events` and the summary tables, created as TEMP views on every
// connection that has the tracedb module (so the database file itself stays plain SQLite).
// docs/sql.md lists them with their columns.
#pragma once

#include "engine/sqlite_api.h"

namespace tracedb::query {

// The SQL that creates every view (idempotent: CREATE TEMP VIEW IF NOT EXISTS).
const char* ViewsSql();

// Registers the `events` module and the SQL functions, and creates the views.
// Returns an SQLite result code; *err (sqlite3_malloc'ed) explains a failure.
int InstallSqlSurface(sqlite3* db, char** err);

}  // namespace tracedb::query
