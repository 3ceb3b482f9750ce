// The loadable SQLite extension: `sqlite3 JOB.tdb` then `.load libtracedb_sqlite` registers the
// `events` virtual table, the SQL functions and the views (docs/sql.md). Built from the same
// sources as the CLI with TRACEDB_SQLITE_EXTENSION defined, so every sqlite3_* call goes through
// the host's API table.
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1

#include "engine/db/sqlite_harden.h"
#include "query/views/views.h"

namespace {

// tracedb_harden(): trusted_schema off and SQLITE_DBCONFIG_DEFENSIVE on for the calling
// connection, as tracedb's own connections have them (docs/security.md). The host opened the
// connection, so the extension does not change its settings by itself: the Python package calls
// this on the connection it opens. It only ever tightens, so a schema may not call it
// (no SQLITE_INNOCUOUS) but nothing is lost if it could.
void HardenFn(sqlite3_context* ctx, int, sqlite3_value**) {
  tracedb::engine::HardenConnection(sqlite3_context_db_handle(ctx));
  sqlite3_result_int(ctx, 1);
}

int Init(sqlite3* db, char** err, const sqlite3_api_routines* api) {
  SQLITE_EXTENSION_INIT2(api);
  const int rc = sqlite3_create_function(db, "tracedb_harden", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY,
                                         nullptr, HardenFn, nullptr, nullptr);
  if (rc != SQLITE_OK) return rc;
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
