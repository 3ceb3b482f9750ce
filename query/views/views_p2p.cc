// Point-to-point message matching over decoded block columns. See views_p2p.h; the SQL these
// tables replace is ViewsReferenceSql() in query/views/views.cc. The matching is the one matcher
// of comm_match.h (the why model's too); this file reads its inputs and writes the tables.
#include "query/views/views_p2p.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/db/block_store.h"
#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "engine/util/saturating.h"
#include "query/sql/vtab_module.h"
#include "query/views/comm_match.h"

namespace tracedb::query {
namespace {

using engine::DecodedBlock;
using engine::EventArgs;
namespace cm = comm_match;

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

// An MPI event the matching reads (cat 'mpi'): what comm_match.h reads of one, and the
// columns of the tables.
struct MpiEvent {
  int64_t id;
  int32_t rank;
  uint32_t name;
  uint32_t mask;
  int64_t ts, end_ts;
  int64_t peer, tag, comm, bytes, flow;
};

struct Inputs {
  std::vector<MpiEvent> events;
  std::unordered_map<uint32_t, uint8_t> roles;  // string id -> comm_match::Role bits
  std::map<std::pair<int64_t, int64_t>, int64_t> rank_in_comm;  // (rank, comm) -> rank in comm
  uint8_t Role(uint32_t name) const {
    auto it = roles.find(name);
    return it == roles.end() ? 0 : it->second;
  }
  int64_t RankInComm(int32_t rank, const cm::Opt& comm) const {
    if (!comm.has) return rank;
    auto it = rank_in_comm.find({rank, comm.v});
    return it == rank_in_comm.end() ? rank : it->second;
  }
};

// A typed argument as a nullable value.
cm::Opt Arg(const MpiEvent& e, uint32_t bit, int64_t v) {
  return (e.mask & bit) ? cm::Opt{v, true} : cm::Opt{};
}

std::string Where(const char* table) { return std::string(table) + ": "; }

// Reads the MPI events that `which` can use (sends, receives and their completions) and the
// comms table. `table` names the caller in messages.
Status ReadInputs(engine::Db* db, Which which, const char* table, Inputs* in) {
  const bool want_sends = which != Which::kReceives, want_recvs = which != Which::kSends;
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
      if (const uint8_t role = cm::RoleOfName(s)) in->roles[id] |= role;
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
      const uint8_t role = in->Role(b.name[i]);
      const bool use =
          (want_sends && peer && (role & cm::kSend)) ||
          (want_recvs && ((peer && (role & cm::kRecv)) ||
                          ((mask & EventArgs::kFlow) && (peer || (role & cm::kPost)))));
      if (!use) continue;
      MpiEvent e;
      e.id = (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.k[i]);
      e.rank = rank;
      e.name = b.name[i];
      e.mask = b.arg_mask[i];
      e.ts = b.ts[i];
      e.end_ts = engine::SaturatingAdd(b.ts[i], b.dur[i]);  // as events.end_ts
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

Status Compute(engine::Db* db, Which which, const char* table, Table* out) {
  Inputs in;
  TRACEDB_RETURN_IF_ERROR(ReadInputs(db, which, table, &in));
  out->vals.clear();
  out->null.clear();
  out->cols = 10;
  auto role = [&](uint32_t name) { return in.Role(name); };
  auto in_comm = [&](int32_t rank, const cm::Opt& comm) { return in.RankInComm(rank, comm); };
  if (which == Which::kSends) {
    for (const cm::Send& s : cm::Sends(in.events, role, in_comm)) {
      const MpiEvent& e = in.events[s.ev];
      const cm::Opt bytes = Arg(e, EventArgs::kBytes, e.bytes);
      out->Add(s.id);
      out->Add(s.src);
      out->Add(s.comm.v, !s.comm.has);
      out->Add(s.src_in_comm);
      out->Add(s.dst_in_comm);
      out->Add(s.tag);
      out->Add(s.ts);
      out->Add(e.end_ts);
      out->Add(bytes.v, !bytes.has);
      out->Add(s.n);
    }
    return Status::Ok();
  }
  const std::vector<cm::Recv> recvs = cm::Receives(in.events, role, in_comm);
  if (which == Which::kReceives) {
    for (const cm::Recv& r : recvs) {
      // The columns of the event that carries the source (the completion of a nonblocking one).
      const MpiEvent& e = in.events[r.ev];
      const cm::Opt bytes = Arg(e, EventArgs::kBytes, e.bytes);
      out->Add(r.id);
      out->Add(r.dst);
      out->Add(r.comm.v, !r.comm.has);
      out->Add(r.dst_in_comm);
      out->Add(r.src_in_comm);
      out->Add(r.tag.v, !r.tag.has);
      out->Add(r.posted_ts);
      out->Add(e.end_ts);
      out->Add(bytes.v, !bytes.has);
      out->Add(r.n);
    }
    return Status::Ok();
  }
  // Messages: the one matcher's sort-merge join (comm_match.h).
  const std::vector<cm::Send> sends = cm::Sends(in.events, role, in_comm);
  cm::JoinMessages(sends, recvs, [&](const cm::Send& s, const cm::Recv& r) {
    const MpiEvent& se = in.events[s.ev];
    const int64_t recv_end_ts = in.events[r.ev].end_ts;
    const cm::Opt bytes = Arg(se, EventArgs::kBytes, se.bytes);
    out->Add(s.id);
    out->Add(r.id);
    out->Add(s.src);
    out->Add(r.dst);
    out->Add(s.comm.v);
    out->Add(s.tag);
    out->Add(bytes.v, !bytes.has);
    out->Add(s.ts);
    out->Add(recv_end_ts);
    out->Add(
        static_cast<int64_t>(static_cast<uint64_t>(recv_end_ts) - static_cast<uint64_t>(s.ts)));
  });
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
