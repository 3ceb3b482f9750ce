// The sqlite3_module of an eponymous-only, read-only virtual table: the table-valued functions
// under the built-in views (query/views_*.h) and `events` (query/sql/events_vtab.cc). Each supplies
// its callbacks; there is no xCreate (the table exists in every schema under its own name),
// xDestroy is xDisconnect, and nothing writes. Every callback is wrapped in Guard
// (engine/db/sqlite_guard.h): no exception reaches SQLite. The callbacks every such table writes
// the same way (its vtab and cursor made and deleted, the ORDER BY it can consume) are here once:
// NewVtab, DeleteVtab, OpenCursor, CloseCursor, OrderedPrefix.
#pragma once

#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>

#include "engine/db/sqlite.h"
#include "engine/db/sqlite_api.h"
#include "engine/db/sqlite_guard.h"

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

// A table's sqlite3_vtab: `Vtab` has `sqlite3_vtab base` first and a `std::unique_ptr<engine::Db>
// db`. xConnect's work: declares `schema`, makes the Vtab with the connection borrowed under
// `name` (for its errors), lets `init` fill the rest, and hands it to SQLite.
template <class Vtab, class Init>
int NewVtab(sqlite3* db, const char* schema, const char* name, sqlite3_vtab** out, Init&& init) {
  const int rc = sqlite3_declare_vtab(db, schema);
  if (rc != SQLITE_OK) return rc;
  auto* v = new (std::nothrow) Vtab();
  if (v == nullptr) return SQLITE_NOMEM;
  std::memset(&v->base, 0, sizeof(v->base));
  v->db = engine::Db::Borrow(db, name);
  init(v);
  *out = &v->base;
  return SQLITE_OK;
}
template <class Vtab>
int NewVtab(sqlite3* db, const char* schema, const char* name, sqlite3_vtab** out) {
  return NewVtab<Vtab>(db, schema, name, out, [](Vtab*) {});
}

// xDisconnect (and xDestroy).
template <class Vtab>
int DeleteVtab(sqlite3_vtab* vtab) {
  delete reinterpret_cast<Vtab*>(vtab);
  return SQLITE_OK;
}

// xOpen and xClose: `Cursor` has `sqlite3_vtab_cursor base` first and `vtab`, a pointer to the
// table's Vtab type.
template <class Cursor>
int OpenCursor(sqlite3_vtab* tab, sqlite3_vtab_cursor** out) {
  auto* c = new (std::nothrow) Cursor();
  if (c == nullptr) return SQLITE_NOMEM;
  std::memset(&c->base, 0, sizeof(c->base));
  c->vtab = reinterpret_cast<decltype(c->vtab)>(tab);
  *out = &c->base;
  return SQLITE_OK;
}
// `before_close` (optional) releases what the cursor lends elsewhere before it is deleted.
template <class Cursor>
void NothingBeforeClose(Cursor*) {}
template <class Cursor, auto before_close = NothingBeforeClose<Cursor>>
int CloseCursor(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  before_close(c);
  delete c;
  return SQLITE_OK;
}

// For xBestIndex: true when the statement's ORDER BY is ascending on a prefix of `keys` (column
// numbers), the order the table's rows come in: then it may set orderByConsumed.
inline bool OrderedPrefix(const sqlite3_index_info* info, std::initializer_list<int> keys) {
  const int n = info->nOrderBy;
  if (n < 1 || n > static_cast<int>(keys.size())) return false;
  const int* key = keys.begin();
  for (int i = 0; i < n; ++i) {
    const auto& o = info->aOrderBy[i];
    if (o.desc || o.iColumn != key[i]) return false;
  }
  return true;
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
