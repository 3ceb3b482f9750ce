// Planning for the `events` table: xBestIndex (what is pushed down, what is promised to
// SQLite; docs/sql.md) and the decoding of xFilter's arguments into Constraints.
#include <algorithm>
#include <cmath>
#include <string>

#include "query/sql/events_internal.h"

namespace tracedb::query::events {

void Range::Apply(char op, int64_t v) {
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

// `col op d` for a real d (SQLite compares integers and reals exactly).
void Range::ApplyReal(char op, double d) {
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
void Range::ApplyText(char op) {
  if (op == kLt || op == kLe)
    Apply(kGe, INT64_MIN);  // true for every non-NULL value
  else
    Nothing();
}

uint32_t ColumnGroup(int col) {
  switch (col) {
    case kRank:
      return 0;  // the block's rank
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
    case kOpen:
      return engine::kColArgs;
    case kValue:
      return engine::kColValue;
    default:
      return engine::kColTrack;
  }
}

namespace {

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
    case kDepth:
    case kBytes:
    case kPeer:
    case kTag:
    case kComm:
    case kSeq:
    case kFlow:
      return true;
    default:
      return false;
  }
}

// Columns whose values a grouped scan can key on (all dictionary-coded or per track).
bool GroupableColumn(int col) {
  switch (col) {
    case kRank:
    case kTid:
    case kTrack:
    case kTrackName:
    case kLane:
    case kName:
    case kCat:
    case kKind:
    case kDepth:
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

}  // namespace

// The most rows a grouped scan holds decoded at once.
constexpr int64_t kMaxPartitionRows = 16 << 20;  // about 40 bytes each, decoded

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
    // Name and category equality is checked by string id; SQLite re-checks it. Kind equality
    // is exact (a fixed set of names, compared as text by ParseConstraints: a number, a blob
    // or NULL equals none of them), so SQLite need not read the column to compare it again.
    info->aConstraintUsage[i].omit = c.iColumn == kName || c.iColumn == kCat ? 0 : 1;
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
  // ORDER BY, GROUP BY or DISTINCT over columns a grouped scan can key on: rows come sorted
  // by those columns (so groups are adjacent) and SQLite needs no sorter. Sorted, not merely
  // adjacent, whatever sqlite3_vtab_distinct() says: SQLite 3.40 reports 1 (adjacency) also
  // when an identical ORDER BY relies on the GROUP BY's order. Not claimed when a partition
  // (one rank, or the whole table) could be too large to hold decoded.
  if (!info->orderByConsumed && info->nOrderBy > 0 && info->nOrderBy <= 8) {
    bool groupable = true, per_rank_possible = false;
    std::string group;
    for (int i = 0; groupable && i < info->nOrderBy; ++i) {
      const int col = info->aOrderBy[i].iColumn;
      groupable = GroupableColumn(col);
      if (i == 0) per_rank_possible = col == kRank || col == kTrack;
      group += info->aOrderBy[i].desc ? kGroupDesc : kGroup;
      group += static_cast<char>('A' + col);
    }
    auto* v = reinterpret_cast<EventsVtab*>(tab);
    if (groupable) {
      const char* sql =
          per_rank_possible
              ? "SELECT max(n) FROM (SELECT sum(count) AS n FROM blocks GROUP BY rank)"
              : "SELECT sum(count) FROM blocks";
      auto rows = v->db->QueryInt(sql, 0);
      groupable = rows.ok() && *rows <= kMaxPartitionRows;
    }
    if (groupable) {
      idx += group;
      // (For DISTINCT, SQLite would accept one row per group, but a WHERE term it keeps for
      // itself, e.g. NOT IN, is not shown here and may reject that row: every row is
      // returned.)
      info->orderByConsumed = 1;
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

int ParseConstraints(EventsCursor* c, int col_used, const char* idx, int argc,
                     sqlite3_value** argv) {
  DbCatalog& cat = c->vtab->catalog;
  Constraints& f = c->f;
  const std::string spec = idx ? idx : "";
  int arg = 0;
  for (size_t i = 0; i + 1 < spec.size(); i += 2) {
    const char op = spec[i];
    if (op == kTopN) {
      f.top_by_dur = true;
      continue;
    }
    if (op == kGroup || op == kGroupDesc) {
      f.group_cols.push_back(spec[i + 1] - 'A');
      f.group_desc.push_back(op == kGroupDesc);
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
          if (s == engine::RowKindName(static_cast<engine::RowKind>(x))) k = x;
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
      case kDepth:
        r = &f.depth;
        break;
      case kBytes:
        r = &f.bytes;
        break;
      case kPeer:
        r = &f.peer;
        break;
      case kTag:
        r = &f.tag;
        break;
      case kComm:
        r = &f.comm;
        break;
      case kSeq:
        r = &f.seq;
        break;
      case kFlow:
        r = &f.flow;
        break;
      default:
        return Fail(&c->vtab->base,
                    "events: unexpected constraint on column " + std::to_string(col));
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
    cat.LoadSteps(c->vtab->db.get());
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
      f.track.Empty() || f.step.Empty() || f.id.Empty() || f.parent.Empty() || f.depth.Empty() ||
      f.bytes.Empty() || f.peer.Empty() || f.tag.Empty() || f.comm.Empty() || f.seq.Empty() ||
      f.flow.Empty() || f.limit == 0) {
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
  if (!f.depth.All()) f.filter_cols |= engine::kColDepth;
  for (const Range* r : {&f.bytes, &f.peer, &f.tag, &f.comm, &f.seq, &f.flow}) {
    if (!r->All()) f.filter_cols |= engine::kColArgs;
  }
  for (int col : f.group_cols) f.used_cols |= ColumnGroup(col);
  return SQLITE_OK;
}

}  // namespace tracedb::query::events
