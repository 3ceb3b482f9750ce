// BlockStore: zone-map selection, block reads and decodes, the decoded-block cache, the string
// dictionary and meta. See block_store.h.
#include "engine/db/block_store.h"

#include <algorithm>
#include <unordered_set>

#include "engine/db/block_check.h"

namespace tracedb::engine {

void BlockSelection::SetWindow(const TimeWindow& w) {
  ts_lo = w.lo;
  if (w.hi == INT64_MIN) {  // [lo, INT64_MIN): nothing
    ts_lo = INT64_MAX;
    ts_hi = INT64_MIN;
  } else {
    ts_hi = w.hi == INT64_MAX ? INT64_MAX : w.hi - 1;
  }
}

BlockStore::BlockStore(Db* db, std::string label, std::string schema)
    : db_(db), label_(std::move(label)), prefix_(schema.empty() ? "" : schema + ".") {}

std::string BlockStore::Prefixed(std::string_view msg) const {
  if (label_.empty()) return std::string(msg);
  std::string s = label_;
  s += ": ";
  s += msg;
  return s;
}

StatusOr<Stmt*> BlockStore::Statement(const std::string& sql) {
  Stmt* st = &queries_[sql];
  if (st->raw() == nullptr) {
    TRACEDB_ASSIGN_OR_RETURN(Stmt prepared, db_->Prepare(sql));
    *st = std::move(prepared);
  }
  st->Reset();
  return st;
}

namespace {

// Lists longer than this are written into the SQL as integer literals instead of parameters:
// a statement may have at most SQLITE_MAX_VARIABLE_NUMBER of those (32,766 by default, 999
// before SQLite 3.32), and a name pattern can match more names than that.
constexpr size_t kMaxBoundList = 256;

// "col IN (?n, ...)" (or "col = ?n" for one value: the form the planner handles best), binding
// the values later in the same order; a long list as "col IN (v1, ...)".
std::string InList(const char* col, const std::vector<int64_t>& v, int* param,
                   std::vector<int64_t>* binds) {
  std::string sql = col;
  if (v.size() == 1) {
    sql += " = ?" + std::to_string(++*param);
    binds->push_back(v[0]);
    return sql;
  }
  sql += " IN (";
  if (v.size() > kMaxBoundList) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) sql += ',';
      sql += std::to_string(v[i]);
    }
    sql += ')';
    return sql;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) sql += ',';
    sql += '?' + std::to_string(++*param);
    binds->push_back(v[i]);
  }
  sql += ')';
  return sql;
}

// Appends " AND col IN (?n, ...)" when v is not empty.
void AppendIn(std::string* sql, const char* col, const std::vector<int64_t>& v, int* param,
              std::vector<int64_t>* binds) {
  if (v.empty()) return;
  *sql += " AND ";
  *sql += InList(col, v, param, binds);
}

// Appends the condition on a block_names row `bn` of sel (its names and cats, OR its any_cats),
// parenthesized so that the conditions appended after it apply to either alternative.
void AppendNames(std::string* sql, const BlockSelection& sel, int* param,
                 std::vector<int64_t>* binds) {
  if (sel.any_cats.empty()) {
    AppendIn(sql, "bn.name", sel.names, param, binds);
    AppendIn(sql, "bn.cat", sel.cats, param, binds);
    return;
  }
  *sql += " AND (";
  if (!sel.names.empty() || !sel.cats.empty()) {
    *sql += "(1";
    AppendIn(sql, "bn.name", sel.names, param, binds);
    AppendIn(sql, "bn.cat", sel.cats, param, binds);
    *sql += ") OR ";
  }
  *sql += InList("bn.cat", sel.any_cats, param, binds);
  *sql += ')';
}

void AppendCmp(std::string* sql, const char* cond, int64_t v, int* param,
               std::vector<int64_t>* binds) {
  *sql += " AND ";
  *sql += cond;
  *sql += " ?" + std::to_string(++*param);
  binds->push_back(v);
}

}  // namespace

namespace {

// Whether SelectionSql writes a list of sel into its SQL (InList): such a statement is used once
// and not kept, so that a long-lived store does not gather one per list it was asked for.
bool InlinesAList(const BlockSelection& sel) {
  for (const std::vector<int64_t>* v : {&sel.ranks, &sel.names, &sel.cats, &sel.any_cats}) {
    if (v->size() > kMaxBoundList) return true;
  }
  return false;
}

bool ByName(const BlockSelection& sel) {
  return !sel.names.empty() || !sel.cats.empty() || !sel.any_cats.empty();
}

// The zone-map walk by name in max_dur order reads block_names rows as they come, longest
// first, without grouping them by block: block_names' key (name, max_dur, block, cat) gives
// that order for one name without sorting, so a top-n search that stops after a few blocks
// reads a few rows, not every block of the name (the grouped form sorted all of them first:
// O(blocks) before the first decode). A block can then come more than once (one row per
// (name, cat)); ForEach lists it at its first row, whose max_dur is its largest matching one.
bool StreamsNameRows(const BlockSelection& sel, bool with_data) {
  return ByName(sel) && !with_data && sel.order == BlockSelection::Order::kMaxDurDesc;
}

}  // namespace

std::string BlockStore::SelectionSql(const BlockSelection& sel, bool with_data,
                                     std::vector<int64_t>* binds) const {
  const bool by_name = ByName(sel);
  const bool streamed = StreamsNameRows(sel, with_data);
  // Grouping by block with the data column would sort the payloads: the decoded walk selects
  // by name with a subquery instead (and reports the block's own max_dur).
  const bool grouped = by_name && !with_data && !streamed;
  std::string sql;
  int param = 0;
  const std::string blocks = prefix_ + "blocks", names = prefix_ + "block_names";
  const char* data = with_data ? ", b.data" : "";
  // block_names has a row per (name, cat, kind) of a block: one block can match several times,
  // so the blocks are grouped (each listed once, with the largest matching duration), or, in
  // max_dur order, listed at their first row (StreamsNameRows).
  if (streamed) {
    sql = "SELECT b.block, b.rank, b.min_ts, b.max_end, bn.max_dur, b.count FROM " + names +
          " bn JOIN " + blocks + " b ON b.block = bn.block WHERE 1";
    AppendNames(&sql, sel, &param, binds);
  } else if (grouped) {
    sql = "SELECT b.block, b.rank, b.min_ts, b.max_end, max(bn.max_dur), b.count FROM " + names +
          " bn JOIN " + blocks + " b ON b.block = bn.block WHERE 1";
    AppendNames(&sql, sel, &param, binds);
  } else {
    sql = std::string("SELECT b.block, b.rank, b.min_ts, b.max_end, b.max_dur, b.count") + data +
          " FROM " + blocks + " b WHERE 1";
    if (by_name) {
      std::string sub = "SELECT bn.block FROM " + names + " bn WHERE 1";
      AppendNames(&sub, sel, &param, binds);
      sql += " AND b.block IN (" + sub + ")";
    }
  }
  AppendIn(&sql, "b.rank", sel.ranks, &param, binds);
  if (sel.min_ts_from != INT64_MIN) AppendCmp(&sql, "b.min_ts >=", sel.min_ts_from, &param, binds);
  if (sel.ts_hi != INT64_MAX) AppendCmp(&sql, "b.min_ts <=", sel.ts_hi, &param, binds);
  if (sel.ts_lo != INT64_MIN) AppendCmp(&sql, "b.max_end >=", sel.ts_lo, &param, binds);
  if (sel.after_block != INT64_MIN) AppendCmp(&sql, "b.block >", sel.after_block, &param, binds);
  if (sel.min_dur != INT64_MIN) {
    AppendCmp(&sql, grouped || streamed ? "bn.max_dur >=" : "b.max_dur >=", sel.min_dur, &param,
              binds);
  }
  if (grouped) sql += " GROUP BY b.block";
  switch (sel.order) {
    case BlockSelection::Order::kBlock:
      sql += " ORDER BY 1";
      break;
    case BlockSelection::Order::kRankTime:
      sql += " ORDER BY 2, 3, 1";
      break;
    case BlockSelection::Order::kMaxDurDesc:
      // Streamed: bn.max_dur, so that block_names' key gives the order (the block id only
      // sorts the rows of equal max_dur among themselves).
      sql += streamed ? " ORDER BY bn.max_dur DESC, bn.block" : " ORDER BY 5 DESC, 1";
      break;
    case BlockSelection::Order::kTimeDesc:
      sql += " ORDER BY 3 DESC";
      break;
  }
  return sql;
}

void BlockStore::ZoneFrom(const Stmt& st, BlockZoneRow* z) const {
  z->block = st.Int(0);
  const int64_t rank = st.Int(1);
  z->rank = static_cast<int32_t>(rank);
  z->min_ts = st.Int(2);
  z->max_end = st.Int(3);
  z->max_dur = st.Int(4);
  const int64_t count = st.Int(5);
  // count(*) trusts the count without decoding: 1..65536 or refused, never 2^62 rows to step
  // through (a count that lies within the range is what the decode, or `tracedb verify`, finds).
  Status c = CheckBlockCount(z->block, count);
  if (c.ok() && (rank < INT32_MIN || rank > INT32_MAX)) {
    c = Status::Corruption("block " + std::to_string(z->block) + ": rank " + std::to_string(rank) +
                           " is not a 32-bit integer");
  }
  z->ok = c.ok();
  z->count = z->ok ? static_cast<uint64_t>(count) : 0;
  z->error = z->ok ? std::string() : Prefixed(c.message());
}

Status BlockStore::ForEach(const BlockSelection& sel,
                           const std::function<Status(const BlockZoneRow&)>& fn) {
  if (sel.ts_lo > sel.ts_hi) return Status::Ok();  // an empty window: no block
  std::vector<int64_t> binds;
  Stmt once;  // (a statement with a list written into it: InlinesAList)
  Stmt* st = &once;
  if (InlinesAList(sel)) {
    TRACEDB_ASSIGN_OR_RETURN(once, db_->Prepare(SelectionSql(sel, false, &binds)));
  } else {
    TRACEDB_ASSIGN_OR_RETURN(st, Statement(SelectionSql(sel, false, &binds)));
  }
  for (size_t i = 0; i < binds.size(); ++i) st->Bind(static_cast<int>(i + 1), binds[i]);
  const bool dedupe = StreamsNameRows(sel, false);
  std::unordered_set<int64_t> seen;  // with dedupe: the blocks listed so far
  BlockZoneRow z;
  Status s;
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) {
      s = row.status();
      break;
    }
    if (!*row) break;
    if (dedupe && !seen.insert(st->Int(0)).second) continue;
    ZoneFrom(*st, &z);
    s = fn(z);
    if (!s.ok()) break;
  }
  st->Reset();
  return s;
}

Status BlockStore::ForEachDecoded(
    const BlockSelection& sel, uint32_t cols,
    const std::function<Status(const BlockZoneRow&, DecodedBlock&)>& fn) {
  if (sel.ts_lo > sel.ts_hi) return Status::Ok();
  std::vector<int64_t> binds;
  Stmt once;  // (a statement with a list written into it: InlinesAList)
  Stmt* st = &once;
  if (InlinesAList(sel)) {
    TRACEDB_ASSIGN_OR_RETURN(once, db_->Prepare(SelectionSql(sel, true, &binds)));
  } else {
    TRACEDB_ASSIGN_OR_RETURN(st, Statement(SelectionSql(sel, true, &binds)));
  }
  for (size_t i = 0; i < binds.size(); ++i) st->Bind(static_cast<int>(i + 1), binds[i]);
  BlockZoneRow z;
  DecodedBlock b;
  Status s;
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) {
      s = row.status();
      break;
    }
    if (!*row) break;
    ZoneFrom(*st, &z);
    if (!z.ok) {
      s = Status::Corruption(z.error);
      break;
    }
    s = DecodeBlock(st->Blob(6), z.block, &b, cols);
    if (s.ok()) s = CheckDecodedCount(z.block, b.n, static_cast<int64_t>(z.count));
    if (!s.ok()) {
      if (!label_.empty()) s = s.WithContext(label_);
      break;
    }
    s = fn(z, b);
    if (!s.ok()) break;
  }
  st->Reset();
  return s;
}

StatusOr<std::vector<BlockZoneRow>> BlockStore::Select(const BlockSelection& sel) {
  std::vector<BlockZoneRow> v;
  TRACEDB_RETURN_IF_ERROR(ForEach(sel, [&](const BlockZoneRow& z) {
    v.push_back(z);
    return Status::Ok();
  }));
  return v;
}

StatusOr<std::vector<int64_t>> BlockStore::Ranks() {
  TRACEDB_ASSIGN_OR_RETURN(Stmt * st,
                           Statement("SELECT DISTINCT rank FROM " + prefix_ + "blocks ORDER BY 1"));
  std::vector<int64_t> v;
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) {
      st->Reset();
      return row.status();
    }
    if (!*row) break;
    v.push_back(st->Int(0));
  }
  st->Reset();
  return v;
}

StatusOr<std::vector<int64_t>> BlockStore::BlocksWithNames(
    const std::function<bool(uint32_t name, uint32_t cat)>& match) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt * st,
                           Statement("SELECT name, cat, block FROM " + prefix_ + "block_names"));
  std::vector<int64_t> v;
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) {
      st->Reset();
      return row.status();
    }
    if (!*row) break;
    if (match(static_cast<uint32_t>(st->Int(0)), static_cast<uint32_t>(st->Int(1)))) {
      v.push_back(st->Int(2));
    }
  }
  st->Reset();
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

Status BlockStore::BlockKinds(std::unordered_map<int64_t, uint8_t>* out) {
  out->clear();
  auto st =
      db_->Prepare("SELECT bn.block, ns.kind FROM " + prefix_ + "block_names bn JOIN " + prefix_ +
                   "blocks b ON b.block = bn.block LEFT JOIN " + prefix_ +
                   "name_stats ns ON ns.rank = b.rank AND ns.name = bn.name AND ns.cat = bn.cat");
  // A file without these summaries says nothing of its blocks' kinds: every kind stays possible.
  if (!st.ok()) return Status::Ok();
  constexpr uint8_t kAll = (1u << kNumRowKinds) - 1;
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) {
      out->clear();
      return row.status();
    }
    if (!*row) break;
    const int64_t kind = st->IsNull(1) ? -1 : st->Int(1);
    const uint8_t bits = kind >= 0 && kind < kNumRowKinds ? static_cast<uint8_t>(1u << kind) : kAll;
    (*out)[st->Int(0)] |= bits;
  }
  return Status::Ok();
}

StatusOr<bool> BlockStore::ReadBytes(int64_t block,
                                     const std::function<Status(std::string_view)>& fn) {
  if (data_.raw() == nullptr) {
    TRACEDB_ASSIGN_OR_RETURN(
        data_, db_->Prepare("SELECT data FROM " + prefix_ + "blocks WHERE block = ?1"));
  }
  data_.Bind(1, block);
  auto row = data_.Step();
  Status s = !row.ok() ? row.status() : *row ? fn(data_.Blob(0)) : Status::Ok();
  data_.Reset();
  if (!s.ok()) return s;
  return *row;
}

Status BlockStore::Read(const BlockZoneRow& z, uint32_t cols, DecodedBlock* out) {
  if (!z.ok) return Status::Corruption(z.error);
  if (data_.raw() == nullptr) {
    TRACEDB_ASSIGN_OR_RETURN(
        data_, db_->Prepare("SELECT data FROM " + prefix_ + "blocks WHERE block = ?1"));
  }
  data_.Bind(1, z.block);
  auto row = data_.Step();
  // The blob is decoded (copied out) before the statement is reset for the next block.
  Status s = !row.ok() ? row.status()
             : !*row   ? Status::Corruption("block " + std::to_string(z.block) + " vanished")
                       : DecodeBlock(data_.Blob(0), z.block, out, cols);
  data_.Reset();
  if (s.ok()) s = CheckDecodedCount(z.block, out->n, static_cast<int64_t>(z.count));
  return label_.empty() ? s : s.WithContext(label_);
}

StatusOr<std::shared_ptr<DecodedBlock>> BlockStore::ReadCached(const BlockZoneRow& z,
                                                               uint32_t cols) {
  auto it = cache_.find(z.block);
  if (it == cache_.end()) {
    auto blk = std::make_shared<DecodedBlock>();
    TRACEDB_RETURN_IF_ERROR(Read(z, cols, blk.get()));
    while (!cache_.empty() && cache_rows_ + blk->n > kCacheRows) {
      auto oldest = cache_.begin();
      for (auto e = cache_.begin(); e != cache_.end(); ++e) {
        if (e->second.last_use < oldest->second.last_use) oldest = e;
      }
      cache_rows_ -= oldest->second.blk->n;
      cache_.erase(oldest);
    }
    cache_rows_ += blk->n;
    it = cache_.emplace(z.block, Entry{std::move(blk), 0}).first;
  }
  it->second.last_use = ++tick_;
  Status s = it->second.blk->Need(cols);
  if (!s.ok()) return label_.empty() ? s : s.WithContext(label_);
  return it->second.blk;
}

void BlockStore::SetVersion(int64_t data_version, int64_t changes) {
  if (data_version == data_version_ && changes == changes_) return;
  cache_.clear();
  cache_rows_ = 0;
  data_version_ = data_version;
  changes_ = changes;
}

StatusOr<int64_t> BlockStore::ForEachString(
    int64_t after, const std::function<void(int64_t id, std::string_view s)>& fn) {
  // Dictionaries are indexed by id, sized by their row counts: an id beyond DenseIdLimit is left
  // out (its events' names read NULL).
  TRACEDB_ASSIGN_OR_RETURN(int64_t rows,
                           db_->QueryInt("SELECT count(*) FROM " + prefix_ + "strings", 0));
  const int64_t limit = DenseIdLimit(rows);
  TRACEDB_ASSIGN_OR_RETURN(
      int64_t max_id,
      db_->QueryInt(
          "SELECT max(id) FROM " + prefix_ + "strings WHERE id <= " + std::to_string(limit), 0));
  if (max_id <= after) return after;
  TRACEDB_ASSIGN_OR_RETURN(Stmt * st, Statement("SELECT id, s FROM " + prefix_ +
                                                "strings WHERE id > ?1 AND id <= ?2 ORDER BY id"));
  st->Bind(1, after);
  st->Bind(2, limit);
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) {
      st->Reset();
      return row.status();
    }
    if (!*row) break;
    fn(st->Int(0), st->Text(1));
  }
  st->Reset();
  return max_id;
}

Status BlockStore::LoadMeta(std::map<std::string, std::string>* out) {
  out->clear();
  if (!db_->HasTable("meta")) return Status::Ok();
  TRACEDB_ASSIGN_OR_RETURN(Stmt * st,
                           Statement("SELECT key, value FROM " + prefix_ + "meta ORDER BY key"));
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) {
      st->Reset();
      return row.status();
    }
    if (!*row) break;
    (*out)[std::string(st->Text(0))] = std::string(st->Text(1));
  }
  st->Reset();
  return Status::Ok();
}

}  // namespace tracedb::engine
