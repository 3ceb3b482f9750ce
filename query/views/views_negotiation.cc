// Horovod negotiations over decoded block columns. See views_negotiation.h; the SQL these tables
// replace is kNegReferenceSql in query/views/views.cc.
#include "query/views/views_negotiation.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/db/block_store.h"
#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "query/sql/vtab_module.h"
#include "query/views/negotiation_rows.h"

namespace tracedb::query {
namespace {

using engine::DecodedBlock;
using engine::RowKind;
using negotiation::Tick;

// The most ranks the block selection names as query parameters (engine::BlockSelection::ranks).
constexpr size_t kMaxRanksInQuery = 512;

enum class Which { kTicks, kNegotiations };

struct Module {
  Which which;
  const char* name;
  const char* schema;
};

// Columns read from events keep their declared types; from_last (a window result) and
// last_ready_after_ns (a difference) have none, as in SQL.
constexpr Module kModules[] = {
    {Which::kTicks, "tracedb_negotiation_ticks",
     "CREATE TABLE x(negotiation INTEGER, ready_rank INTEGER, ts INTEGER, from_last)"},
    {Which::kNegotiations, "tracedb_negotiations",
     "CREATE TABLE x(id INTEGER, rank INTEGER, name TEXT, tensor TEXT, ts INTEGER, dur INTEGER, "
     "last_rank INTEGER, last_ready_after_ns)"},
};
enum TickCol { kNegotiation, kReadyRank, kTickTs, kFromLast };
enum NegCol { kId, kRank, kName, kTensor, kTs, kDur, kLastRank, kAfter };

// A row of negotiation_ticks.
struct TickRow {
  int64_t negotiation, ts, from_last;
  int32_t peer;
  bool has_peer;
};

// A NEGOTIATE_* span (and, once matched, its last tick).
struct Span {
  int64_t id, rank, ts, dur;
  uint32_t name;  // strings id
  int32_t lane;   // index into Table::lanes; -1 = NULL
};

// A row of negotiations.
struct NegRow {
  Span span;
  int64_t ready_ts;
  int32_t peer;
  bool has_peer;
};

struct Table {
  std::vector<TickRow> ticks;
  std::vector<NegRow> negotiations;
  std::vector<std::string> strings;  // index = strings id
  std::vector<std::string> lanes;
  size_t rows(Which w) const { return w == Which::kTicks ? ticks.size() : negotiations.size(); }
};

std::string Where(const char* table) { return std::string(table) + ": "; }

// Within a negotiation, the order of row_number() OVER (PARTITION BY parent ORDER BY ts DESC,
// peer): the latest first, then by peer, NULL first as SQLite sorts. Ticks equal in all of these
// are equal in every output column, so their order among themselves does not show.
bool Later(const Tick& x, const Tick& y) {
  if (x.ts != y.ts) return x.ts > y.ts;
  if (x.has_peer != y.has_peer) return !x.has_peer;
  return x.peer < y.peer;
}

Status Compute(engine::Db* db, Which which, const char* table, Table* out) {
  const bool spans_too = which == Which::kNegotiations;
  // strings has no unique key on the text: every id of RANK_READY (or of a negotiation's name)
  // counts. Per string id, what it is (a lookup per decoded row, no hashing).
  enum : uint8_t { kReady = 1, kNegotiation = 2 };
  std::vector<uint8_t> what;
  std::vector<int64_t> ready_ids, names;
  // The store reads the dictionary as the events table does: an id past DenseIdLimit names no
  // event we read (engine/db/block_check.h), whatever a hostile file claims.
  engine::BlockStore store(db, {}, "main");
  auto last_id = store.ForEachString(-1, [&](int64_t id, std::string_view s) {
    if (id > UINT32_MAX) return;
    const auto u = static_cast<uint32_t>(id);
    uint8_t w = 0;
    if (s == "RANK_READY") w = kReady;
    if (spans_too && negotiation::IsNegotiationName(s)) w = kNegotiation;
    if (w == 0) return;
    if (what.size() <= u) what.resize(u + 1, 0);
    what[u] = w;
    (w == kReady ? ready_ids : names).push_back(u);
    if (spans_too) {
      if (out->strings.size() <= u) out->strings.resize(u + 1);
      out->strings[u] = std::string(s);
    }
  });
  if (!last_id.ok()) return Status::Corruption(Where(table) + last_id.status().message());
  if (ready_ids.empty()) return Status::Ok();  // no tick, no row in either table
  // Every block holding a tick; for negotiations also those holding a NEGOTIATE_* name on a rank
  // that has ticks (a tick's parent is on the tick's own track: a span on another rank has none,
  // and Horovod timelines tick on rank 0 only). A block with a tick is on a rank with ticks, so
  // that is: the blocks with either name on the ranks of the blocks with ticks.
  engine::BlockSelection sel;
  sel.order = engine::BlockSelection::Order::kBlock;
  sel.names = ready_ids;
  std::vector<int64_t> tick_ranks;  // ascending, distinct; empty: every rank
  if (!names.empty()) {
    Status s = store.ForEach(sel, [&](const engine::BlockZoneRow& z) {
      tick_ranks.push_back(z.rank);
      return Status::Ok();
    });
    if (!s.ok()) return Status::Corruption(Where(table) + s.message());
    std::sort(tick_ranks.begin(), tick_ranks.end());
    tick_ranks.erase(std::unique(tick_ranks.begin(), tick_ranks.end()), tick_ranks.end());
    sel.names.insert(sel.names.end(), names.begin(), names.end());
    // The ranks go into the query as parameters; beyond a few hundred (a damaged file) the
    // blocks of other ranks are skipped as they come instead.
    if (tick_ranks.size() <= kMaxRanksInQuery) sel.ranks = tick_ranks;
  }
  // No block with a tick: no rank has ticks, no block is read.
  const bool none = !names.empty() && tick_ranks.empty();
  // The blocks of ranks without ticks, when the query could not leave them out.
  const bool skip_ranks = !names.empty() && sel.ranks.empty();

  std::vector<Tick> ticks;
  std::vector<Span> spans;
  {
    // As many ticks as the zone maps count RANK_READY rows (some may lack a parent), so the
    // vector is not regrown and copied while it fills; capped, since a damaged zone map may
    // claim any count (the blocks' own row counts are checked as they are decoded).
    std::string list;
    for (int64_t id : ready_ids) list += (list.empty() ? "" : ", ") + std::to_string(id);
    auto n =
        db->QueryInt("SELECT sum(count) FROM main.block_names WHERE name IN (" + list + ")", 0);
    if (n.ok() && *n > 0) ticks.reserve(static_cast<size_t>(std::min<int64_t>(*n, 1 << 22)));
  }
  // The store checks each block's zone map, that it decodes and that it holds the rows its zone
  // map declares. The names first: only a block with a tick needs the parents and the arguments.
  auto visit = [&](const engine::BlockZoneRow& z, DecodedBlock& b) {
    const int64_t rank = z.rank;
    if (skip_ranks && !std::binary_search(tick_ranks.begin(), tick_ranks.end(), rank)) {
      return Status::Ok();
    }
    uint8_t in_block = 0;
    for (size_t i = 0; i < b.n; ++i) {
      const uint32_t name = b.name[i];
      in_block |= name < what.size() ? what[name] : 0;
    }
    if (in_block == 0) return Status::Ok();
    uint32_t want = engine::kColK | engine::kColTs;
    if (in_block & kReady) want |= engine::kColParent | engine::kColArgs;
    if (in_block & kNegotiation) want |= engine::kColKind;
    TRACEDB_RETURN_IF_ERROR(b.Need(want));
    for (size_t i = 0; i < b.n; ++i) {
      const uint32_t name = b.name[i];
      const uint8_t w = name < what.size() ? what[name] : 0;
      if (w == 0) continue;
      if (w == kReady) {
        Tick t;
        if (negotiation::TickAt(b, i, &t)) ticks.push_back(t);
      } else if (static_cast<RowKind>(b.kind[i]) == RowKind::kSpan) {
        spans.push_back(Span{negotiation::IdAt(b, i), rank, b.ts[i], b.dur[i], name, -1});
      }
    }
    return Status::Ok();
  };
  Status walk = none ? Status::Ok() : store.ForEachDecoded(sel, engine::kColName, visit);
  if (!walk.ok()) return Status::Corruption(Where(table) + walk.message());

  // Partitions by parent, in parent order. Ticks arrive in (track, k) order within a block and
  // a negotiation's ticks come after it, mostly together: runs of one parent are found in one
  // pass and only the runs are sorted, then each partition (a run, or the runs of a parent whose
  // ticks two blocks split) is ordered by Later. Sorting every tick by (parent, ...) cost a
  // fifth of the table's time at 10M events.
  struct Run {
    int64_t parent;
    size_t begin, end;
  };
  std::vector<Run> runs;
  for (size_t i = 0; i < ticks.size();) {
    size_t j = i + 1;
    while (j < ticks.size() && ticks[j].parent == ticks[i].parent) ++j;
    runs.push_back(Run{ticks[i].parent, i, j});
    i = j;
  }
  std::sort(runs.begin(), runs.end(), [](const Run& x, const Run& y) {
    return x.parent != y.parent ? x.parent < y.parent : x.begin < y.begin;
  });
  std::vector<Tick> joined;  // a partition split over several runs
  if (which == Which::kTicks) out->ticks.reserve(ticks.size());
  std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) { return x.id < y.id; });
  size_t next_span = 0;
  for (size_t g = 0; g < runs.size();) {
    size_t h = g + 1;
    while (h < runs.size() && runs[h].parent == runs[g].parent) ++h;
    Tick* first = ticks.data() + runs[g].begin;
    Tick* last = ticks.data() + runs[g].end;
    if (h > g + 1) {
      joined.clear();
      for (size_t r = g; r < h; ++r)
        joined.insert(joined.end(), ticks.begin() + static_cast<std::ptrdiff_t>(runs[r].begin),
                      ticks.begin() + static_cast<std::ptrdiff_t>(runs[r].end));
      first = joined.data();
      last = first + joined.size();
    }
    const int64_t parent = runs[g].parent;
    g = h;
    if (which == Which::kTicks) {
      std::sort(first, last, Later);
      int64_t n = 0;
      for (const Tick* t = first; t != last; ++t)
        out->ticks.push_back(TickRow{parent, t->ts, ++n, t->peer, t->has_peer});
      continue;
    }
    // negotiations: the span (if the parent is one) with its first tick (from_last = 1).
    while (next_span < spans.size() && spans[next_span].id < parent) ++next_span;
    if (next_span == spans.size()) break;
    if (spans[next_span].id != parent) continue;
    const Tick& t = *std::min_element(first, last, Later);
    for (size_t j = next_span; j < spans.size() && spans[j].id == parent; ++j)
      out->negotiations.push_back(NegRow{spans[j], t.ts, t.peer, t.has_peer});
  }
  if (out->negotiations.empty()) return Status::Ok();
  // tensor is events.lane: the track's name when the track is not a thread (a lane), else NULL;
  // NULL too for a track the tracks table lacks.
  auto tr = db->Prepare("SELECT track, kind, name FROM main.tracks");
  if (!tr.ok()) return Status::Corruption(Where(table) + tr.status().message());
  std::unordered_map<int64_t, int32_t> lane_of;  // track -> index into out->lanes
  for (;;) {
    auto row = tr->Step();
    if (!row.ok()) return Status::Corruption(Where(table) + row.status().message());
    if (!*row) break;
    if (tr->Text(1) == "thread") continue;
    lane_of[tr->Int(0)] = static_cast<int32_t>(out->lanes.size());
    out->lanes.emplace_back(tr->Text(2));
  }
  for (NegRow& r : out->negotiations) {
    auto it = lane_of.find(r.span.id >> 32);
    r.span.lane = it == lane_of.end() ? -1 : it->second;
  }
  return Status::Ok();
}

// ---- the virtual tables ----

struct Vtab {
  sqlite3_vtab base;  // must be first
  const Module* module = nullptr;
  std::unique_ptr<engine::Db> db;
};

struct Cursor {
  sqlite3_vtab_cursor base;  // must be first
  Vtab* vtab = nullptr;
  std::unique_ptr<Table> table;  // computed by the first xFilter of the statement
  size_t row = 0;
};

int Connect(sqlite3* db, void* aux, int, const char* const*, sqlite3_vtab** out, char**) {
  const auto* m = static_cast<const Module*>(aux);
  return NewVtab<Vtab>(db, m->schema, m->name, out, [m](Vtab* v) { v->module = m; });
}

int BestIndex(sqlite3_vtab* tab, sqlite3_index_info* info) {
  // Nothing is pushed down: the whole table is computed, once per statement. Ticks come in
  // (negotiation, from_last) order and negotiations in id order, so an ascending ORDER BY on
  // that prefix needs no sort.
  info->estimatedCost = 1e9;
  info->estimatedRows = 1000000;
  const bool ticks = reinterpret_cast<Vtab*>(tab)->module->which == Which::kTicks;
  const bool ordered =
      ticks ? OrderedPrefix(info, {kNegotiation, kFromLast}) : OrderedPrefix(info, {kId});
  if (ordered) info->orderByConsumed = 1;
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* cur, int, const char*, int, sqlite3_value**) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  c->row = 0;
  if (c->table) return SQLITE_OK;  // filtered again within the statement: the same rows
  auto t = std::make_unique<Table>();
  Status s;
  try {
    s = Compute(c->vtab->db.get(), c->vtab->module->which, c->vtab->module->name, t.get());
  } catch (const std::bad_alloc&) {
    return SQLITE_NOMEM;
  }
  if (!s.ok()) {
    sqlite3_free(c->vtab->base.zErrMsg);
    c->vtab->base.zErrMsg = sqlite3_mprintf("%s", s.message().c_str());
    return SQLITE_ERROR;
  }
  c->table = std::move(t);
  return SQLITE_OK;
}

int Next(sqlite3_vtab_cursor* cur) {
  reinterpret_cast<Cursor*>(cur)->row++;
  return SQLITE_OK;
}

int Eof(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  return !c->table || c->row >= c->table->rows(c->vtab->module->which) ? 1 : 0;
}

void ResultText(sqlite3_context* ctx, const std::string& s) {
  sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
}

void ResultPeer(sqlite3_context* ctx, bool has_peer, int32_t peer) {
  if (has_peer)
    sqlite3_result_int64(ctx, peer);
  else
    sqlite3_result_null(ctx);
}

int Column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  const Table& t = *c->table;
  if (c->vtab->module->which == Which::kTicks) {
    const TickRow& r = t.ticks[c->row];
    switch (col) {
      case kNegotiation:
        sqlite3_result_int64(ctx, r.negotiation);
        break;
      case kReadyRank:
        ResultPeer(ctx, r.has_peer, r.peer);
        break;
      case kTickTs:
        sqlite3_result_int64(ctx, r.ts);
        break;
      case kFromLast:
        sqlite3_result_int64(ctx, r.from_last);
        break;
      default:
        sqlite3_result_null(ctx);
    }
    return SQLITE_OK;
  }
  const NegRow& r = t.negotiations[c->row];
  switch (col) {
    case kId:
      sqlite3_result_int64(ctx, r.span.id);
      break;
    case kRank:
      sqlite3_result_int64(ctx, r.span.rank);
      break;
    case kName:
      ResultText(ctx, t.strings[r.span.name]);
      break;
    case kTensor:
      if (r.span.lane < 0)
        sqlite3_result_null(ctx);
      else
        ResultText(ctx, t.lanes[static_cast<size_t>(r.span.lane)]);
      break;
    case kTs:
      sqlite3_result_int64(ctx, r.span.ts);
      break;
    case kDur:
      sqlite3_result_int64(ctx, r.span.dur);
      break;
    case kLastRank:
      ResultPeer(ctx, r.has_peer, r.peer);
      break;
    case kAfter: {
      // `t.ts - n.ts`: SQLite's integer subtraction turns REAL when it would overflow.
      int64_t d;
      if (__builtin_sub_overflow(r.ready_ts, r.span.ts, &d))
        sqlite3_result_double(ctx,
                              static_cast<double>(r.ready_ts) - static_cast<double>(r.span.ts));
      else
        sqlite3_result_int64(ctx, d);
      break;
    }
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

int RegisterNegotiationModules(sqlite3* db) {
  static const sqlite3_module module = MakeModule();
  for (const Module& m : kModules) {
    const int rc = sqlite3_create_module_v2(db, m.name, &module, const_cast<Module*>(&m), nullptr);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

}  // namespace tracedb::query
