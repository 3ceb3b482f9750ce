// Step times over main.steps. See views_steps.h; the SQL this table replaces is the step_times
// view of ViewsReferenceSql() in query/views/views.cc.
#include "query/views/views_steps.h"

#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "query/sql/vtab_module.h"

namespace tracedb::query {
namespace {

constexpr const char* kTable = "tracedb_step_times";

// One row of step_times. dur is what SQL's `coalesce(next_ts, rank_end) - ts` gives: an integer,
// NULL (no next step and no block), or a REAL when the integer subtraction overflows.
struct StepRow {
  enum DurType : uint8_t { kInt, kNull, kReal };
  int64_t rank, step, ts;
  int64_t dur = 0;
  double dur_real = 0;
  DurType dur_type = kInt;
};

std::string Where() { return std::string(kTable) + ": "; }

// SQLite's integer `a - b`: exact, or both as doubles when the result overflows int64.
void SetDur(int64_t a, int64_t b, StepRow* r) {
  int64_t d;
  if (__builtin_sub_overflow(a, b, &d)) {
    r->dur_type = StepRow::kReal;
    r->dur_real = static_cast<double>(a) - static_cast<double>(b);
  } else {
    r->dur_type = StepRow::kInt;
    r->dur = d;
  }
}

Status Compute(engine::Db* db, std::vector<StepRow>* out) {
  out->clear();
  // The key order (rank, ts) is the window's partition and order: no sort.
  auto st = db->Prepare("SELECT rank, ts, step FROM main.steps ORDER BY rank, ts");
  if (!st.ok()) return Status::Corruption(Where() + st.status().message());
  // The end of a rank's trace, asked only for ranks that have a step (as the SQL's correlated
  // subquery, through blocks_by_rank).
  auto end = db->Prepare("SELECT max(max_end) FROM main.blocks WHERE rank = ?");
  if (!end.ok()) return Status::Corruption(Where() + end.status().message());
  // Ends the rank whose steps are out->at(first..): each step until the next one, the last one
  // until the rank's end.
  auto finish_rank = [&](size_t first) -> Status {
    std::vector<StepRow>& r = *out;
    for (size_t i = first; i + 1 < r.size(); ++i) SetDur(r[i + 1].ts, r[i].ts, &r[i]);
    StepRow& last = r.back();
    end->Reset();
    end->Bind(1, last.rank);
    auto row = end->Step();
    if (!row.ok()) return Status::Corruption(Where() + row.status().message());
    const int type = *row ? end->ColumnType(0) : SQLITE_NULL;
    if (type == SQLITE_NULL) {
      last.dur_type = StepRow::kNull;
    } else if (type == SQLITE_INTEGER) {
      SetDur(end->Int(0), last.ts, &last);
    } else {
      return Status::Corruption(Where() + "blocks.max_end of rank " + std::to_string(last.rank) +
                                " is not an integer");
    }
    return Status::Ok();
  };
  size_t first = 0;
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) return Status::Corruption(Where() + row.status().message());
    if (!*row) break;
    // The columns are INTEGER NOT NULL and the engine writes integers: anything else is a
    // damaged database, not a value to compute with.
    for (int c = 0; c < 3; ++c) {
      if (st->ColumnType(c) != SQLITE_INTEGER)
        return Status::Corruption(Where() + "a steps row holds a " +
                                  (c == 0   ? "rank"
                                   : c == 1 ? "ts"
                                            : "step") +
                                  " that is not an integer");
    }
    StepRow r;
    r.rank = st->Int(0);
    r.ts = st->Int(1);
    r.step = st->Int(2);
    if (!out->empty() && out->back().rank != r.rank) {
      Status s = finish_rank(first);
      if (!s.ok()) return s;
      first = out->size();
    }
    out->push_back(r);
  }
  if (!out->empty()) return finish_rank(first);
  return Status::Ok();
}

// ---- the virtual table ----

// The columns read from steps keep their declared types; dur, an expression, has none.
constexpr const char* kSchema = "CREATE TABLE x(rank INTEGER, step INTEGER, start_ts INTEGER, dur)";
enum Col { kRank, kStep, kStartTs, kDur };

struct Vtab {
  sqlite3_vtab base;  // must be first
  std::unique_ptr<engine::Db> db;
};

struct Cursor {
  sqlite3_vtab_cursor base;  // must be first
  Vtab* vtab = nullptr;
  std::unique_ptr<std::vector<StepRow>> rows;  // computed by the first xFilter of the statement
  size_t row = 0;
};

int Connect(sqlite3* db, void*, int, const char* const*, sqlite3_vtab** out, char**) {
  return NewVtab<Vtab>(db, kSchema, kTable, out);
}

int BestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  // Nothing is pushed down: the whole table is computed, once per statement (one row per
  // step: small). Rows come in (rank, start_ts) order, ranks and each rank's start_ts distinct,
  // so an ascending ORDER BY rank[, start_ts] needs no sort.
  info->estimatedCost = 1e5;
  info->estimatedRows = 100000;
  if (OrderedPrefix(info, {kRank, kStartTs})) info->orderByConsumed = 1;
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* cur, int, const char*, int, sqlite3_value**) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  c->row = 0;
  if (c->rows) return SQLITE_OK;  // filtered again within the statement: the same rows
  auto rows = std::make_unique<std::vector<StepRow>>();
  Status s;
  try {
    s = Compute(c->vtab->db.get(), rows.get());
  } catch (const std::bad_alloc&) {
    return SQLITE_NOMEM;
  }
  if (!s.ok()) {
    sqlite3_free(c->vtab->base.zErrMsg);
    c->vtab->base.zErrMsg = sqlite3_mprintf("%s", s.message().c_str());
    return SQLITE_ERROR;
  }
  c->rows = std::move(rows);
  return SQLITE_OK;
}

int Next(sqlite3_vtab_cursor* cur) {
  reinterpret_cast<Cursor*>(cur)->row++;
  return SQLITE_OK;
}

int Eof(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  return !c->rows || c->row >= c->rows->size() ? 1 : 0;
}

int Column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  const StepRow& r = (*c->rows)[c->row];
  switch (col) {
    case kRank:
      sqlite3_result_int64(ctx, r.rank);
      break;
    case kStep:
      sqlite3_result_int64(ctx, r.step);
      break;
    case kStartTs:
      sqlite3_result_int64(ctx, r.ts);
      break;
    case kDur:
      if (r.dur_type == StepRow::kInt)
        sqlite3_result_int64(ctx, r.dur);
      else if (r.dur_type == StepRow::kReal)
        sqlite3_result_double(ctx, r.dur_real);
      else
        sqlite3_result_null(ctx);
      break;
    default:
      sqlite3_result_null(ctx);
  }
  return SQLITE_OK;
}

int Rowid(sqlite3_vtab_cursor* cur, sqlite3_int64* out) {
  *out = static_cast<sqlite3_int64>(reinterpret_cast<Cursor*>(cur)->row);
  return SQLITE_OK;
}

sqlite3_module MakeModule() {
  return EponymousModule<Connect, BestIndex, DeleteVtab<Vtab>, OpenCursor<Cursor>,
                         CloseCursor<Cursor>, Filter, Next, Eof, Column, Rowid>();
}

}  // namespace

int RegisterStepsModules(sqlite3* db) {
  static const sqlite3_module module = MakeModule();
  return sqlite3_create_module_v2(db, kTable, &module, nullptr, nullptr);
}

}  // namespace tracedb::query
