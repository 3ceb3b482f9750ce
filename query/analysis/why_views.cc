// The why analyses' table-valued functions and views. See why_views.h.
#include "query/analysis/why_views.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "engine/db/sqlite.h"
#include "engine/util/saturating.h"
#include "query/analysis/why.h"
#include "query/sql/vtab_module.h"

namespace tracedb::query::analysis {
namespace {

enum class Mode { kWaits, kCauses, kPath, kWhatIf };

struct ModeInfo {
  Mode mode;
  const char* table;
  const char* schema;
};

constexpr ModeInfo kModes[] = {
    {Mode::kWaits, "tracedb_wait_states",
     "CREATE TABLE x(id INTEGER, rank INTEGER, step INTEGER, pattern TEXT, wait_ns INTEGER, "
     "waited_for INTEGER, call TEXT, ts INTEGER, late_id INTEGER)"},
    {Mode::kCauses, "tracedb_root_causes",
     "CREATE TABLE x(step INTEGER, rank INTEGER, name TEXT, cost_ns INTEGER, direct_ns INTEGER, "
     "indirect_ns INTEGER, excess_ns INTEGER, noise_z REAL, waits INTEGER, waiting_ranks TEXT, "
     "call TEXT, reported INTEGER)"},
    {Mode::kPath, "tracedb_critical_path",
     "CREATE TABLE x(step INTEGER, ord INTEGER, rank INTEGER, name TEXT, ts INTEGER, "
     "dur INTEGER)"},
    {Mode::kWhatIf, "tracedb_critical_path_whatif",
     "CREATE TABLE x(step INTEGER, rank INTEGER, name TEXT, ns INTEGER, median_ns INTEGER, "
     "on_path_ns INTEGER, step_ns INTEGER, whatif_step_ns INTEGER)"},
};

struct Vtab {
  sqlite3_vtab base;  // must be first
  std::unique_ptr<engine::Db> db;
  const ModeInfo* info = nullptr;
};

struct Cursor {
  sqlite3_vtab_cursor base;  // must be first
  Vtab* vtab = nullptr;
  std::optional<Analysis> a;  // computed by the first xFilter of the statement
  size_t row = 0;
  std::string text;  // the current row's waiting_ranks
};

size_t RowCount(const Cursor& c) {
  if (!c.a) return 0;
  switch (c.vtab->info->mode) {
    case Mode::kWaits:
      return c.a->waits.size();
    case Mode::kCauses:
      return c.a->causes.size();
    case Mode::kPath:
      return c.a->path.size();
    case Mode::kWhatIf:
      return c.a->what_if.size();
  }
  return 0;
}

int Connect(sqlite3* db, void* aux, int, const char* const*, sqlite3_vtab** out, char**) {
  const auto* info = static_cast<const ModeInfo*>(aux);
  return query::NewVtab<Vtab>(db, info->schema, info->table, out,
                              [info](Vtab* v) { v->info = info; });
}

int BestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  // Nothing is pushed down: the whole analysis runs once per statement.
  info->estimatedCost = 1e9;
  info->estimatedRows = 100000;
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* cur, int, const char*, int, sqlite3_value**) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  c->row = 0;
  if (c->a) return SQLITE_OK;  // filtered again within the statement: the same rows
  try {
    auto a = Analyze(c->vtab->db.get());
    if (!a.ok()) {
      sqlite3_free(c->vtab->base.zErrMsg);
      c->vtab->base.zErrMsg =
          sqlite3_mprintf("%s: %s", c->vtab->info->table, a.status().message().c_str());
      return SQLITE_ERROR;
    }
    c->a = std::move(*a);
  } catch (const std::bad_alloc&) {
    return SQLITE_NOMEM;
  }
  return SQLITE_OK;
}

int Next(sqlite3_vtab_cursor* cur) {
  reinterpret_cast<Cursor*>(cur)->row++;
  return SQLITE_OK;
}

int Eof(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  return c->row >= RowCount(*c) ? 1 : 0;
}

void Name(sqlite3_context* ctx, const Analysis& a, int32_t name) {
  if (name < 0 || static_cast<size_t>(name) >= a.names.size()) {
    sqlite3_result_null(ctx);
    return;
  }
  const std::string& s = a.names[static_cast<size_t>(name)];
  sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
}

void Step(sqlite3_context* ctx, bool has, int64_t step) {
  if (has)
    sqlite3_result_int64(ctx, step);
  else
    sqlite3_result_null(ctx);
}

int Column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  const Analysis& a = *c->a;
  auto i64 = [&](int64_t v) { sqlite3_result_int64(ctx, v); };
  // Rounded and clamped to int64 (costs summed in doubles can pass it; llround's result there is
  // unspecified, INT64_MIN in practice).
  auto rnd = [&](double v) { sqlite3_result_int64(ctx, engine::SaturateInt64(std::round(v))); };
  switch (c->vtab->info->mode) {
    case Mode::kWaits: {
      const WaitState& w = a.waits[c->row];
      switch (col) {
        case 0:
          i64(w.id);
          break;
        case 1:
          i64(w.rank);
          break;
        case 2:
          Step(ctx, w.has_step, w.step);
          break;
        case 3:
          sqlite3_result_text(ctx, PatternName(w.pattern), -1, SQLITE_STATIC);
          break;
        case 4:
          i64(w.wait_ns);
          break;
        case 5:
          i64(w.waited_for);
          break;
        case 6:
          Name(ctx, a, w.call);
          break;
        case 7:
          i64(w.ts);
          break;
        case 8:
          i64(w.late_id);
          break;
        default:
          sqlite3_result_null(ctx);
      }
      break;
    }
    case Mode::kCauses: {
      const Cause& k = a.causes[c->row];
      switch (col) {
        case 0:
          Step(ctx, k.has_step, k.step);
          break;
        case 1:
          i64(k.rank);
          break;
        case 2:
          Name(ctx, a, k.name);
          break;
        case 3:
          rnd(k.cost_ns);
          break;
        case 4:
          rnd(k.direct_ns);
          break;
        case 5:
          rnd(k.indirect_ns);
          break;
        case 6:
          i64(k.excess_ns);
          break;
        case 7:
          sqlite3_result_double(ctx, std::isfinite(k.noise_z) ? k.noise_z : 1e300);
          break;
        case 8:
          i64(k.waits);
          break;
        case 9: {
          c->text.clear();
          for (int64_t r : k.waiting_ranks)
            c->text += (c->text.empty() ? "" : ",") + std::to_string(r);
          sqlite3_result_text(ctx, c->text.data(), static_cast<int>(c->text.size()),
                              SQLITE_TRANSIENT);
          break;
        }
        case 10:
          Name(ctx, a, k.call);
          break;
        case 11:
          i64(k.reported ? 1 : 0);
          break;
        default:
          sqlite3_result_null(ctx);
      }
      break;
    }
    case Mode::kPath: {
      const PathPiece& p = a.path[c->row];
      switch (col) {
        case 0:
          Step(ctx, p.has_step, p.step);
          break;
        case 1:
          i64(p.order);
          break;
        case 2:
          i64(p.rank);
          break;
        case 3:
          Name(ctx, a, p.name);
          break;
        case 4:
          i64(p.ts);
          break;
        case 5:
          i64(p.dur);
          break;
        default:
          sqlite3_result_null(ctx);
      }
      break;
    }
    case Mode::kWhatIf: {
      const Analysis::WhatIf& w = a.what_if[c->row];
      switch (col) {
        case 0:
          Step(ctx, w.has_step, w.step);
          break;
        case 1:
          i64(w.rank);
          break;
        case 2:
          Name(ctx, a, w.name);
          break;
        case 3:
          i64(w.ns);
          break;
        case 4:
          i64(w.median_ns);
          break;
        case 5:
          i64(w.on_path_ns);
          break;
        case 6:
          i64(w.step_ns);
          break;
        case 7:
          i64(w.whatif_step_ns);
          break;
        default:
          sqlite3_result_null(ctx);
      }
      break;
    }
  }
  return SQLITE_OK;
}

int Rowid(sqlite3_vtab_cursor* cur, sqlite3_int64* out) {
  *out = static_cast<sqlite3_int64>(reinterpret_cast<Cursor*>(cur)->row);
  return SQLITE_OK;
}

sqlite3_module MakeModule() {
  return query::EponymousModule<Connect, BestIndex, query::DeleteVtab<Vtab>,
                                query::OpenCursor<Cursor>, query::CloseCursor<Cursor>, Filter, Next,
                                Eof, Column, Rowid>();
}

const char* const kViewsSql = R"sql(
-- ---- Why (docs/why.md): wait states, root causes, the critical path ----

-- One row per wait (Scalasca's patterns): the waiting event, its rank and step, the pattern,
-- how long it waited and for which rank. Computed in C++ over the collective and
-- point-to-point matching (query/analysis/why_views.h).
CREATE TEMP VIEW IF NOT EXISTS wait_states AS
  SELECT id, rank, step, pattern, wait_ns, waited_for, call, ts FROM tracedb_wait_states;

-- Per pattern: how many waits and how long in all.
CREATE TEMP VIEW IF NOT EXISTS wait_state_totals AS
  SELECT pattern, count(*) AS waits, sum(wait_ns) AS wait_ns, count(DISTINCT rank) AS ranks
  FROM tracedb_wait_states GROUP BY pattern;

-- The root causes that stand out from the noise (docs/why.md "Noise"), by cost: the extra
-- time a rank spent in a name during a step, and the waits it caused, directly and through
-- propagation. tracedb_root_causes has every cause, reported or not.
CREATE TEMP VIEW IF NOT EXISTS root_causes AS
  SELECT step, rank, name, cost_ns, direct_ns, indirect_ns, excess_ns, noise_z, waits,
         waiting_ranks, call
  FROM tracedb_root_causes WHERE reported;

-- The critical path of every step window, in order: who was on it, doing what, when.
CREATE TEMP VIEW IF NOT EXISTS critical_path AS
  SELECT step, ord, rank, name, ts, dur FROM tracedb_critical_path;

-- Each name's share of the critical path over the whole job.
CREATE TEMP VIEW IF NOT EXISTS critical_path_names AS
  SELECT name, sum(dur) AS path_ns,
         round(100.0 * sum(dur) / sum(sum(dur)) OVER (), 2) AS share_pct
  FROM tracedb_critical_path GROUP BY name;

-- The step's time if a rank's name on the critical path had taken the median rank's time.
CREATE TEMP VIEW IF NOT EXISTS critical_path_whatif AS
  SELECT step, rank, name, ns, median_ns, on_path_ns, step_ns, whatif_step_ns
  FROM tracedb_critical_path_whatif;

)sql";

}  // namespace

int RegisterWhyModules(sqlite3* db) {
  static const sqlite3_module module = MakeModule();
  for (const ModeInfo& m : kModes) {
    int rc = sqlite3_create_module_v2(db, m.table, &module, const_cast<ModeInfo*>(&m), nullptr);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

const char* WhyViewsSql() { return kViewsSql; }

}  // namespace tracedb::query::analysis
