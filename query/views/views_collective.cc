// Collective matching over decoded block columns. See views_collective.h; the SQL this table
// replaces is ViewsReferenceSql() in query/views/views.cc.
#include "query/views/views_collective.h"

#include <algorithm>
#include <cstring>
#include <map>
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
#include "engine/util/saturating.h"
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

// What the dictionary says about each string id, for the SQL's tests on categories and names.
struct Dict {
  std::vector<std::string> strings;
  // Per string id, what it is (a lookup per decoded row, no hashing).
  enum : uint8_t { kMpiOrComm = 1, kNccl = 2, kReady = 4, kNegotiation = 8 };
  std::vector<uint8_t> what;
  bool any_ready = false;
  engine::BlockSelection sel;  // the blocks that can hold an arrival (none: sel unused)
  bool none = true;
  uint8_t what_of(uint32_t id) const { return id < what.size() ? what[id] : 0; }
};

Status LoadDict(engine::BlockStore* store, Dict* d) {
  // strings has no unique key on the text: every id of a category counts (id 0 is no category).
  std::unordered_set<uint32_t> cat_mpi, cat_comm, cat_nccl;
  std::unordered_set<uint32_t> ready, negotiations;
  // The store reads the dictionary as the events table does: an id past DenseIdLimit names no
  // event we read (engine/db/block_check.h), whatever a hostile file claims.
  auto last_id = store->ForEachString(-1, [&](int64_t id, std::string_view text) {
    if (id > UINT32_MAX) return;
    const auto u = static_cast<uint32_t>(id);
    std::string s(text);
    if (u != 0 && s == "mpi") cat_mpi.insert(u);
    if (u != 0 && s == "comm") cat_comm.insert(u);
    if (u != 0 && s == "nccl") cat_nccl.insert(u);
    if (s == "RANK_READY") ready.insert(u);
    if (negotiation::IsNegotiationName(s)) negotiations.insert(u);
    if (d->strings.size() <= u) d->strings.resize(u + 1);
    d->strings[u] = std::move(s);
  });
  if (!last_id.ok()) return Status::Corruption(Where() + last_id.status().message());
  // As the events table: a name id without a string reads NULL, category 0 or "" reads NULL.
  d->what.assign(d->strings.size(), 0);
  for (const auto* set : {&cat_mpi, &cat_comm})
    for (uint32_t c : *set) d->what[c] |= Dict::kMpiOrComm;
  for (uint32_t c : cat_nccl) d->what[c] |= Dict::kNccl;
  for (uint32_t n : ready) d->what[n] |= Dict::kReady;
  for (uint32_t n : negotiations) d->what[n] |= Dict::kNegotiation;
  d->any_ready = !ready.empty();
  // The blocks holding an event of these categories or with these names.
  for (const auto* set : {&cat_mpi, &cat_comm, &cat_nccl})
    for (uint32_t c : *set) d->sel.any_cats.push_back(c);
  for (const auto* set : {&ready, &negotiations})
    for (uint32_t n : *set) d->sel.names.push_back(n);
  d->none = d->sel.any_cats.empty() && ready.empty();
  return Status::Ok();
}

// Names interned once per distinct string, as Arrival::name indexes them.
class Names {
 public:
  Names(const Dict& d, std::vector<std::string>* out) : d_(d), out_(out) {}
  int32_t Intern(const std::string& s) {
    auto [it, fresh] = index_.try_emplace(s, static_cast<int32_t>(out_->size()));
    if (fresh) out_->push_back(s);
    return it->second;
  }
  int32_t Of(uint32_t id) {
    if (id >= d_.strings.size()) return -1;
    if (of_id_.size() <= id) of_id_.resize(d_.strings.size(), -2);
    if (of_id_[id] == -2) of_id_[id] = Intern(d_.strings[id]);
    return of_id_[id];
  }

 private:
  const Dict& d_;
  std::vector<std::string>* out_;
  std::unordered_map<std::string, int32_t> index_;
  std::vector<int32_t> of_id_;  // string id -> index, or -2 = not interned yet
};

constexpr uint32_t kWant = engine::kColTrack | engine::kColK | engine::kColParent |
                           engine::kColKind | engine::kColName | engine::kColCat | engine::kColTs |
                           engine::kColDur | engine::kColArgs;

// Whether row i of b is a recorded collective call: the SQL's `(cat IN ('mpi', 'comm') OR
// (cat = 'nccl' AND kind = 'instant')) AND seq IS NOT NULL`.
bool IsCall(const Dict& d, const DecodedBlock& b, size_t i) {
  const uint8_t cat_what = d.what_of(b.cat[i]);
  return (b.arg_mask[i] & EventArgs::kSeq) &&
         ((cat_what & Dict::kMpiOrComm) ||
          ((cat_what & Dict::kNccl) && static_cast<RowKind>(b.kind[i]) == RowKind::kInstant));
}

// The arrival of call i of b (IsCall) on `rank`.
Arrival CallAt(const DecodedBlock& b, size_t i, int64_t rank, Names* names) {
  const uint32_t mask = b.arg_mask[i];
  Arrival a;
  a.rank = rank;
  a.name = names->Of(b.name[i]);
  a.has_comm = (mask & EventArgs::kComm) != 0;
  a.comm = a.has_comm ? static_cast<int64_t>(b.comm[i]) : 0;
  a.seq = static_cast<int64_t>(b.seq[i]);
  a.id = (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.k[i]);
  a.ts = b.ts[i];
  a.has_dur = true;
  a.dur = b.dur[i];
  a.end_ts = engine::SaturatingAdd(b.ts[i], b.dur[i]);  // as events.end_ts
  return a;
}

// One partition [lo, hi) sorted latest first: the window functions' values.
void SetPartition(std::vector<Arrival>* rows, size_t lo, size_t hi) {
  std::vector<Arrival>& r = *rows;
  const int64_t max_ts = r[lo].ts, min_ts = r[hi - 1].ts, last = r[lo].rank;
  for (size_t i = lo; i < hi; ++i) {
    // Saturating (arrivals of a DB made elsewhere can be further apart than int64 holds; the
    // SQL's integer overflow gives a REAL there, as large).
    r[i].late = engine::SaturatingSub(r[i].ts, min_ts);
    r[i].wait = engine::SaturatingSub(max_ts, r[i].ts);
    r[i].ranks = static_cast<int64_t>(hi - lo);
    r[i].last_rank = last;
  }
}

// Every arrival held at once (any input): the table sorted by (comm, seq).
Status Compute(engine::Db* db, Table* out) {
  out->rows.clear();
  out->names.clear();
  engine::BlockStore store(db, {}, "main");
  Dict dict;
  TRACEDB_RETURN_IF_ERROR(LoadDict(&store, &dict));
  if (dict.none) return Status::Ok();
  Names names(dict, &out->names);
  std::vector<negotiation::Tick> ticks;
  std::unordered_map<int64_t, int32_t> negotiation_name;  // span id -> name after NEGOTIATE_
  engine::BlockSelection sel = dict.sel;
  sel.order = engine::BlockSelection::Order::kBlock;
  // The store checks each block's zone map, that it decodes and that it holds the rows its zone
  // map declares.
  auto visit = [&](const engine::BlockZoneRow& z, DecodedBlock& b) {
    for (size_t i = 0; i < b.n; ++i) {
      if (IsCall(dict, b, i)) out->rows.push_back(CallAt(b, i, z.rank, &names));
      const uint8_t name_what = dict.what_of(b.name[i]);
      // A tick with a NULL peer is no arrival (the SQL's `t.peer IS NOT NULL`).
      negotiation::Tick tick;
      if ((name_what & Dict::kReady) && negotiation::TickAt(b, i, &tick) && tick.has_peer)
        ticks.push_back(tick);
      if (static_cast<RowKind>(b.kind[i]) == RowKind::kSpan && (name_what & Dict::kNegotiation)) {
        const int64_t id = (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.k[i]);
        negotiation_name.emplace(id, names.Intern(dict.strings[b.name[i]].substr(10)));
      }
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
  comm_match::PartitionArrivals(&out->rows,
                                [&](size_t lo, size_t hi) { SetPartition(&out->rows, lo, hi); });
  return Status::Ok();
}

// The same rows, one partition held at a time, when each rank calls the collectives of a
// communicator in order: read in the store's (rank, time) order, every rank's seq on every
// communicator never decreases (checked by a first pass over the call blocks, which also lists
// the blocks and communicators). Then, per communicator (NULL first, then ascending), the ranks'
// calls are merged by seq: a partition is complete when every rank's next call on it has a
// larger seq. Memory: the block list, one decoded block and, per rank, the communicator's calls
// of one block. A job with Horovod ticks (RANK_READY) or out-of-order seqs is computed whole.
class Stream {
 public:
  explicit Stream(engine::Db* db) : store_(db, {}, "main"), names_(dict_, &name_strings_) {}
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (own_txn_) (void)store_.db()->Exec("COMMIT");
  }

  // Pass 1. *ok false: this input needs the whole table (Compute).
  Status Start(bool* ok) {
    *ok = false;
    // Every pass and block read sees one snapshot (a read transaction, unless one is open).
    if (sqlite3_get_autocommit(store_.db()->raw()) != 0) {
      Status s = store_.db()->Exec("BEGIN");
      if (!s.ok()) return Status::Corruption(Where() + s.message());
      own_txn_ = true;
    }
    TRACEDB_RETURN_IF_ERROR(LoadDict(&store_, &dict_));
    if (dict_.any_ready) return Status::Ok();
    done_ = true;
    *ok = true;
    if (dict_.none) return Status::Ok();
    // Pass 1 in block order (the store streams the blocks as stored, no sort of their bytes):
    // per block, the first and last seq of each communicator's calls, checked non-decreasing
    // within the block; then across each rank's blocks in (min_ts, block) order, the order the
    // merge reads them in.
    engine::BlockSelection sel = dict_.sel;
    sel.order = engine::BlockSelection::Order::kBlock;
    std::map<std::pair<bool, int64_t>, size_t> comm_index;  // ordered: NULL (false) first
    std::vector<std::pair<bool, int64_t>> comms;
    auto visit = [&](const engine::BlockZoneRow& z, DecodedBlock& b) -> Status {
      Block blk{z, {}};
      for (size_t i = 0; i < b.n; ++i) {
        if (!IsCall(dict_, b, i)) continue;
        const bool has_comm = (b.arg_mask[i] & EventArgs::kComm) != 0;
        const int64_t comm = has_comm ? static_cast<int64_t>(b.comm[i]) : 0;
        auto [it, fresh] = comm_index.try_emplace({has_comm, comm}, comms.size());
        if (fresh) comms.emplace_back(has_comm, comm);
        const size_t c = it->second;
        const auto seq = static_cast<int64_t>(b.seq[i]);
        auto span = std::find_if(blk.spans.begin(), blk.spans.end(),
                                 [c](const CommSpan& x) { return x.comm == c; });
        if (span == blk.spans.end()) {
          blk.spans.push_back(CommSpan{c, seq, seq});
        } else if (seq < span->last) {
          *ok = false;  // out of order: the whole table
          return Status::Aborted("out of order");
        } else {
          span->last = seq;
        }
      }
      if (!blk.spans.empty()) blocks_.push_back(std::move(blk));
      return Status::Ok();
    };
    // The check needs the kind, category and args (seq, comm) only.
    constexpr uint32_t kCheck = engine::kColKind | engine::kColCat | engine::kColArgs;
    Status walk = store_.ForEachDecoded(sel, kCheck, visit);
    if (!*ok) return Status::Ok();
    if (!walk.ok()) return Status::Corruption(Where() + walk.message());
    std::sort(blocks_.begin(), blocks_.end(), [](const Block& x, const Block& y) {
      if (x.z.rank != y.z.rank) return x.z.rank < y.z.rank;
      if (x.z.min_ts != y.z.min_ts) return x.z.min_ts < y.z.min_ts;
      return x.z.block < y.z.block;
    });
    std::vector<int64_t> last(comms.size(), INT64_MIN);  // per comm, on the current rank
    for (size_t i = 0; i < blocks_.size(); ++i) {
      if (i > 0 && blocks_[i].z.rank != blocks_[i - 1].z.rank)
        std::fill(last.begin(), last.end(), INT64_MIN);
      for (const CommSpan& sp : blocks_[i].spans) {
        if (sp.first < last[sp.comm]) {
          *ok = false;
          return Status::Ok();
        }
        last[sp.comm] = sp.last;
      }
    }
    // The communicators in output order, and each block's as indexes into that order.
    std::vector<size_t> order_of(comms.size());
    for (auto& [key, idx] : comm_index) {
      order_of[idx] = comms_.size();
      comms_.push_back(key);
    }
    for (Block& blk : blocks_)
      for (CommSpan& sp : blk.spans) sp.comm = order_of[sp.comm];
    done_ = false;
    next_comm_ = 0;
    return Next();
  }

  bool done() const { return done_; }
  const Arrival& row() const { return part_[pos_]; }
  const std::vector<std::string>& names() const { return name_strings_; }

  // The next row (or done()).
  Status Next() {
    if (!done_ && ++pos_ < part_.size()) return Status::Ok();
    for (;;) {
      if (comm_open_) {
        TRACEDB_RETURN_IF_ERROR(NextPartition());
        if (!part_.empty()) return Status::Ok();
        comm_open_ = false;
      }
      if (next_comm_ >= comms_.size()) {
        done_ = true;
        return Status::Ok();
      }
      OpenComm(next_comm_++);
    }
  }

 private:
  // A communicator's calls in one block: the first and last seq, in row order.
  struct CommSpan {
    size_t comm;
    int64_t first, last;
  };
  struct Block {
    engine::BlockZoneRow z;
    std::vector<CommSpan> spans;  // one per communicator it holds calls of
  };
  struct RankCursor {
    int64_t rank = 0;
    std::vector<size_t> blocks;  // indexes into blocks_ holding the communicator, in order
    size_t next_block = 0;
    std::vector<Arrival> buf;  // the communicator's calls of the current block
    size_t pos = 0;
  };

  void OpenComm(size_t c) {
    comm_ = c;
    comm_open_ = true;
    cursors_.clear();
    heap_.clear();
    for (size_t bi = 0; bi < blocks_.size(); ++bi) {
      const Block& blk = blocks_[bi];
      if (std::none_of(blk.spans.begin(), blk.spans.end(),
                       [c](const CommSpan& x) { return x.comm == c; }))
        continue;
      if (cursors_.empty() || cursors_.back().rank != blk.z.rank) {
        cursors_.emplace_back();
        cursors_.back().rank = blk.z.rank;
      }
      cursors_.back().blocks.push_back(bi);
    }
    primed_ = false;
  }

  // Makes cursor k's buf hold an unread call, if it has one left.
  Status Fill(RankCursor* k) {
    while (k->pos >= k->buf.size() && k->next_block < k->blocks.size()) {
      const Block& blk = blocks_[k->blocks[k->next_block++]];
      k->buf.clear();
      k->pos = 0;
      Status s = store_.Read(blk.z, kWant, &decoded_);
      if (!s.ok()) return Status::Corruption(Where() + s.message());
      const auto [has_comm, comm] = comms_[comm_];
      for (size_t i = 0; i < decoded_.n; ++i) {
        if (!IsCall(dict_, decoded_, i)) continue;
        const bool hc = (decoded_.arg_mask[i] & EventArgs::kComm) != 0;
        if (hc != has_comm || (hc && static_cast<int64_t>(decoded_.comm[i]) != comm)) continue;
        k->buf.push_back(CallAt(decoded_, i, k->rank, &names_));
      }
    }
    return Status::Ok();
  }

  // Heap of (next seq, cursor), smallest seq on top.
  static bool Later(const std::pair<int64_t, size_t>& x, const std::pair<int64_t, size_t>& y) {
    return x.first > y.first || (x.first == y.first && x.second > y.second);
  }

  Status NextPartition() {
    part_.clear();
    pos_ = 0;
    if (!primed_) {
      primed_ = true;
      for (size_t k = 0; k < cursors_.size(); ++k) {
        TRACEDB_RETURN_IF_ERROR(Fill(&cursors_[k]));
        if (cursors_[k].pos < cursors_[k].buf.size()) {
          heap_.emplace_back(cursors_[k].buf[cursors_[k].pos].seq, k);
          std::push_heap(heap_.begin(), heap_.end(), Later);
        }
      }
    }
    if (heap_.empty()) return Status::Ok();
    const int64_t seq = heap_.front().first;
    while (!heap_.empty() && heap_.front().first == seq) {
      std::pop_heap(heap_.begin(), heap_.end(), Later);
      RankCursor& k = cursors_[heap_.back().second];
      heap_.pop_back();
      for (;;) {
        while (k.pos < k.buf.size() && k.buf[k.pos].seq == seq) part_.push_back(k.buf[k.pos++]);
        if (k.pos < k.buf.size()) break;
        TRACEDB_RETURN_IF_ERROR(Fill(&k));
        if (k.pos >= k.buf.size()) break;
      }
      if (k.pos < k.buf.size()) {
        heap_.emplace_back(k.buf[k.pos].seq, static_cast<size_t>(&k - cursors_.data()));
        std::push_heap(heap_.begin(), heap_.end(), Later);
      }
    }
    // The partition's order and values as comm_match::PartitionArrivals gives them.
    comm_match::PartitionArrivals(&part_,
                                  [&](size_t lo, size_t hi) { SetPartition(&part_, lo, hi); });
    return Status::Ok();
  }

  engine::BlockStore store_;
  Dict dict_;
  std::vector<std::string> name_strings_;
  Names names_;
  std::vector<Block> blocks_;
  std::vector<std::pair<bool, int64_t>> comms_;
  DecodedBlock decoded_;
  size_t next_comm_ = 0, comm_ = 0;
  bool comm_open_ = false, primed_ = false, done_ = true, own_txn_ = false;
  std::vector<RankCursor> cursors_;
  std::vector<std::pair<int64_t, size_t>> heap_;
  std::vector<Arrival> part_;
  size_t pos_ = 0;
};

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
  // The first scan streams the rows where it can; a second scan within the statement (the
  // inner loop of a join) computes the whole table once and keeps it.
  std::unique_ptr<Stream> stream;
  std::unique_ptr<Table> table;
  int scans = 0;
  size_t row = 0;
};

int Fail(Cursor* c, const Status& s) {
  sqlite3_free(c->vtab->base.zErrMsg);
  c->vtab->base.zErrMsg = sqlite3_mprintf("%s", s.message().c_str());
  return SQLITE_ERROR;
}

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
  c->stream.reset();
  Status s;
  try {
    if (c->scans++ == 0) {
      auto st = std::make_unique<Stream>(c->vtab->db.get());
      bool ok = false;
      s = st->Start(&ok);
      if (!s.ok()) return Fail(c, s);
      if (ok) {
        c->stream = std::move(st);
        return SQLITE_OK;
      }
    }
    auto t = std::make_unique<Table>();
    s = Compute(c->vtab->db.get(), t.get());
    if (s.ok()) c->table = std::move(t);
  } catch (const std::bad_alloc&) {
    return SQLITE_NOMEM;
  }
  if (!s.ok()) return Fail(c, s);
  return SQLITE_OK;
}

int Next(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  c->row++;
  if (c->stream) {
    Status s;
    try {
      s = c->stream->Next();
    } catch (const std::bad_alloc&) {
      return SQLITE_NOMEM;
    }
    if (!s.ok()) return Fail(c, s);
  }
  return SQLITE_OK;
}

int Eof(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  if (c->stream) return c->stream->done() ? 1 : 0;
  return !c->table || c->row >= c->table->rows.size() ? 1 : 0;
}

int Column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  const Arrival& a = c->stream ? c->stream->row() : c->table->rows[c->row];
  const std::vector<std::string>& names = c->stream ? c->stream->names() : c->table->names;
  switch (col) {
    case kRank:
      sqlite3_result_int64(ctx, a.rank);
      break;
    case kName:
      if (a.name < 0) {
        sqlite3_result_null(ctx);
      } else {
        const std::string& s = names[static_cast<size_t>(a.name)];
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
