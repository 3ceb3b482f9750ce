// The `events` virtual table: the module and its cursor's life cycle. The parts are described
// in events_internal.h; the SQL surface is documented in docs/sql.md.
#include "query/sql/events_vtab.h"

#include <cstring>
#include <new>

#include "engine/db/sqlite_guard.h"
#include "query/sql/events_internal.h"

namespace tracedb::query {
namespace {

using events::EventsCursor;
using events::EventsVtab;

int Connect(sqlite3* db, void*, int, const char* const*, sqlite3_vtab** out, char** err) {
  int rc = sqlite3_declare_vtab(db, events::kSchema);
  if (rc != SQLITE_OK) return rc;
  // Read-only, no side effect: usable from a view stored in the file under trusted_schema=OFF
  // (docs/security.md).
  sqlite3_vtab_config(db, SQLITE_VTAB_INNOCUOUS);
  auto* v = new (std::nothrow) EventsVtab();
  if (v == nullptr) return SQLITE_NOMEM;
  std::memset(&v->base, 0, sizeof(v->base));
  v->db = engine::Db::Borrow(db, "events");
  *out = &v->base;
  return SQLITE_OK;
}

int Disconnect(sqlite3_vtab* vtab) {
  delete reinterpret_cast<EventsVtab*>(vtab);
  return SQLITE_OK;
}

int Open(sqlite3_vtab* tab, sqlite3_vtab_cursor** out) {
  auto* c = new (std::nothrow) EventsCursor();
  if (c == nullptr) return SQLITE_NOMEM;
  std::memset(&c->base, 0, sizeof(c->base));
  c->vtab = reinterpret_cast<EventsVtab*>(tab);
  *out = &c->base;
  return SQLITE_OK;
}

int Close(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<EventsCursor*>(cur);
  events::ReleaseGrouped(c);
  delete c;
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* cur, int col_used, const char* idx, int argc,
           sqlite3_value** argv) {
  auto* c = reinterpret_cast<EventsCursor*>(cur);
  c->vtab->catalog.Refresh(c->vtab->db.get());
  c->f = events::Constraints();
  c->mode = EventsCursor::Mode::kScan;
  c->blocks.clear();
  c->next_block = 0;
  c->sel_n = c->pos = 0;
  c->scan_loaded = false;
  events::ReleaseGrouped(c);
  c->top.clear();
  c->eof = false;
  int rc = events::ParseConstraints(c, col_used, idx, argc, argv);
  if (rc != SQLITE_OK || c->eof) return rc;
  rc = events::CollectBlocks(c);
  if (rc != SQLITE_OK) return rc;
  if (c->f.top_by_dur) {
    c->mode = EventsCursor::Mode::kTop;
    return events::RunTopN(c);
  }
  if (!c->f.group_cols.empty()) {
    c->mode = EventsCursor::Mode::kGrouped;
    return events::StartGrouped(c);
  }
  return events::StartScan(c);
}

int Next(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<EventsCursor*>(cur);
  switch (c->mode) {
    case EventsCursor::Mode::kTop:
      c->eof = ++c->top_pos >= c->top.size();
      return SQLITE_OK;
    case EventsCursor::Mode::kGrouped:
      return events::NextGrouped(c);
    default:
      return events::NextScan(c);
  }
}

int Eof(sqlite3_vtab_cursor* cur) { return reinterpret_cast<EventsCursor*>(cur)->eof ? 1 : 0; }

sqlite3_module MakeModule() {
  sqlite3_module m;
  std::memset(&m, 0, sizeof(m));
  m.iVersion = 0;
  // Every callback guarded: no exception reaches SQLite (engine/sqlite_guard.h).
  m.xCreate = nullptr;  // eponymous-only: `events` exists on every connection with the module
  m.xConnect = engine::Guarded<Connect>();
  m.xBestIndex = engine::Guarded<events::BestIndex>();
  m.xDisconnect = engine::Guarded<Disconnect>();
  m.xDestroy = engine::Guarded<Disconnect>();
  m.xOpen = engine::Guarded<Open>();
  m.xClose = engine::Guarded<Close>();
  m.xFilter = engine::Guarded<Filter>();
  m.xNext = engine::Guarded<Next>();
  m.xEof = engine::Guarded<Eof>();
  m.xColumn = engine::Guarded<events::Column>();
  m.xRowid = engine::Guarded<events::Rowid>();
  return m;
}

}  // namespace

int RegisterEventsModule(sqlite3* db) {
  static const sqlite3_module module = MakeModule();
  return sqlite3_create_module_v2(db, "events", &module, nullptr, nullptr);
}

}  // namespace tracedb::query
