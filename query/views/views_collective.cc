// Collective matching over decoded block columns. See views_collective.h; the SQL this table
// replaces is ViewsReferenceSql() in query/views/views.cc.
#include "query/views/views_collective.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <numeric>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/db/block_store.h"
#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "query/sql/vtab_module.h"
#include "query/views/comm_match.h"
#include "query/views/negotiation_rows.h"

namespace tracedb::query {
namespace {

using engine::DecodedBlock;
using engine::EventArgs;
using engine::RowKind;

constexpr const char* kTable = "tracedb_collective_arrivals";

// One arrival (a row of collective_arrivals).
struct Arrival {
  int64_t rank;
  int32_t name;  // index into Table::names; -1 = NULL
  bool has_comm, has_dur;
  int64_t comm, seq, id, ts, dur, end_ts;
  int64_t late = 0, wait = 0, ranks = 0, last_rank = 0;
};

struct Table {
  std::vector<Arrival> rows;
  std::vector<std::string> names;
};

std::string Where() { return std::string(kTable) + ": "; }

Status Compute(engine::Db* db, Table* out) {
  out->rows.clear();
  out->names.clear();
  // The strings the SQL compares with: categories, RANK_READY and the negotiation spans' names.
  std::vector<std::string> strings;
  // strings has no unique key on the text: every id of a category counts (id 0 is no category).
  std::unordered_set<uint32_t> cat_mpi, cat_comm, cat_nccl;
  std::unordered_set<uint32_t> ready, negotiations;
  // The store reads the dictionary as the events table does: an id past DenseIdLimit names no
  // event we read (engine/db/block_check.h), whatever a hostile file claims.
  engine::BlockStore store(db, {}, "main");
  auto last_id = store.ForEachString(-1, [&](int64_t id, std::string_view text) {
    if (id > UINT32_MAX) return;
    const auto u = static_cast<uint32_t>(id);
    std::string s(text);
    if (u != 0 && s == "mpi") cat_mpi.insert(u);
    if (u != 0 && s == "comm") cat_comm.insert(u);
    if (u != 0 && s == "nccl") cat_nccl.insert(u);
    if (s == "RANK_READY") ready.insert(u);
    if (negotiation::IsNegotiationName(s)) negotiations.insert(u);
    if (strings.size() <= u) strings.resize(u + 1);
    strings[u] = std::move(s);
  });
  if (!last_id.ok()) return Status::Corruption(Where() + last_id.status().message());
  // As the events table: a name id without a string reads NULL, category 0 or "" reads NULL.
  // Per string id, what it is (a lookup per decoded row, no hashing).
  enum : uint8_t { kMpiOrComm = 1, kNccl = 2, kReady = 4, kNegotiation = 8 };
  std::vector<uint8_t> what(strings.size(), 0);
  for (const auto* set : {&cat_mpi, &cat_comm})
    for (uint32_t c : *set) what[c] |= kMpiOrComm;
  for (uint32_t c : cat_nccl) what[c] |= kNccl;
  for (uint32_t n : ready) what[n] |= kReady;
  for (uint32_t n : negotiations) what[n] |= kNegotiation;
  auto what_of = [&](uint32_t id) -> uint8_t { return id < what.size() ? what[id] : 0; };
  // The blocks holding an event of these categories or with these names, in block order.
  engine::BlockSelection sel;
  sel.order = engine::BlockSelection::Order::kBlock;
  for (const auto* set : {&cat_mpi, &cat_comm, &cat_nccl})
    for (uint32_t c : *set) sel.any_cats.push_back(c);
  for (const auto* set : {&ready, &negotiations})
    for (uint32_t n : *set) sel.names.push_back(n);
  if (sel.any_cats.empty() && ready.empty()) return Status::Ok();

  // Index of a name in out->names, one entry per distinct string.
  std::unordered_map<std::string, int32_t> name_index;
  auto intern = [&](const std::string& s) {
    auto [it, fresh] = name_index.try_emplace(s, static_cast<int32_t>(out->names.size()));
    if (fresh) out->names.push_back(s);
    return it->second;
  };
  std::vector<int32_t> name_of_id;  // string id -> index, or -2 = not interned yet
  auto name_idx = [&](uint32_t id) -> int32_t {
    if (id >= strings.size()) return -1;
    if (name_of_id.size() <= id) name_of_id.resize(strings.size(), -2);
    if (name_of_id[id] == -2) name_of_id[id] = intern(strings[id]);
    return name_of_id[id];
  };
  std::vector<negotiation::Tick> ticks;
  std::unordered_map<int64_t, int32_t> negotiation_name;  // span id -> name after NEGOTIATE_
  constexpr uint32_t kWant = engine::kColTrack | engine::kColK | engine::kColParent |
                             engine::kColKind | engine::kColName | engine::kColCat |
                             engine::kColTs | engine::kColDur | engine::kColArgs;
  // The store checks each block's zone map, that it decodes and that it holds the rows its zone
  // map declares.
  auto visit = [&](const engine::BlockZoneRow& z, DecodedBlock& b) {
    const int64_t rank = z.rank;
    for (size_t i = 0; i < b.n; ++i) {
      const uint32_t mask = b.arg_mask[i];
      const int64_t id = (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.k[i]);
      const uint32_t c = b.cat[i];
      const auto kind = static_cast<RowKind>(b.kind[i]);
      const uint8_t cat_what = what_of(c), name_what = what_of(b.name[i]);
      if ((mask & EventArgs::kSeq) &&
          ((cat_what & kMpiOrComm) || ((cat_what & kNccl) && kind == RowKind::kInstant))) {
        Arrival a;
        a.rank = rank;
        a.name = name_idx(b.name[i]);
        a.has_comm = (mask & EventArgs::kComm) != 0;
        a.comm = a.has_comm ? static_cast<int64_t>(b.comm[i]) : 0;
        a.seq = static_cast<int64_t>(b.seq[i]);
        a.id = id;
        a.ts = b.ts[i];
        a.has_dur = true;
        a.dur = b.dur[i];
        // As events.end_ts: ts + dur (wrapping instead of undefined on overflow).
        a.end_ts =
            static_cast<int64_t>(static_cast<uint64_t>(b.ts[i]) + static_cast<uint64_t>(b.dur[i]));
        out->rows.push_back(a);
      }
      // A tick with a NULL peer is no arrival (the SQL's `t.peer IS NOT NULL`).
      negotiation::Tick tick;
      if ((name_what & kReady) && negotiation::TickAt(b, i, &tick) && tick.has_peer)
        ticks.push_back(tick);
      if (kind == RowKind::kSpan && (name_what & kNegotiation))
        negotiation_name.emplace(id, intern(strings[b.name[i]].substr(10)));
    }
    return Status::Ok();
  };
  Status walk = store.ForEachDecoded(sel, kWant, visit);
  if (!walk.ok()) return Status::Corruption(Where() + walk.message());
  // Horovod ticks: one arrival of rank `peer` at the negotiation (comm 0, seq = its id).
  for (const negotiation::Tick& t : ticks) {
    auto it = negotiation_name.find(t.parent);
    if (it == negotiation_name.end()) continue;
    Arrival a;
    comm_match::SetTickArrival(&a, t.peer, it->second, t.parent, t.id, t.ts);
    a.dur = a.end_ts = 0;
    out->rows.push_back(a);
  }
  // Partitions by (comm, seq), NULL comm first; each by ts DESC, rank (first_value's order):
  // the one matcher's (comm_match.h).
  std::vector<Arrival>& r = out->rows;
  comm_match::PartitionArrivals(&r, [&](size_t lo, size_t hi) {
    const int64_t max_ts = r[lo].ts, min_ts = r[hi - 1].ts, last = r[lo].rank;
    for (size_t i = lo; i < hi; ++i) {
      r[i].late = r[i].ts - min_ts;
      r[i].wait = max_ts - r[i].ts;
      r[i].ranks = static_cast<int64_t>(hi - lo);
      r[i].last_rank = last;
    }
  });
  return Status::Ok();
}

// ---- the virtual table ----

// Columns read from events keep their declared types; the window results have none, as in SQL.
constexpr const char* kSchema =
    "CREATE TABLE x(rank INTEGER, name TEXT, comm INTEGER, seq INTEGER, id INTEGER, ts INTEGER, "
    "dur INTEGER, end_ts INTEGER, late_ns, wait_ns, ranks, last_rank)";
enum Col { kRank, kName, kComm, kSeq, kId, kTs, kDur, kEndTs, kLate, kWait, kRanks, kLastRank };

struct Vtab {
  sqlite3_vtab base;  // must be first
  std::unique_ptr<engine::Db> db;
};

struct Cursor {
  sqlite3_vtab_cursor base;  // must be first
  Vtab* vtab = nullptr;
  std::unique_ptr<Table> table;  // computed by the first xFilter of the statement
  size_t row = 0;
};

int Connect(sqlite3* db, void*, int, const char* const*, sqlite3_vtab** out, char**) {
  return NewVtab<Vtab>(db, kSchema, kTable, out);
}

int BestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  // Nothing is pushed down: the whole table is computed, once per statement. Rows come in
  // (comm, seq) order, so an ORDER BY comm[, seq] (ascending) or a GROUP BY of those columns
  // needs no sort.
  info->estimatedCost = 1e9;
  info->estimatedRows = 1000000;
  const int n = info->nOrderBy;
  bool ordered = OrderedPrefix(info, {kComm, kSeq});
  if (!ordered && n == 2 && sqlite3_vtab_distinct(info) == 1) {
    // GROUP BY seq, comm: equal keys are adjacent all the same.
    const auto& a = info->aOrderBy[0];
    const auto& b = info->aOrderBy[1];
    ordered =
        (a.iColumn == kComm && b.iColumn == kSeq) || (a.iColumn == kSeq && b.iColumn == kComm);
  }
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
    s = Compute(c->vtab->db.get(), t.get());
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
  return !c->table || c->row >= c->table->rows.size() ? 1 : 0;
}

int Column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  const Arrival& a = c->table->rows[c->row];
  switch (col) {
    case kRank:
      sqlite3_result_int64(ctx, a.rank);
      break;
    case kName:
      if (a.name < 0) {
        sqlite3_result_null(ctx);
      } else {
        const std::string& s = c->table->names[static_cast<size_t>(a.name)];
        sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
      }
      break;
    case kComm:
      if (a.has_comm)
        sqlite3_result_int64(ctx, a.comm);
      else
        sqlite3_result_null(ctx);
      break;
    case kSeq:
      sqlite3_result_int64(ctx, a.seq);
      break;
    case kId:
      sqlite3_result_int64(ctx, a.id);
      break;
    case kTs:
      sqlite3_result_int64(ctx, a.ts);
      break;
    case kDur:
    case kEndTs:
      if (a.has_dur)
        sqlite3_result_int64(ctx, col == kDur ? a.dur : a.end_ts);
      else
        sqlite3_result_null(ctx);
      break;
    case kLate:
      sqlite3_result_int64(ctx, a.late);
      break;
    case kWait:
      sqlite3_result_int64(ctx, a.wait);
      break;
    case kRanks:
      sqlite3_result_int64(ctx, a.ranks);
      break;
    case kLastRank:
      sqlite3_result_int64(ctx, a.last_rank);
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

int RegisterCollectiveModules(sqlite3* db) {
  static const sqlite3_module module = MakeModule();
  return sqlite3_create_module_v2(db, kTable, &module, nullptr, nullptr);
}

}  // namespace tracedb::query
