// Span statistics over decoded block columns. See views_spans.h; the SQL these tables replace
// is ViewsReferenceSql() in query/views/views.cc.
#include "query/views/views_spans.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "engine/util/percentile_rank.h"
#include "query/sql/events_internal.h"
#include "query/sql/vtab_module.h"
#include "query/views/exact_select.h"

namespace tracedb::query {
namespace {

using engine::DecodedBlock;
using engine::RowKind;

enum class Mode { kPerRank, kPerName };  // span_stats, name_stats_all

const char* TableName(Mode m) {
  return m == Mode::kPerRank ? "tracedb_span_stats" : "tracedb_name_stats_all";
}

// One group (a row of the result).
struct Group {
  int64_t rank = 0;   // kPerRank
  int32_t name = -1;  // index into Table::names; -1 = NULL
  int64_t sum = 0;    // exact, as sum() (overflow: an error)
  bool overflow = false;
  double rsum = 0;  // as avg() adds them up
  int64_t max = INT64_MIN;
  ExactSelect durs;            // the percentiles, in memory bounded per group (exact_select.h)
  std::vector<int64_t> ranks;  // kPerName: the distinct ranks seen, sorted
  int64_t seen_in = -1;        // kPerName: the last block index that added to `ranks`
  // Results.
  int64_t mean = 0, p50 = 0, p95 = 0, p99 = 0, nranks = 0;
};

struct Table {
  std::vector<Group> rows;
  std::vector<std::string_view> names;  // views into the catalog's strings
  events::DbCatalog catalog;            // owns the strings `names` points into
};

std::string Where(Mode m) { return std::string(TableName(m)) + ": "; }

// CAST(r AS INTEGER) for a real, as SQLite converts it: truncation, saturating at the ends.
int64_t CastToInteger(double r) {
  if (r <= static_cast<double>(INT64_MIN)) return INT64_MIN;
  if (r >= static_cast<double>(INT64_MAX)) return INT64_MAX;
  return static_cast<int64_t>(r);
}

// The durations all groups together may keep in a later pass (8 bytes each: 32 MiB).
constexpr uint64_t kCollectBudget = uint64_t{1} << 22;

Status Compute(engine::Db* db, Mode mode, std::optional<int64_t> only_rank, Table* out) {
  out->rows.clear();
  out->names.clear();
  // The names as the events table reads them: a name id the catalog has no string for is NULL.
  events::DbCatalog& cat = out->catalog;
  cat.Refresh(db);
  const size_t nstrings = cat.strings.size();
  // Per string id, its group name (ids with the same text share one), -2 until first seen.
  std::vector<int32_t> canon(nstrings, -2);
  std::unordered_map<std::string_view, int32_t> by_text;
  auto name_of = [&](uint32_t id) -> int32_t {
    if (id >= nstrings) return -1;
    int32_t& c = canon[id];
    if (c == -2) {
      const std::string_view s = cat.strings[id];
      auto [it, fresh] = by_text.try_emplace(s, static_cast<int32_t>(out->names.size()));
      if (fresh) out->names.push_back(s);
      c = it->second;
    }
    return c;
  };
  // Per rank (one for kPerName): the group of each string id (slot `nstrings` for every id
  // beyond the strings, the NULL name), -1 until looked up; and the group of each name.
  struct RankGroups {
    std::vector<int32_t> by_id;
    std::unordered_map<int32_t, int32_t> by_name;
  };
  std::unordered_map<int64_t, RankGroups> groups_of_rank;
  std::vector<Group>& groups = out->rows;

  // Every block (of the rank), decoded in one pass by the block store, which checks each
  // one's zone map and row count.
  engine::BlockStore store(db, db->path(), "main");
  engine::BlockSelection sel;
  if (only_rank) sel.ranks = {*only_rank};
  sel.order = engine::BlockSelection::Order::kBlock;
  constexpr uint32_t kWant = engine::kColKind | engine::kColName | engine::kColDur;
  constexpr uint8_t kSpan = static_cast<uint8_t>(RowKind::kSpan);
  int64_t block_index = -1;
  auto per_block = [&](const engine::BlockZoneRow& z, DecodedBlock& b) -> Status {
    ++block_index;
    const int64_t rank = z.rank;
    RankGroups& rg = groups_of_rank[mode == Mode::kPerRank ? rank : 0];
    if (rg.by_id.empty()) rg.by_id.assign(nstrings + 1, -1);
    for (size_t i = 0; i < b.n; ++i) {
      if (b.kind[i] != kSpan) continue;
      const uint32_t id = b.name[i];
      int32_t& slot = rg.by_id[id < nstrings ? id : nstrings];
      if (slot < 0) {
        // Ids with the same text (or no text) share a group.
        const int32_t name = name_of(id);
        auto [it, fresh] = rg.by_name.try_emplace(name, static_cast<int32_t>(groups.size()));
        if (fresh) {
          Group g;
          g.rank = rank;
          g.name = name;
          groups.push_back(std::move(g));
        }
        slot = it->second;
      }
      Group& g = groups[static_cast<size_t>(slot)];
      const int64_t d = b.dur[i];
      g.durs.Add(d);
      g.overflow |= __builtin_add_overflow(g.sum, d, &g.sum);
      g.rsum += static_cast<double>(d);
      g.max = std::max(g.max, d);
      if (mode == Mode::kPerName && g.seen_in != block_index) {
        g.seen_in = block_index;
        auto at = std::lower_bound(g.ranks.begin(), g.ranks.end(), rank);
        if (at == g.ranks.end() || *at != rank) g.ranks.insert(at, rank);
      }
    }
    return Status::Ok();
  };
  // Every pass reads one snapshot of the database (a read transaction, unless one is open).
  sqlite3* h = db->raw();
  const bool own_txn = sqlite3_get_autocommit(h) != 0;
  if (own_txn) {
    if (Status s = db->Exec("BEGIN"); !s.ok()) return Status::Corruption(Where(mode) + s.message());
  }
  struct EndTxn {
    engine::Db* db;
    bool own;
    ~EndTxn() {
      if (own) (void)db->Exec("COMMIT");
    }
  } end_txn{db, own_txn};
  if (Status s = store.ForEachDecoded(sel, kWant, per_block); !s.ok()) {
    return Status::Corruption(Where(mode) + s.message());
  }
  // The percentiles: a group too large to select in place asks for further passes over its
  // durations, each keeping only a bounded part of them (exact_select.h).
  std::vector<size_t> pending;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    if (g.overflow) return Status::InvalidArgument("integer overflow");  // as sum() says
    const uint64_t n = g.durs.count();
    g.mean = CastToInteger(g.rsum / static_cast<double>(n));
    const auto sn = static_cast<size_t>(n);
    const uint64_t ks[3] = {engine::NearestRankPercent(50, sn) - 1,
                            engine::NearestRankPercent(95, sn) - 1,
                            engine::NearestRankPercent(99, sn) - 1};
    if (g.durs.Want(ks, 3)) pending.push_back(gi);
    g.nranks = static_cast<int64_t>(g.ranks.size());
  }
  while (!pending.empty()) {
    // The ranges that fit a budget shared by all groups are kept whole this pass (most of them,
    // so that a typical job takes two passes); the larger ones are counted finer.
    std::vector<uint64_t> sizes;
    for (size_t gi : pending) groups[gi].durs.AddRangeSizes(&sizes);
    const uint64_t limit = ExactSelect::CollectLimit(std::move(sizes), kCollectBudget);
    for (size_t gi : pending) groups[gi].durs.Plan(limit);
    // Only the rows of pending groups are fed.
    std::vector<uint8_t> wants(groups.size(), 0);
    for (size_t gi : pending) wants[gi] = 1;
    auto again = [&](const engine::BlockZoneRow& z, DecodedBlock& b) -> Status {
      auto it = groups_of_rank.find(mode == Mode::kPerRank ? z.rank : 0);
      if (it == groups_of_rank.end()) return Status::Ok();  // checked by the counts below
      const std::vector<int32_t>& by_id = it->second.by_id;
      for (size_t i = 0; i < b.n; ++i) {
        if (b.kind[i] != kSpan) continue;
        const uint32_t id = b.name[i];
        const int32_t slot = by_id[id < nstrings ? id : nstrings];
        if (slot >= 0 && wants[static_cast<size_t>(slot)])
          groups[static_cast<size_t>(slot)].durs.Feed(b.dur[i]);
      }
      return Status::Ok();
    };
    if (Status s = store.ForEachDecoded(sel, kWant, again); !s.ok()) {
      return Status::Corruption(Where(mode) + s.message());
    }
    std::vector<size_t> next;
    for (size_t gi : pending) {
      StatusOr<bool> more = groups[gi].durs.EndPass();
      if (!more.ok()) return Status::Corruption(Where(mode) + more.status().message());
      if (*more) next.push_back(gi);
    }
    pending.swap(next);
  }
  for (Group& g : groups) {
    g.p50 = g.durs.result(0);
    g.p95 = g.durs.result(1);
    g.p99 = g.durs.result(2);
  }
  // GROUP BY's order: rank, then the name (NULL first, then text by bytes, BINARY).
  const std::vector<std::string_view>& names = out->names;
  std::sort(groups.begin(), groups.end(), [&](const Group& x, const Group& y) {
    if (mode == Mode::kPerRank && x.rank != y.rank) return x.rank < y.rank;
    if (x.name < 0 || y.name < 0) return x.name < 0 && y.name >= 0;
    return names[static_cast<size_t>(x.name)] < names[static_cast<size_t>(y.name)];
  });
  return Status::Ok();
}

// ---- the virtual tables ----

// Columns read from events keep their declared types; CAST(avg(dur) AS INTEGER) has INTEGER
// affinity; the other aggregates have none, as in SQL.
constexpr const char* kPerRankSchema =
    "CREATE TABLE x(rank INTEGER, name TEXT, count, total_ns, mean_ns INTEGER, p50_ns, p95_ns, "
    "p99_ns, max_ns)";
constexpr const char* kPerNameSchema =
    "CREATE TABLE x(name TEXT, count, ranks, total_ns, mean_ns INTEGER, p50_ns, p95_ns, p99_ns, "
    "max_ns)";
enum Col { kRank, kName, kCount, kRanks, kTotal, kMean, kP50, kP95, kP99, kMax };
// The columns of each schema, in order.
constexpr Col kPerRankCols[] = {kRank, kName, kCount, kTotal, kMean, kP50, kP95, kP99, kMax};
constexpr Col kPerNameCols[] = {kName, kCount, kRanks, kTotal, kMean, kP50, kP95, kP99, kMax};

struct Vtab {
  sqlite3_vtab base;  // must be first
  std::unique_ptr<engine::Db> db;
  Mode mode = Mode::kPerRank;
};

struct Cursor {
  sqlite3_vtab_cursor base;  // must be first
  Vtab* vtab = nullptr;
  std::unique_ptr<Table> table;  // computed by xFilter, kept while its argument is the same
  std::optional<int64_t> table_rank;
  bool table_none = false;  // the argument matches no rank (no rows)
  size_t row = 0;
};

int Connect(sqlite3* db, void* aux, int, const char* const*, sqlite3_vtab** out, char**) {
  const Mode mode = aux != nullptr ? Mode::kPerName : Mode::kPerRank;
  return NewVtab<Vtab>(db, mode == Mode::kPerRank ? kPerRankSchema : kPerNameSchema,
                       TableName(mode), out, [mode](Vtab* v) { v->mode = mode; });
}

int BestIndex(sqlite3_vtab* tab, sqlite3_index_info* info) {
  const Mode mode = reinterpret_cast<Vtab*>(tab)->mode;
  // The whole table is computed, once per statement and argument. On tracedb_span_stats,
  // `rank = x` limits it to that rank's blocks (SQLite checks it again: omit stays 0).
  info->estimatedCost = 1e9;
  info->estimatedRows = 1000;
  if (mode == Mode::kPerRank) {
    for (int i = 0; i < info->nConstraint; ++i) {
      const auto& c = info->aConstraint[i];
      if (c.usable && c.iColumn == 0 && c.op == SQLITE_INDEX_CONSTRAINT_EQ) {
        info->aConstraintUsage[i].argvIndex = 1;
        info->idxNum = 1;
        info->estimatedCost = 1e8;
        info->estimatedRows = 100;
        break;
      }
    }
  }
  // Rows come sorted by (rank, name) or name, ascending, names compared by bytes.
  // (SQLite shows no ORDER BY term under another collation than the column's, BINARY.)
  const bool ordered =
      mode == Mode::kPerRank ? OrderedPrefix(info, {0, 1}) : OrderedPrefix(info, {0});
  if (ordered) info->orderByConsumed = 1;
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* cur, int idx_num, const char*, int argc, sqlite3_value** argv) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  c->row = 0;
  std::optional<int64_t> rank;
  bool none = false;
  if (idx_num == 1 && argc >= 1) {
    // `rank = x` as SQLite compares an INTEGER column: a numeric text as its number, an integral
    // real as that integer; anything else equals no rank.
    sqlite3_value* v = argv[0];
    const int t = sqlite3_value_numeric_type(v);
    if (t == SQLITE_INTEGER) {
      rank = sqlite3_value_int64(v);
    } else if (t == SQLITE_FLOAT) {
      const double d = sqlite3_value_double(v);
      if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 &&
          static_cast<double>(static_cast<int64_t>(d)) == d)
        rank = static_cast<int64_t>(d);
      else
        none = true;
    } else {
      none = true;
    }
  }
  c->table_none = none;
  if (none) return SQLITE_OK;
  if (c->table && c->table_rank == rank) return SQLITE_OK;  // the same rows
  auto t = std::make_unique<Table>();
  Status s;
  try {
    s = Compute(c->vtab->db.get(), c->vtab->mode, rank, t.get());
  } catch (const std::bad_alloc&) {
    return SQLITE_NOMEM;
  }
  if (!s.ok()) {
    sqlite3_free(c->vtab->base.zErrMsg);
    c->vtab->base.zErrMsg = sqlite3_mprintf("%s", s.message().c_str());
    c->table.reset();
    return SQLITE_ERROR;
  }
  c->table = std::move(t);
  c->table_rank = rank;
  return SQLITE_OK;
}

int Next(sqlite3_vtab_cursor* cur) {
  reinterpret_cast<Cursor*>(cur)->row++;
  return SQLITE_OK;
}

int Eof(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  return c->table_none || !c->table || c->row >= c->table->rows.size() ? 1 : 0;
}

int Column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  const Group& g = c->table->rows[c->row];
  if (col < 0 || col >= 9) {
    sqlite3_result_null(ctx);
    return SQLITE_OK;
  }
  switch (c->vtab->mode == Mode::kPerRank ? kPerRankCols[col] : kPerNameCols[col]) {
    case kRank:
      sqlite3_result_int64(ctx, g.rank);
      break;
    case kName:
      if (g.name < 0) {
        sqlite3_result_null(ctx);
      } else {
        const std::string_view s = c->table->names[static_cast<size_t>(g.name)];
        sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
      }
      break;
    case kCount:
      sqlite3_result_int64(ctx, static_cast<int64_t>(g.durs.count()));
      break;
    case kRanks:
      sqlite3_result_int64(ctx, g.nranks);
      break;
    case kTotal:
      sqlite3_result_int64(ctx, g.sum);
      break;
    case kMean:
      sqlite3_result_int64(ctx, g.mean);
      break;
    case kP50:
      sqlite3_result_int64(ctx, g.p50);
      break;
    case kP95:
      sqlite3_result_int64(ctx, g.p95);
      break;
    case kP99:
      sqlite3_result_int64(ctx, g.p99);
      break;
    case kMax:
      sqlite3_result_int64(ctx, g.max);
      break;
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

int RegisterSpanStatsModules(sqlite3* db) {
  static const sqlite3_module module = MakeModule();
  static int per_name_tag = 0;  // any non-null pointer selects name_stats_all
  int rc = sqlite3_create_module_v2(db, TableName(Mode::kPerRank), &module, nullptr, nullptr);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_module_v2(db, TableName(Mode::kPerName), &module, &per_name_tag, nullptr);
  return rc;
}

}  // namespace tracedb::query
