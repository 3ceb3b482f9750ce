// The sqlite3_module of an eponymous-only, read-only virtual table: the table-valued functions
// under the built-in views (query/views_*.h). Each supplies its callbacks; there is no xCreate
// (the table exists in every schema under its own name), xDestroy is xDisconnect, and nothing
// writes. Every callback is wrapped in Guard (engine/sqlite_guard.h): no exception reaches SQLite.
#pragma once

#include <cstring>

#include "engine/sqlite_api.h"
#include "engine/sqlite_guard.h"

namespace tracedb::query {

// xConnect, then the table marked innocuous (read-only, no side effect): usable from a view
// stored in the file under trusted_schema=OFF (docs/security.md).
template <auto connect>
int InnocuousConnect(sqlite3* db, void* aux, int argc, const char* const* argv, sqlite3_vtab** out,
                     char** err) {
  const int rc = connect(db, aux, argc, argv, out, err);
  if (rc == SQLITE_OK) sqlite3_vtab_config(db, SQLITE_VTAB_INNOCUOUS);
  return rc;
}

template <auto connect, auto best_index, auto disconnect, auto open, auto close, auto filter,
          auto next, auto eof, auto column, auto rowid>
sqlite3_module EponymousModule() {
  sqlite3_module m;
  std::memset(&m, 0, sizeof(m));
  m.xCreate = nullptr;  // eponymous-only
  m.xConnect = engine::Guarded<InnocuousConnect<connect>>();
  m.xBestIndex = engine::Guarded<best_index>();
  m.xDisconnect = engine::Guarded<disconnect>();
  m.xDestroy = engine::Guarded<disconnect>();
  m.xOpen = engine::Guarded<open>();
  m.xClose = engine::Guarded<close>();
  m.xFilter = engine::Guarded<filter>();
  m.xNext = engine::Guarded<next>();
  m.xEof = engine::Guarded<eof>();
  m.xColumn = engine::Guarded<column>();
  m.xRowid = engine::Guarded<rowid>();
  return m;
}

}  // namespace tracedb::query
