// The sqlite3_module of an eponymous-only, read-only virtual table: the table-valued functions
// under the built-in views (query/views_*.h). Each supplies its callbacks; there is no xCreate
// (the table exists in every schema under its own name), xDestroy is xDisconnect, and nothing
// writes.
#pragma once

#include <cstring>

#include "engine/sqlite_api.h"

namespace tracedb::query {

inline sqlite3_module EponymousModule(
    decltype(sqlite3_module::xConnect) connect, decltype(sqlite3_module::xBestIndex) best_index,
    decltype(sqlite3_module::xDisconnect) disconnect, decltype(sqlite3_module::xOpen) open,
    decltype(sqlite3_module::xClose) close, decltype(sqlite3_module::xFilter) filter,
    decltype(sqlite3_module::xNext) next, decltype(sqlite3_module::xEof) eof,
    decltype(sqlite3_module::xColumn) column, decltype(sqlite3_module::xRowid) rowid) {
  sqlite3_module m;
  std::memset(&m, 0, sizeof(m));
  m.xCreate = nullptr;  // eponymous-only
  m.xConnect = connect;
  m.xBestIndex = best_index;
  m.xDisconnect = disconnect;
  m.xDestroy = disconnect;
  m.xOpen = open;
  m.xClose = close;
  m.xFilter = filter;
  m.xNext = next;
  m.xEof = eof;
  m.xColumn = column;
  m.xRowid = rowid;
  return m;
}

}  // namespace tracedb::query
