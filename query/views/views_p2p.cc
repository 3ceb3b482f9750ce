// Point-to-point message matching over decoded block columns. See views_p2p.h; the SQL these
// tables replace is ViewsReferenceSql() in query/views/views.cc.
#include "query/views/views_p2p.h"

#include <algorithm>
#include <compare>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <numeric>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/db/block_store.h"
#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "query/sql/vtab_module.h"

namespace tracedb::query {
namespace {

using engine::DecodedBlock;
using engine::EventArgs;

enum class Which { kSends, kReceives, kMessages };

// A result: rows of int64 values, each of which may be NULL.
struct Table {
  int cols = 0;
  std::vector<int64_t> vals;  // row-major
  std::vector<uint8_t> null;  // 1 = NULL, parallel to vals
  size_t rows() const { return cols == 0 ? 0 : vals.size() / static_cast<size_t>(cols); }
  void Add(int64_t v, bool is_null = false) {
    vals.push_back(is_null ? 0 : v);
    null.push_back(is_null ? 1 : 0);
  }
};

// A nullable integer (a typed argument the event may lack).
struct Opt {
  int64_t v = 0;
  bool has = false;
  bool operator==(const Opt& o) const { return has == o.has && (!has || v == o.v); }
  bool operator<(const Opt& o) const {  // NULL first, as SQLite sorts
    return has != o.has ? !has : has && v < o.v;
  }
};

struct Send {
  int64_t id;
  int32_t src;
  Opt comm;
  int64_t src_in_comm;
  int64_t dst_in_comm;  // the peer
  int64_t tag;
  int64_t ts, end_ts;
  Opt bytes;
  int64_t n = 0;
};

struct Recv {
  int64_t id;
  int32_t dst;
  Opt comm;
  int64_t dst_in_comm;
  int64_t src_in_comm;  // the peer
  Opt tag;
  int64_t posted_ts, end_ts;
  Opt bytes;
  int64_t n = 0;
};

// An MPI event the matching reads (cat 'mpi').
struct MpiEvent {
  int64_t id;
  int32_t rank;
  uint32_t name;
  uint32_t mask;
  int64_t ts, end_ts;
  int64_t peer, tag, comm, bytes, flow;
  Opt Arg(uint32_t bit, int64_t v) const { return (mask & bit) ? Opt{v, true} : Opt{}; }
};

struct Inputs {
  std::vector<MpiEvent> events;
  std::unordered_set<uint32_t> send_names, recv_names, irecv_names;
  std::map<std::pair<int64_t, int64_t>, int64_t> rank_in_comm;  // (rank, comm) -> rank in comm
};

std::string Where(const char* table) { return std::string(table) + ": "; }

// Reads the MPI events that `which` can use (sends, receives and their completions) and the
// comms table. `table` names the caller in messages.
Status ReadInputs(engine::Db* db, Which which, const char* table, Inputs* in) {
  const bool want_sends = which != Which::kReceives, want_recvs = which != Which::kSends;
  static const char* const kSends[] = {
      "MPI_Send",   "MPI_Ssend",  "MPI_Bsend",  "MPI_Rsend",    "MPI_Isend",
      "MPI_Issend", "MPI_Ibsend", "MPI_Irsend", "MPI_Sendrecv", "MPI_Sendrecv_replace"};
  static const char* const kRecvs[] = {"MPI_Recv", "MPI_Mrecv"};
  static const char* const kIrecvs[] = {"MPI_Irecv", "MPI_Imrecv"};
  std::unordered_map<std::string, std::unordered_set<uint32_t>*> wanted;
  for (const char* s : kSends) wanted[s] = &in->send_names;
  for (const char* s : kRecvs) wanted[s] = &in->recv_names;
  for (const char* s : kIrecvs) wanted[s] = &in->irecv_names;
  std::unordered_set<uint32_t> mpi_cats;
  {
    auto st = db->Prepare("SELECT id, s FROM main.strings");
    if (!st.ok()) return Status::Corruption(Where(table) + st.status().message());
    for (;;) {
      auto row = st->Step();
      if (!row.ok()) return Status::Corruption(Where(table) + row.status().message());
      if (!*row) break;
      const std::string s(st->Text(1));
      const auto id = static_cast<uint32_t>(st->Int(0));
      if (s == "mpi") mpi_cats.insert(id);
      auto it = wanted.find(s);
      if (it != wanted.end()) it->second->insert(id);
    }
  }
  if (mpi_cats.empty()) return Status::Ok();
  {
    auto st = db->Prepare("SELECT rank, comm, rank_in_comm FROM main.comms");
    if (!st.ok()) return Status::Corruption(Where(table) + st.status().message());
    for (;;) {
      auto row = st->Step();
      if (!row.ok()) return Status::Corruption(Where(table) + row.status().message());
      if (!*row) break;
      // comms' key is (rank, comm): one row each, as the SQL join finds it.
      in->rank_in_comm[{st->Int(0), st->Int(1)}] = st->Int(2);
    }
  }
  // The blocks that hold an event of category "mpi", decoded in one pass by the block store
  // (which checks each one's zone map and row count).
  engine::BlockStore store(db, db->path(), "main");
  engine::BlockSelection sel;
  sel.cats.assign(mpi_cats.begin(), mpi_cats.end());
  std::sort(sel.cats.begin(), sel.cats.end());
  sel.order = engine::BlockSelection::Order::kBlock;
  constexpr uint32_t kWant = engine::kColTrack | engine::kColK | engine::kColName |
                             engine::kColCat | engine::kColTs | engine::kColDur | engine::kColArgs;
  auto per_block = [&](const engine::BlockZoneRow& z, DecodedBlock& b) -> Status {
    const int32_t rank = z.rank;
    for (size_t i = 0; i < b.n; ++i) {
      if (!mpi_cats.count(b.cat[i])) continue;
      // Only what Sends() or Receives() may use is kept (they check again).
      const uint32_t mask = b.arg_mask[i];
      const bool peer = (mask & EventArgs::kPeer) && b.peer[i] >= 0;
      const bool use =
          (want_sends && peer && in->send_names.count(b.name[i])) ||
          (want_recvs &&
           ((peer && in->recv_names.count(b.name[i])) ||
            ((mask & EventArgs::kFlow) && (peer || in->irecv_names.count(b.name[i])))));
      if (!use) continue;
      MpiEvent e;
      e.id = (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.k[i]);
      e.rank = rank;
      e.name = b.name[i];
      e.mask = b.arg_mask[i];
      e.ts = b.ts[i];
      // As events.end_ts: ts + dur (wrapping instead of undefined on overflow).
      e.end_ts =
          static_cast<int64_t>(static_cast<uint64_t>(b.ts[i]) + static_cast<uint64_t>(b.dur[i]));
      e.peer = b.peer[i];
      e.tag = b.tag[i];
      e.comm = b.comm[i];
      e.bytes = static_cast<int64_t>(b.bytes[i]);
      e.flow = static_cast<int64_t>(b.flow[i]);
      in->events.push_back(e);
    }
    return Status::Ok();
  };
  if (Status s = store.ForEachDecoded(sel, kWant, per_block); !s.ok()) {
    return Status::Corruption(Where(table) + s.message());
  }
  return Status::Ok();
}

int64_t RankInComm(const Inputs& in, int32_t rank, const Opt& comm) {
  if (!comm.has) return rank;
  auto it = in.rank_in_comm.find({rank, comm.v});
  return it == in.rank_in_comm.end() ? rank : it->second;
}

// Numbers each partition's rows 1, 2, ... in order of (ts, id), as row_number() does.
template <typename Row, typename Part, typename Ts>
void Number(std::vector<Row>* rows, Part part, Ts ts) {
  std::vector<uint32_t> order(rows->size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Row& x = (*rows)[a];
    const Row& y = (*rows)[b];
    const auto px = part(x), py = part(y);
    if (px != py) return px < py;
    if (ts(x) != ts(y)) return ts(x) < ts(y);
    return x.id < y.id;
  });
  int64_t n = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    Row& r = (*rows)[order[i]];
    n = i > 0 && part((*rows)[order[i - 1]]) == part(r) ? n + 1 : 1;
    r.n = n;
  }
}

std::vector<Send> Sends(const Inputs& in) {
  std::vector<Send> out;
  for (const MpiEvent& e : in.events) {
    if (!in.send_names.count(e.name)) continue;
    if (!(e.mask & EventArgs::kPeer) || e.peer < 0 || !(e.mask & EventArgs::kTag)) continue;
    const Opt comm = e.Arg(EventArgs::kComm, e.comm);
    out.push_back(Send{e.id, e.rank, comm, RankInComm(in, e.rank, comm), e.peer, e.tag, e.ts,
                       e.end_ts, e.Arg(EventArgs::kBytes, e.bytes)});
  }
  Number(
      &out, [](const Send& s) { return std::make_tuple(s.src, s.comm, s.dst_in_comm, s.tag); },
      [](const Send& s) { return s.ts; });
  return out;
}

std::vector<Recv> Receives(const Inputs& in) {
  std::vector<Recv> out;
  // Blocking receives carry their source and tag.
  for (const MpiEvent& e : in.events) {
    if (!in.recv_names.count(e.name) || !(e.mask & EventArgs::kPeer) || e.peer < 0) continue;
    const Opt comm = e.Arg(EventArgs::kComm, e.comm);
    out.push_back(Recv{e.id, e.rank, comm, RankInComm(in, e.rank, comm), e.peer,
                       e.Arg(EventArgs::kTag, e.tag), e.ts, e.end_ts,
                       e.Arg(EventArgs::kBytes, e.bytes)});
  }
  // Nonblocking ones: the posting call (MPI_Irecv) and every other MPI event of its rank with
  // its flow and a source (the completion), joined on (rank, flow).
  struct PairHash {
    size_t operator()(const std::pair<int32_t, int64_t>& k) const {
      return std::hash<int64_t>()(k.second * 1000003 + k.first);
    }
  };
  // The postings of each (rank, flow): the first in `posted`, the others chained through `next`
  // (no allocation per key).
  std::unordered_map<std::pair<int32_t, int64_t>, uint32_t, PairHash> posted;
  std::vector<uint32_t> next;
  constexpr uint32_t kNone = UINT32_MAX;
  for (uint32_t i = 0; i < in.events.size(); ++i) {
    const MpiEvent& e = in.events[i];
    if (!in.irecv_names.count(e.name) || !(e.mask & EventArgs::kFlow)) continue;
    if (next.empty()) next.assign(in.events.size(), kNone);
    auto [it, fresh] = posted.try_emplace({e.rank, e.flow}, i);
    if (!fresh) {  // append, keeping the postings in event order
      uint32_t last = it->second;
      while (next[last] != kNone) last = next[last];
      next[last] = i;
    }
  }
  if (!posted.empty()) {
    for (const MpiEvent& d : in.events) {
      if (!(d.mask & EventArgs::kFlow) || !(d.mask & EventArgs::kPeer) || d.peer < 0) continue;
      auto it = posted.find({d.rank, d.flow});
      if (it == posted.end()) continue;
      for (uint32_t si = it->second; si != kNone; si = next[si]) {
        const MpiEvent& s = in.events[si];
        if (s.id == d.id) continue;
        const Opt comm = s.Arg(EventArgs::kComm, s.comm);
        out.push_back(Recv{d.id, s.rank, comm, RankInComm(in, s.rank, comm), d.peer,
                           d.Arg(EventArgs::kTag, d.tag), s.ts, d.end_ts,
                           d.Arg(EventArgs::kBytes, d.bytes)});
      }
    }
  }
  Number(
      &out, [](const Recv& r) { return std::make_tuple(r.dst, r.comm, r.src_in_comm, r.tag); },
      [](const Recv& r) { return r.posted_ts; });
  return out;
}

struct MatchKey {
  int64_t comm, dst, src, tag, n;
  auto operator<=>(const MatchKey&) const = default;
};

Status Compute(engine::Db* db, Which which, const char* table, Table* out) {
  Inputs in;
  TRACEDB_RETURN_IF_ERROR(ReadInputs(db, which, table, &in));
  out->vals.clear();
  out->null.clear();
  out->cols = 10;
  if (which == Which::kSends) {
    for (const Send& s : Sends(in)) {
      out->Add(s.id);
      out->Add(s.src);
      out->Add(s.comm.v, !s.comm.has);
      out->Add(s.src_in_comm);
      out->Add(s.dst_in_comm);
      out->Add(s.tag);
      out->Add(s.ts);
      out->Add(s.end_ts);
      out->Add(s.bytes.v, !s.bytes.has);
      out->Add(s.n);
    }
    return Status::Ok();
  }
  const std::vector<Recv> recvs = Receives(in);
  if (which == Which::kReceives) {
    for (const Recv& r : recvs) {
      out->Add(r.id);
      out->Add(r.dst);
      out->Add(r.comm.v, !r.comm.has);
      out->Add(r.dst_in_comm);
      out->Add(r.src_in_comm);
      out->Add(r.tag.v, !r.tag.has);
      out->Add(r.posted_ts);
      out->Add(r.end_ts);
      out->Add(r.bytes.v, !r.bytes.has);
      out->Add(r.n);
    }
    return Status::Ok();
  }
  // Messages: sends meet receives on (comm, dst_in_comm, src_in_comm, tag, n); a NULL comm or
  // tag matches nothing (SQL's `=`). A sort-merge join: both sides sorted by that key, every
  // pair of rows with equal keys emitted.
  const std::vector<Send> sends = Sends(in);
  auto recv_key = [&](uint32_t i) {
    const Recv& r = recvs[i];
    return MatchKey{r.comm.v, r.dst_in_comm, r.src_in_comm, r.tag.v, r.n};
  };
  auto send_key = [&](uint32_t i) {
    const Send& x = sends[i];
    return MatchKey{x.comm.v, x.dst_in_comm, x.src_in_comm, x.tag, x.n};
  };
  std::vector<uint32_t> ri, si;
  for (uint32_t i = 0; i < recvs.size(); ++i)
    if (recvs[i].comm.has && recvs[i].tag.has) ri.push_back(i);
  for (uint32_t i = 0; i < sends.size(); ++i)
    if (sends[i].comm.has) si.push_back(i);
  std::stable_sort(ri.begin(), ri.end(),
                   [&](uint32_t a, uint32_t b) { return recv_key(a) < recv_key(b); });
  std::stable_sort(si.begin(), si.end(),
                   [&](uint32_t a, uint32_t b) { return send_key(a) < send_key(b); });
  size_t a = 0, b = 0;
  while (a < si.size() && b < ri.size()) {
    const MatchKey ks = send_key(si[a]), kr = recv_key(ri[b]);
    if (ks < kr) {
      ++a;
      continue;
    }
    if (kr < ks) {
      ++b;
      continue;
    }
    size_t a_end = a + 1, b_end = b + 1;
    while (a_end < si.size() && send_key(si[a_end]) == ks) ++a_end;
    while (b_end < ri.size() && recv_key(ri[b_end]) == ks) ++b_end;
    for (size_t x = a; x < a_end; ++x) {
      for (size_t y = b; y < b_end; ++y) {
        const Send& s = sends[si[x]];
        const Recv& r = recvs[ri[y]];
        out->Add(s.id);
        out->Add(r.id);
        out->Add(s.src);
        out->Add(r.dst);
        out->Add(s.comm.v);
        out->Add(s.tag);
        out->Add(s.bytes.v, !s.bytes.has);
        out->Add(s.ts);
        out->Add(r.end_ts);
        out->Add(
            static_cast<int64_t>(static_cast<uint64_t>(r.end_ts) - static_cast<uint64_t>(s.ts)));
      }
    }
    a = a_end;
    b = b_end;
  }
  return Status::Ok();
}

// ---- the virtual tables ----

struct Module {
  Which which;
  const char* name;
  const char* schema;
};

const Module kModules[] = {
    // A column the SQL computes (coalesce, row_number, a difference) has no affinity there, and
    // none here (no declared type): `n > '1'` compares as the SQL view does.
    {Which::kSends, "tracedb_p2p_sends",
     "CREATE TABLE x(id INTEGER, src INTEGER, comm INTEGER, src_in_comm, dst_in_comm INTEGER, "
     "tag INTEGER, ts INTEGER, end_ts INTEGER, bytes INTEGER, n)"},
    {Which::kReceives, "tracedb_p2p_receives",
     "CREATE TABLE x(id INTEGER, dst INTEGER, comm INTEGER, dst_in_comm, src_in_comm INTEGER, "
     "tag INTEGER, posted_ts INTEGER, end_ts INTEGER, bytes INTEGER, n)"},
    {Which::kMessages, "tracedb_p2p_messages",
     "CREATE TABLE x(send_id INTEGER, recv_id INTEGER, src INTEGER, dst INTEGER, comm INTEGER, "
     "tag INTEGER, bytes INTEGER, send_ts INTEGER, recv_end_ts INTEGER, latency_ns)"},
};

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

int BestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  // Nothing is pushed down: the whole table is computed, once per statement.
  info->estimatedCost = 1e9;
  info->estimatedRows = 1000000;
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
  return !c->table || c->row >= c->table->rows() ? 1 : 0;
}

int Column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  const Table& t = *c->table;
  const size_t at = c->row * static_cast<size_t>(t.cols) + static_cast<size_t>(col);
  if (t.null[at])
    sqlite3_result_null(ctx);
  else
    sqlite3_result_int64(ctx, t.vals[at]);
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

int RegisterP2pModules(sqlite3* db) {
  static const sqlite3_module module = MakeModule();
  for (const Module& m : kModules) {
    const int rc = sqlite3_create_module_v2(db, m.name, &module, const_cast<Module*>(&m), nullptr);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

}  // namespace tracedb::query
