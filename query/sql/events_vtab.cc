// The `events` virtual table: the module and its cursor's life cycle. The parts are described
// in events_internal.h; the SQL surface is documented in docs/sql.md.
#include "query/sql/events_vtab.h"

#include <memory>

#include "query/sql/events_internal.h"
#include "query/sql/vtab_module.h"

namespace tracedb::query {
namespace {

using events::EventsCursor;
using events::EventsVtab;

int Connect(sqlite3* db, void*, int, const char* const*, sqlite3_vtab** out, char**) {
  return NewVtab<EventsVtab>(db, events::kSchema, "events", out, [db](EventsVtab* v) {
    // The store's messages name the file (none for an in-memory database).
    const char* file = sqlite3_db_filename(db, "main");
    v->store = std::make_unique<engine::BlockStore>(v->db.get(), file != nullptr ? file : "");
  });
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
  // (A step constraint has loaded them already: ParseConstraints.)
  if ((col_used & (1 << events::kStep)) != 0) c->vtab->catalog.LoadSteps(c->vtab->db.get());
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

// A grouped scan's memory goes back to the table's scratch before the cursor is deleted.
void BeforeClose(EventsCursor* c) { events::ReleaseGrouped(c); }

}  // namespace

int RegisterEventsModule(sqlite3* db) {
  static const sqlite3_module module =
      EponymousModule<Connect, events::BestIndex, DeleteVtab<EventsVtab>, OpenCursor<EventsCursor>,
                      CloseCursor<EventsCursor, BeforeClose>, Filter, Next, Eof, events::Column,
                      events::Rowid>();
  return sqlite3_create_module_v2(db, "events", &module, nullptr, nullptr);
}

}  // namespace tracedb::query
