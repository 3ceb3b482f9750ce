// The `events` virtual table. See events_vtab.h; the SQL surface is documented in docs/sql.md.
#include "query/events_vtab.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/event_block.h"
#include "engine/sqlite.h"

namespace tracedb::query {
namespace {

using engine::Db;
using engine::DecodedBlock;
using engine::EventArgs;
using engine::RowKind;
using engine::Stmt;

enum Col : int {
  kId,
  kRank,
  kTid,
  kTrack,
  kTrackName,
  kLane,
  kName,
  kCat,
  kKind,
  kTs,
  kDur,
  kEndTs,
  kDepth,
  kParent,
  kBytes,
  kPeer,
  kTag,
  kComm,
  kSeq,
  kFlow,
  kValue,
  kStep,
  kArgs,
  kNumCols
};

constexpr const char* kSchema =
    "CREATE TABLE x(id INTEGER, rank INTEGER, tid INTEGER, track INTEGER, track_name TEXT, "
    "lane TEXT, name TEXT, cat TEXT, kind TEXT, ts INTEGER, dur INTEGER, end_ts INTEGER, "
    "depth INTEGER, parent INTEGER, bytes INTEGER, peer INTEGER, tag INTEGER, comm INTEGER, "
    "seq INTEGER, flow INTEGER, value REAL, step INTEGER, args TEXT)";

// Operators we push down, one letter each in idxStr.
enum Op : char {
  kEq = '=',
  kGt = '>',
  kGe = 'g',
  kLt = '<',
  kLe = 'l',
  kLimit = 'L',
  kOffset = 'O'
};

// The database's dictionaries, refreshed when they grow (a compaction may be appending).
struct DbCatalog {
  std::deque<std::string> strings;  // index = id (stable addresses: results use SQLITE_STATIC)
  std::unordered_map<std::string_view, uint32_t> ids;
  struct Track {
    int32_t rank = 0;
    int64_t tid = -1;
    bool lane = false;
    std::string name;
  };
  std::vector<Track> tracks;
  std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>> steps;  // rank -> (ts, step)
  int64_t max_string = 0, max_track = 0, step_count = -1;

  void Refresh(Db* db) {
    auto ms = db->QueryInt("SELECT max(id) FROM strings", 0);
    if (ms.ok() && *ms > max_string) {
      auto st = db->Prepare("SELECT id, s FROM strings WHERE id > ?1 ORDER BY id");
      if (st.ok()) {
        st->Bind(1, max_string);
        while (true) {
          auto row = st->Step();
          if (!row.ok() || !*row) break;
          const auto id = static_cast<size_t>(st->Int(0));
          if (strings.size() <= id) strings.resize(id + 1);
          strings[id] = std::string(st->Text(1));
          ids[strings[id]] = static_cast<uint32_t>(id);
        }
      }
      max_string = *ms;
    }
    auto mt = db->QueryInt("SELECT max(track) FROM tracks", 0);
    if (mt.ok() && *mt > max_track) {
      auto st = db->Prepare("SELECT track, rank, tid, kind, name FROM tracks WHERE track > ?1");
      if (st.ok()) {
        st->Bind(1, max_track);
        while (true) {
          auto row = st->Step();
          if (!row.ok() || !*row) break;
          const auto id = static_cast<size_t>(st->Int(0));
          if (tracks.size() <= id) tracks.resize(id + 1);
          Track& t = tracks[id];
          t.rank = static_cast<int32_t>(st->Int(1));
          t.tid = st->IsNull(2) ? -1 : st->Int(2);
          t.lane = st->Text(3) != "thread";
          t.name = std::string(st->Text(4));
        }
      }
      max_track = *mt;
    }
    auto sc = db->QueryInt("SELECT count(*) FROM steps", 0);
    if (sc.ok() && *sc != step_count) {
      steps.clear();
      auto st = db->Prepare("SELECT rank, ts, step FROM steps ORDER BY rank, ts");
      if (st.ok()) {
        while (true) {
          auto row = st->Step();
          if (!row.ok() || !*row) break;
          steps[static_cast<int32_t>(st->Int(0))].emplace_back(st->Int(1), st->Int(2));
        }
      }
      step_count = *sc;
    }
  }
  std::optional<uint32_t> Id(std::string_view s) const {
    auto it = ids.find(s);
    if (it == ids.end()) return std::nullopt;
    return it->second;
  }
  // The step in effect at `ts` on `rank`, if any.
  std::optional<int64_t> StepAt(int32_t rank, int64_t ts) const {
    auto it = steps.find(rank);
    if (it == steps.end()) return std::nullopt;
    const auto& v = it->second;
    auto p = std::upper_bound(v.begin(), v.end(), ts,
                              [](int64_t t, const auto& e) { return t < e.first; });
    if (p == v.begin()) return std::nullopt;
    return std::prev(p)->second;
  }
};

struct EventsVtab {
  sqlite3_vtab base;  // must be first
  std::unique_ptr<Db> db;
  DbCatalog catalog;
  Stmt block_data;  // "SELECT data FROM blocks WHERE block = ?1", prepared once (LoadBlock)
};

// A set of integers [lo, hi] that a column must fall in. `set` once any constraint applies
// (so that a nullable column, parent or step, excludes NULL even when the range is full).
struct Range {
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  bool set = false;
  void Apply(char op, int64_t v) {
    set = true;
    switch (op) {
      case kEq:
        lo = std::max(lo, v);
        hi = std::min(hi, v);
        break;
      case kGt:
        lo = std::max(lo, v == INT64_MAX ? v : v + 1);
        if (v == INT64_MAX) hi = INT64_MIN;
        break;
      case kGe:
        lo = std::max(lo, v);
        break;
      case kLt:
        hi = std::min(hi, v == INT64_MIN ? v : v - 1);
        if (v == INT64_MIN) lo = INT64_MAX;
        break;
      case kLe:
        hi = std::min(hi, v);
        break;
      default:
        break;
    }
  }
  bool Contains(int64_t v) const { return v >= lo && v <= hi; }
  bool Empty() const { return lo > hi; }
  bool All() const { return !set; }
  // `col op d` for a real d (SQLite compares integers and reals exactly).
  void ApplyReal(char op, double d) {
    constexpr double kTwo63 = 9223372036854775808.0;
    if (std::isnan(d)) {
      Nothing();
      return;
    }
    switch (op) {
      case kEq:
        if (d != std::floor(d) || d >= kTwo63 || d < -kTwo63)
          Nothing();
        else
          Apply(kEq, static_cast<int64_t>(d));
        return;
      case kGt:
      case kGe: {
        // col > d  <=>  col >= floor(d) + 1;  col >= d  <=>  col >= ceil(d)
        const double b = op == kGt ? std::floor(d) + 1 : std::ceil(d);
        if (b >= kTwo63)
          Nothing();
        else
          Apply(kGe, b < -kTwo63 ? INT64_MIN : static_cast<int64_t>(b));
        return;
      }
      case kLt:
      case kLe: {
        const double b = op == kLt ? std::ceil(d) - 1 : std::floor(d);
        if (b < -kTwo63)
          Nothing();
        else
          Apply(kLe, b >= kTwo63 ? INT64_MAX : static_cast<int64_t>(b));
        return;
      }
      default:
        return;
    }
  }
  // `col op t` for a text or blob t: SQLite orders every number before every text and blob.
  void ApplyText(char op) {
    if (op == kLt || op == kLe)
      Apply(kGe, INT64_MIN);  // true for every non-NULL value
    else
      Nothing();
  }
  void Nothing() {
    set = true;
    lo = INT64_MAX;
    hi = INT64_MIN;
  }
};

// The block column group each SQL column reads.
uint32_t ColumnGroup(int col) {
  switch (col) {
    case kId:
      return engine::kColK;
    case kName:
      return engine::kColName;
    case kCat:
      return engine::kColCat;
    case kKind:
      return engine::kColKind;
    case kTs:
    case kEndTs:
    case kStep:
      return engine::kColTs;
    case kDur:
      return engine::kColDur;
    case kDepth:
      return engine::kColDepth;
    case kParent:
      return engine::kColParent;
    case kBytes:
    case kPeer:
    case kTag:
    case kComm:
    case kSeq:
    case kFlow:
    case kArgs:
      return engine::kColArgs;
    case kValue:
      return engine::kColValue;
    default:
      return engine::kColTrack;
  }
}

struct Constraints {
  bool none = false;  // a constraint no row can meet (e.g. an unknown name)
  Range rank, ts, end, dur, track, step, id, parent;
  std::optional<uint32_t> name, cat;
  std::optional<uint8_t> kind;
  int64_t limit = -1, offset = 0;
  bool top_by_dur = false;
  std::map<int32_t, Range> step_ts;          // per rank: the ts range of the wanted steps
  uint32_t filter_cols = engine::kColTrack;  // the block columns the constraints read
  uint32_t used_cols = engine::kColTrack | engine::kColK;  // columns the statement reads (+ rowid)
};

struct BlockRef {
  int64_t block;
  int32_t rank;
  int64_t max_dur;
};

struct TopRow {
  int64_t dur;
  int64_t seq;  // tie-break: discovery order
  int32_t rank;
  int64_t block;
  uint32_t index;                          // row in the block
  engine::Row row;                         // filled for the winners only
  bool operator<(const TopRow& o) const {  // min-heap on dur via std::priority_queue
    return dur != o.dur ? dur > o.dur : seq < o.seq;
  }
};

struct EventsCursor {
  sqlite3_vtab_cursor base;  // must be first
  EventsVtab* vtab = nullptr;
  Constraints f;
  std::vector<BlockRef> blocks;
  size_t next_block = 0;
  DecodedBlock blk;
  int32_t blk_rank = 0;
  size_t row = 0;
  bool eof = true;
  // Top-n mode: rows computed in xFilter, served in order.
  bool top_mode = false;
  std::vector<TopRow> top;
  size_t top_pos = 0;
};

int Fail(sqlite3_vtab* vtab, const std::string& msg) {
  sqlite3_free(vtab->zErrMsg);
  vtab->zErrMsg = sqlite3_mprintf("%s", msg.c_str());
  return SQLITE_ERROR;
}

int Connect(sqlite3* db, void*, int, const char* const*, sqlite3_vtab** out, char** err) {
  int rc = sqlite3_declare_vtab(db, kSchema);
  if (rc != SQLITE_OK) return rc;
  auto* v = new (std::nothrow) EventsVtab();
  if (v == nullptr) return SQLITE_NOMEM;
  std::memset(&v->base, 0, sizeof(v->base));
  v->db = Db::Borrow(db, "events");
  *out = &v->base;
  return SQLITE_OK;
}

int Disconnect(sqlite3_vtab* vtab) {
  delete reinterpret_cast<EventsVtab*>(vtab);
  return SQLITE_OK;
}

bool PushableColumn(int col) {
  switch (col) {
    case kId:
    case kRank:
    case kTrack:
    case kName:
    case kCat:
    case kKind:
    case kTs:
    case kDur:
    case kEndTs:
    case kStep:
    case kParent:
      return true;
    default:
      return false;
  }
}

// The integer value of a LIMIT or OFFSET known at planning time (a literal), if any.
std::optional<int64_t> PlanTimeInt(sqlite3_index_info* info, int i) {
  sqlite3_value* v = nullptr;
  if (sqlite3_vtab_rhs_value(info, i, &v) != SQLITE_OK || v == nullptr) return std::nullopt;
  if (sqlite3_value_type(v) != SQLITE_INTEGER) return std::nullopt;
  return sqlite3_value_int64(v);
}

// Plans a scan. The promises made to SQLite (docs/sql.md, "What is promised to SQLite"):
// - a constraint with omit=1 is checked exactly by xFilter (integer columns); text equality
//   (name, cat, kind) is checked by string id and re-checked by SQLite (omit=0), only under
//   the BINARY collation;
// - LIMIT and OFFSET are never omitted: SQLite applies them itself. Their values are taken
//   as a hint (the top-n search keeps limit + offset rows) only when every other constraint
//   of the WHERE clause is pushed down and checked exactly, so no row the search keeps can be
//   rejected afterwards;
// - ORDER BY dur DESC is claimed only for the top-n search, with a LIMIT that is a
//   non-negative literal (known here), and xFilter sorts every row it returns in that mode
//   whatever LIMIT it receives.
int BestIndex(sqlite3_vtab* tab, sqlite3_index_info* info) {
  std::string idx;
  int argv = 0;
  double cost = 1e7;
  bool all_pushed = true;  // every WHERE constraint (LIMIT/OFFSET aside) is checked by xFilter
  int limit_i = -1, offset_i = -1;
  for (int i = 0; i < info->nConstraint; ++i) {
    const auto& c = info->aConstraint[i];
    // (SQLite marks LIMIT/OFFSET unusable when it retries a plan without them, e.g. with IN.)
    if (c.op == SQLITE_INDEX_CONSTRAINT_LIMIT) {
      if (c.usable) limit_i = i;
      continue;
    }
    if (c.op == SQLITE_INDEX_CONSTRAINT_OFFSET) {
      if (c.usable)
        offset_i = i;
      else
        all_pushed = false;  // an OFFSET we cannot see: no hint at all
      continue;
    }
    if (!c.usable) {
      all_pushed = false;
      continue;
    }
    char op = 0;
    switch (c.op) {
      case SQLITE_INDEX_CONSTRAINT_EQ:
        op = kEq;
        break;
      case SQLITE_INDEX_CONSTRAINT_GT:
        op = kGt;
        break;
      case SQLITE_INDEX_CONSTRAINT_GE:
        op = kGe;
        break;
      case SQLITE_INDEX_CONSTRAINT_LT:
        op = kLt;
        break;
      case SQLITE_INDEX_CONSTRAINT_LE:
        op = kLe;
        break;
      default:
        break;
    }
    const bool text_col = c.iColumn == kName || c.iColumn == kCat || c.iColumn == kKind;
    if (op == 0 || !PushableColumn(c.iColumn) || (text_col && op != kEq)) {
      all_pushed = false;
      continue;
    }
    if (text_col) {
      // Equality of string ids is BINARY equality; any other collation stays with SQLite.
      const char* coll = sqlite3_vtab_collation(info, i);
      if (coll != nullptr && sqlite3_stricmp(coll, "BINARY") != 0) {
        all_pushed = false;
        continue;
      }
    }
    idx += op;
    idx += static_cast<char>('A' + c.iColumn);
    info->aConstraintUsage[i].argvIndex = ++argv;
    // Text equality is checked by id; SQLite re-checks it (it is exact, see Filter).
    info->aConstraintUsage[i].omit = text_col ? 0 : 1;
    if (c.iColumn == kName)
      cost /= 200;
    else if (c.iColumn == kCat || c.iColumn == kKind)
      cost /= 4;
    else if (c.iColumn == kRank && op == kEq)
      cost /= 8;
    else if (c.iColumn == kId && op == kEq)
      cost /= 1000;
    else
      cost /= 3;
  }
  // ORDER BY dur DESC with a LIMIT that is a non-negative literal, and every constraint
  // pushed down: a top-n search, returned in order. LIMIT and OFFSET are passed as a hint (the
  // search keeps limit + offset rows) and never omitted: SQLite still counts and skips rows.
  if (limit_i >= 0 && all_pushed && info->nOrderBy == 1 && info->aOrderBy[0].iColumn == kDur &&
      info->aOrderBy[0].desc) {
    const std::optional<int64_t> lim = PlanTimeInt(info, limit_i);
    const std::optional<int64_t> off =
        offset_i >= 0 ? PlanTimeInt(info, offset_i) : std::optional<int64_t>(0);
    if (lim && *lim >= 0 && off) {
      idx += kLimit;
      idx += '-';
      info->aConstraintUsage[limit_i].argvIndex = ++argv;
      if (offset_i >= 0) {
        idx += kOffset;
        idx += '-';
        info->aConstraintUsage[offset_i].argvIndex = ++argv;
      }
      idx += "T-";
      info->orderByConsumed = 1;
      cost /= 1000;
    }
  }
  // The columns the statement reads: the top-n search materialises only those.
  info->idxNum = static_cast<int>(info->colUsed & 0x7fffffff);
  info->idxStr = sqlite3_mprintf("%s", idx.c_str());
  info->needToFreeIdxStr = 1;
  info->estimatedCost = cost;
  info->estimatedRows = static_cast<sqlite3_int64>(std::max(1.0, cost));
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
  delete reinterpret_cast<EventsCursor*>(cur);
  return SQLITE_OK;
}

// ---- per-row and per-block tests ----

bool RowMatches(const EventsCursor& c, const DecodedBlock& b, size_t i, int32_t rank) {
  const Constraints& f = c.f;
  if (f.name && b.name[i] != *f.name) return false;
  if (f.cat && b.cat[i] != *f.cat) return false;
  if (f.kind && b.kind[i] != *f.kind) return false;
  // Only the columns a constraint reads are decoded (Constraints::filter_cols).
  if (!f.track.Contains(b.track[i])) return false;
  if (!f.dur.All() && !f.dur.Contains(b.dur[i])) return false;
  if (!f.ts.All() && !f.ts.Contains(b.ts[i])) return false;
  if (!f.end.All() && !f.end.Contains(b.ts[i] + b.dur[i])) return false;
  if (!f.id.All()) {
    const int64_t id = (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.k[i]);
    if (!f.id.Contains(id)) return false;
  }
  if (!f.parent.All()) {
    if (b.parent_k[i] == 0) return false;
    const int64_t p =
        (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.parent_k[i] - 1);
    if (!f.parent.Contains(p)) return false;
  }
  if (!f.step.All()) {
    auto s = c.vtab->catalog.StepAt(rank, b.ts[i]);
    if (!s || !f.step.Contains(*s)) return false;
  }
  return true;
}

bool BlockMayMatch(const Constraints& f, int32_t rank, int64_t min_ts, int64_t max_end,
                   int64_t max_dur) {
  if (!f.rank.Contains(rank)) return false;
  if (max_end < f.ts.lo || min_ts > f.ts.hi) return false;
  if (max_end < f.end.lo) return false;
  if (max_dur < f.dur.lo) return false;
  if (!f.step.All()) {
    auto it = f.step_ts.find(rank);
    if (it == f.step_ts.end()) return false;
    if (max_end < it->second.lo || min_ts > it->second.hi) return false;
  }
  return true;
}

int CollectBlocks(EventsCursor* c) {
  Db* db = c->vtab->db.get();
  const Constraints& f = c->f;
  std::string sql;
  // block_names has a row per (name, cat) of a block: one block can match several times,
  // so the blocks are grouped (each block is visited once, with its largest duration).
  if (f.name || f.cat) {
    sql =
        "SELECT b.block, b.rank, max(bn.max_dur), b.min_ts, b.max_end FROM block_names bn "
        "JOIN blocks b ON b.block = bn.block WHERE ";
    sql += f.name && f.cat ? "bn.name = ?1 AND bn.cat = ?2" : f.name ? "bn.name = ?1" : "bn.cat = ?2";
    sql += " GROUP BY b.block";
  } else {
    sql = "SELECT block, rank, max_dur, min_ts, max_end FROM blocks";
    if (f.rank.lo == f.rank.hi) sql += " WHERE rank = ?3";
  }
  sql += f.top_by_dur ? " ORDER BY 3 DESC, 1" : " ORDER BY 1";
  auto st = db->Prepare(sql);
  if (!st.ok()) return Fail(&c->vtab->base, st.status().message());
  if (f.name) st->Bind(1, *f.name);
  if (f.cat) st->Bind(2, *f.cat);
  if (!f.name && !f.cat && f.rank.lo == f.rank.hi) st->Bind(3, f.rank.lo);
  c->blocks.clear();
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) return Fail(&c->vtab->base, row.status().message());
    if (!*row) break;
    const int64_t block = st->Int(0);
    const auto rank = static_cast<int32_t>(st->Int(1));
    if (!BlockMayMatch(f, rank, st->Int(3), st->Int(4), st->Int(2))) continue;
    c->blocks.push_back(BlockRef{block, rank, st->Int(2)});
  }
  return SQLITE_OK;
}

int LoadBlock(EventsCursor* c, const BlockRef& ref, DecodedBlock* out, uint32_t want) {
  Stmt& st = c->vtab->block_data;
  if (st.raw() == nullptr) {
    auto prepared = c->vtab->db->Prepare("SELECT data FROM blocks WHERE block = ?1");
    if (!prepared.ok()) return Fail(&c->vtab->base, prepared.status().message());
    st = std::move(*prepared);
  }
  st.Bind(1, ref.block);
  auto row = st.Step();
  // The blob is decoded (copied out) before the statement is reset for the next block.
  tracedb::Status s =
      !row.ok() ? row.status()
      : !*row   ? tracedb::Status::Corruption("block " + std::to_string(ref.block) + " vanished")
                : engine::DecodeBlock(st.Blob(0), ref.block, out, want);
  st.Reset();
  if (!s.ok()) return Fail(&c->vtab->base, s.message());
  return SQLITE_OK;
}

// Moves to the next matching row (starting at c->row), loading blocks as needed.
int Advance(EventsCursor* c) {
  for (;;) {
    while (c->row < c->blk.n) {
      if (RowMatches(*c, c->blk, c->row, c->blk_rank)) return SQLITE_OK;
      ++c->row;
    }
    if (c->next_block >= c->blocks.size()) {
      c->eof = true;
      return SQLITE_OK;
    }
    const BlockRef& ref = c->blocks[c->next_block++];
    int rc = LoadBlock(c, ref, &c->blk, c->f.filter_cols);
    if (rc != SQLITE_OK) return rc;
    c->blk_rank = ref.rank;
    c->row = 0;
  }
}

// ORDER BY dur DESC LIMIT n: visits blocks by their largest duration, decodes only the columns
// the constraints need (and dur), keeps the n largest rows, and stops when no block left can
// beat the n-th; then decodes the winners' blocks whole to materialise their rows.
int RunTopN(EventsCursor* c) {
  // The rows SQLite will read: limit + offset, or all of them (LIMIT -1).
  const int64_t want = c->f.limit < 0 ? INT64_MAX
                       : c->f.limit > INT64_MAX - c->f.offset ? INT64_MAX
                                                              : c->f.limit + c->f.offset;
  std::priority_queue<TopRow> heap;  // the `want` largest so far; top() is the smallest
  int64_t seq = 0;
  DecodedBlock blk;
  for (const BlockRef& ref : c->blocks) {
    if (static_cast<int64_t>(heap.size()) >= want && ref.max_dur < heap.top().dur) break;
    int rc = LoadBlock(c, ref, &blk, c->f.filter_cols | engine::kColDur);
    if (rc != SQLITE_OK) return rc;
    for (size_t i = 0; i < blk.n; ++i) {
      if (static_cast<int64_t>(heap.size()) >= want && blk.dur[i] <= heap.top().dur) continue;
      if (!RowMatches(*c, blk, i, ref.rank)) continue;
      heap.push(TopRow{blk.dur[i], seq++, ref.rank, ref.block, static_cast<uint32_t>(i), {}});
      if (static_cast<int64_t>(heap.size()) > want) heap.pop();
    }
  }
  c->top.clear();
  while (!heap.empty()) {
    c->top.push_back(heap.top());
    heap.pop();
  }
  std::reverse(c->top.begin(), c->top.end());  // largest first
  // Materialise the winners, one decode per block.
  std::map<int64_t, std::vector<TopRow*>> by_block;
  for (TopRow& t : c->top) by_block[t.block].push_back(&t);
  for (auto& [block, rows] : by_block) {
    int rc = LoadBlock(c, BlockRef{block, rows.front()->rank, 0}, &blk,
                       c->f.used_cols | c->f.filter_cols | engine::kColDur);
    if (rc != SQLITE_OK) return rc;
    for (TopRow* t : rows) t->row = blk.RowAt(t->index);
  }
  c->top_pos = 0;  // SQLite skips the OFFSET rows itself
  c->eof = c->top_pos >= c->top.size();
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* cur, int col_used, const char* idx, int argc,
           sqlite3_value** argv) {
  auto* c = reinterpret_cast<EventsCursor*>(cur);
  DbCatalog& cat = c->vtab->catalog;
  cat.Refresh(c->vtab->db.get());
  c->f = Constraints();
  c->top_mode = false;
  c->blocks.clear();
  c->next_block = 0;
  c->blk.n = 0;
  c->row = 0;
  c->eof = false;
  Constraints& f = c->f;
  const std::string spec = idx ? idx : "";
  int arg = 0;
  for (size_t i = 0; i + 1 < spec.size(); i += 2) {
    const char op = spec[i];
    if (op == 'T') {
      f.top_by_dur = true;
      continue;
    }
    if (arg >= argc) break;
    sqlite3_value* v = argv[arg++];
    // LIMIT and OFFSET are hints (BestIndex): a negative or non-integer LIMIT means all rows.
    if (op == kLimit) {
      f.limit = sqlite3_value_type(v) == SQLITE_INTEGER ? sqlite3_value_int64(v) : -1;
      continue;
    }
    if (op == kOffset) {
      f.offset = sqlite3_value_type(v) == SQLITE_INTEGER
                     ? std::max<int64_t>(0, sqlite3_value_int64(v))
                     : 0;
      continue;
    }
    const int col = spec[i + 1] - 'A';
    if (sqlite3_value_type(v) == SQLITE_NULL) {
      f.none = true;  // comparisons with NULL are never true
      continue;
    }
    if (col == kName || col == kCat || col == kKind) {
      // No text equals a blob; the cat column shows an empty category as NULL.
      if (sqlite3_value_type(v) == SQLITE_BLOB) {
        f.none = true;
        continue;
      }
      const auto* t = reinterpret_cast<const char*>(sqlite3_value_text(v));
      std::string_view s(t ? t : "", static_cast<size_t>(sqlite3_value_bytes(v)));
      if (col == kKind) {
        std::optional<uint8_t> k;
        for (uint8_t x = 0; x < engine::kNumRowKinds; ++x) {
          if (s == engine::RowKindName(static_cast<RowKind>(x))) k = x;
        }
        if (!k || (f.kind && *f.kind != *k)) f.none = true;
        f.kind = k;
        continue;
      }
      auto id = cat.Id(s);
      if (col == kCat && s.empty()) id.reset();
      std::optional<uint32_t>& slot = col == kName ? f.name : f.cat;
      if (!id || (slot && *slot != *id)) f.none = true;
      slot = id;
      continue;
    }
    Range* r = nullptr;
    switch (col) {
      case kRank:
        r = &f.rank;
        break;
      case kTs:
        r = &f.ts;
        break;
      case kDur:
        r = &f.dur;
        break;
      case kEndTs:
        r = &f.end;
        break;
      case kTrack:
        r = &f.track;
        break;
      case kStep:
        r = &f.step;
        break;
      case kId:
        r = &f.id;
        break;
      case kParent:
        r = &f.parent;
        break;
      default:
        return Fail(&c->vtab->base, "events: unexpected constraint on column " +
                                        std::to_string(col));
    }
    // The column has INTEGER affinity: a numeric-looking text compares as the number.
    switch (sqlite3_value_numeric_type(v)) {
      case SQLITE_INTEGER:
        r->Apply(op, sqlite3_value_int64(v));
        break;
      case SQLITE_FLOAT:
        r->ApplyReal(op, sqlite3_value_double(v));
        break;
      default:
        r->ApplyText(op);
        break;
    }
  }
  // An id or parent pins the track, and so the rank.
  for (const Range* r : {&f.id, &f.parent}) {
    if (!r->All() && r->lo == r->hi) f.track.Apply(kEq, r->lo >> 32);
  }
  if (f.track.lo == f.track.hi && f.track.lo >= 0 &&
      static_cast<size_t>(f.track.lo) < cat.tracks.size()) {
    f.rank.Apply(kEq, cat.tracks[static_cast<size_t>(f.track.lo)].rank);
  }
  if (!f.step.All()) {
    for (const auto& [rank, markers] : cat.steps) {
      Range r;
      r.lo = INT64_MAX;
      r.hi = INT64_MIN;
      for (size_t i = 0; i < markers.size(); ++i) {
        if (!f.step.Contains(markers[i].second)) continue;
        r.lo = std::min(r.lo, markers[i].first);
        r.hi = i + 1 < markers.size() ? std::max(r.hi, markers[i + 1].first - 1) : INT64_MAX;
      }
      if (!r.Empty()) f.step_ts[rank] = r;
    }
  }
  if (f.none || f.rank.Empty() || f.ts.Empty() || f.dur.Empty() || f.end.Empty() ||
      f.track.Empty() || f.step.Empty() || f.id.Empty() || f.parent.Empty() || f.limit == 0) {
    c->eof = true;
    return SQLITE_OK;
  }
  for (int col = 0; col < kNumCols; ++col) {
    if (col_used & (1 << col)) f.used_cols |= ColumnGroup(col);
  }
  if (f.name) f.filter_cols |= engine::kColName;
  if (f.cat) f.filter_cols |= engine::kColCat;
  if (f.kind) f.filter_cols |= engine::kColKind;
  if (!f.ts.All() || !f.end.All() || !f.step.All()) f.filter_cols |= engine::kColTs;
  if (!f.dur.All()) f.filter_cols |= engine::kColDur;
  if (!f.id.All()) f.filter_cols |= engine::kColK;
  if (!f.parent.All()) f.filter_cols |= engine::kColParent;
  int rc = CollectBlocks(c);
  if (rc != SQLITE_OK) return rc;
  if (f.top_by_dur) {
    c->top_mode = true;
    return RunTopN(c);
  }
  return Advance(c);
}

int Next(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<EventsCursor*>(cur);
  if (c->top_mode) {
    c->eof = ++c->top_pos >= c->top.size();
    return SQLITE_OK;
  }
  ++c->row;
  return Advance(c);
}

int Eof(sqlite3_vtab_cursor* cur) { return reinterpret_cast<EventsCursor*>(cur)->eof ? 1 : 0; }

void ResultText(sqlite3_context* ctx, const std::string& s) {
  sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
}

int Column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  auto* c = reinterpret_cast<EventsCursor*>(cur);
  const DbCatalog& cat = c->vtab->catalog;
  // The row: a materialised top-n row, or row c->row of the current block, whose columns are
  // decoded the first time a query reads them.
  const engine::Row* r = nullptr;
  DecodedBlock* b = nullptr;
  const size_t i = c->row;
  int32_t rank;
  if (c->top_mode) {
    r = &c->top[c->top_pos].row;
    rank = c->top[c->top_pos].rank;
  } else {
    b = &c->blk;
    rank = c->blk_rank;
    const uint32_t group = ColumnGroup(col);
    if (!b->has(group)) {
      tracedb::Status s = b->Need(group);
      if (!s.ok()) {
        sqlite3_result_error(ctx, s.message().c_str(), -1);
        return SQLITE_ERROR;
      }
    }
  }
  const uint32_t track = r ? r->track : b->track[i];
  const DbCatalog::Track* t = track < cat.tracks.size() ? &cat.tracks[track] : nullptr;
  auto mask = [&] {
    return r ? r->args.mask | (r->json.empty() ? 0 : DecodedBlock::kHasJson) : b->arg_mask[i];
  };
  auto k = [&] { return r ? r->k : b->k[i]; };
  auto ts = [&] { return r ? r->ts : b->ts[i]; };
  auto dur = [&] { return r ? r->dur : b->dur[i]; };
  auto kind = [&] { return r ? static_cast<uint8_t>(r->kind) : b->kind[i]; };
  switch (col) {
    case kId:
      sqlite3_result_int64(ctx, (static_cast<int64_t>(track) << 32) | static_cast<int64_t>(k()));
      break;
    case kRank:
      sqlite3_result_int64(ctx, rank);
      break;
    case kTid:
      if (t && t->tid >= 0)
        sqlite3_result_int64(ctx, t->tid);
      else
        sqlite3_result_null(ctx);
      break;
    case kTrack:
      sqlite3_result_int64(ctx, track);
      break;
    case kTrackName:
      if (t)
        ResultText(ctx, t->name);
      else
        sqlite3_result_null(ctx);
      break;
    case kLane:
      if (t && t->lane)
        ResultText(ctx, t->name);
      else
        sqlite3_result_null(ctx);
      break;
    case kName: {
      const uint32_t name = r ? r->name : b->name[i];
      if (name < cat.strings.size())
        ResultText(ctx, cat.strings[name]);
      else
        sqlite3_result_null(ctx);
      break;
    }
    case kCat: {
      const uint32_t catid = r ? r->cat : b->cat[i];
      if (catid != 0 && catid < cat.strings.size() && !cat.strings[catid].empty()) {
        ResultText(ctx, cat.strings[catid]);
      } else {
        sqlite3_result_null(ctx);
      }
      break;
    }
    case kKind:
      sqlite3_result_text(ctx, engine::RowKindName(static_cast<RowKind>(kind())), -1,
                          SQLITE_STATIC);
      break;
    case kTs:
      sqlite3_result_int64(ctx, ts());
      break;
    case kDur:
      sqlite3_result_int64(ctx, dur());
      break;
    case kEndTs:
      sqlite3_result_int64(ctx, ts() + dur());
      break;
    case kDepth:
      sqlite3_result_int64(ctx, r ? r->depth : b->depth[i]);
      break;
    case kParent: {
      const uint64_t parent_k = r ? r->parent_k : b->parent_k[i];
      if (parent_k == 0) {
        sqlite3_result_null(ctx);
      } else {
        sqlite3_result_int64(
            ctx, (static_cast<int64_t>(track) << 32) | static_cast<int64_t>(parent_k - 1));
      }
      break;
    }
    case kBytes:
    case kPeer:
    case kTag:
    case kComm:
    case kSeq:
    case kFlow: {
      static constexpr uint32_t kBits[] = {EventArgs::kBytes, EventArgs::kPeer, EventArgs::kTag,
                                           EventArgs::kComm,  EventArgs::kSeq,  EventArgs::kFlow};
      if (!(mask() & kBits[col - kBytes])) {
        sqlite3_result_null(ctx);
        break;
      }
      int64_t v = 0;
      switch (col) {
        case kBytes:
          v = static_cast<int64_t>(r ? r->args.bytes : b->bytes[i]);
          break;
        case kPeer:
          v = r ? r->args.peer : b->peer[i];
          break;
        case kTag:
          v = r ? r->args.tag : b->tag[i];
          break;
        case kComm:
          v = r ? r->args.comm : b->comm[i];
          break;
        case kSeq:
          v = static_cast<int64_t>(r ? r->args.seq : b->seq[i]);
          break;
        case kFlow:
          v = static_cast<int64_t>(r ? r->args.flow : b->flow[i]);
          break;
      }
      sqlite3_result_int64(ctx, v);
      break;
    }
    case kValue:
      if (kind() == static_cast<uint8_t>(RowKind::kCounter)) {
        sqlite3_result_double(ctx, r ? r->value : b->value[i]);
      } else {
        sqlite3_result_null(ctx);
      }
      break;
    case kStep: {
      auto s = cat.StepAt(rank, ts());
      if (s)
        sqlite3_result_int64(ctx, *s);
      else
        sqlite3_result_null(ctx);
      break;
    }
    case kArgs: {
      if (!(mask() & DecodedBlock::kHasJson)) {
        sqlite3_result_null(ctx);
        break;
      }
      const std::string_view j = r ? std::string_view(r->json) : b->json[i];
      sqlite3_result_text(ctx, j.data(), static_cast<int>(j.size()), SQLITE_TRANSIENT);
      break;
    }
    default:
      sqlite3_result_null(ctx);
  }
  return SQLITE_OK;
}

int Rowid(sqlite3_vtab_cursor* cur, sqlite3_int64* out) {
  auto* c = reinterpret_cast<EventsCursor*>(cur);
  if (c->top_mode) {
    *out = c->top[c->top_pos].row.id();
    return SQLITE_OK;
  }
  if (!c->blk.has(engine::kColK) && !c->blk.Need(engine::kColK).ok()) return SQLITE_ERROR;
  *out =
      (static_cast<int64_t>(c->blk.track[c->row]) << 32) | static_cast<int64_t>(c->blk.k[c->row]);
  return SQLITE_OK;
}

sqlite3_module MakeModule() {
  sqlite3_module m;
  std::memset(&m, 0, sizeof(m));
  m.iVersion = 0;
  m.xCreate = nullptr;  // eponymous-only: `events` exists on every connection with the module
  m.xConnect = Connect;
  m.xBestIndex = BestIndex;
  m.xDisconnect = Disconnect;
  m.xDestroy = Disconnect;
  m.xOpen = Open;
  m.xClose = Close;
  m.xFilter = Filter;
  m.xNext = Next;
  m.xEof = Eof;
  m.xColumn = Column;
  m.xRowid = Rowid;
  return m;
}

}  // namespace

int RegisterEventsModule(sqlite3* db) {
  static const sqlite3_module module = MakeModule();
  return sqlite3_create_module_v2(db, "events", &module, nullptr, nullptr);
}

}  // namespace tracedb::query
