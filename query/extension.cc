// The loadable SQLite extension: `sqlite3 JOB.tdb` then `.load libtracedb_sqlite` registers the
// `events` virtual table, the SQL functions and the views (docs/sql.md). Built from the same
// sources as the CLI with TRACEDB_SQLITE_EXTENSION defined, so every sqlite3_* call goes through
// the host's API table.
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1

#include "query/views.h"

namespace {
int Init(sqlite3* db, char** err, const sqlite3_api_routines* api) {
  SQLITE_EXTENSION_INIT2(api);
  return tracedb::query::InstallSqlSurface(db, err);
}
}  // namespace

extern "C" {
__attribute__((visibility("default"))) int sqlite3_tracedbsqlite_init(
    sqlite3* db, char** err, const sqlite3_api_routines* api) {
  return Init(db, err, api);
}
__attribute__((visibility("default"))) int sqlite3_tracedb_init(sqlite3* db, char** err,
                                                                const sqlite3_api_routines* api) {
  return Init(db, err, api);
}
__attribute__((visibility("default"))) int sqlite3_extension_init(sqlite3* db, char** err,
                                                                  const sqlite3_api_routines* api) {
  return Init(db, err, api);
}
}
