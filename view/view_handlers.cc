// The `tracedb view` server's read handlers: /api/meta, /api/window (level of detail, view/lod.h),
// /api/event (an event and its parents), /api/search and /api/sql (client SQL under
// view/sql_guard.h, rows as JSON by query/export/json_rows.h). API: docs/view.md.
#include <algorithm>
#include <chrono>

#include "engine/db/block_store.h"
#include "engine/db/event_block.h"
#include "engine/util/coding.h"
#include "engine/util/json_text.h"
#include "query/export/json_rows.h"
#include "view/sql_guard.h"
#include "view/view_params.h"
#include "view/view_server_impl.h"

namespace tracedb::view {

using engine::Db;
using engine::Stmt;

void ViewServer::Impl::Meta(const httplib::Request&, httplib::Response& res) {
  res.set_content(meta_json, kJson);
}

void ViewServer::Impl::Window(const httplib::Request& req, httplib::Response& res) {
  // t0, t1: ns after the job's first event (meta.origin).
  int64_t t0 = 0, t1 = 0, px = 1000, seq = 0;
  if (!IntParam(req, res, "t0", &t0, true) || !IntParam(req, res, "t1", &t1, true) ||
      !IntParam(req, res, "px", &px, false, 1, 20000) ||
      !IntParam(req, res, "seq", &seq, false, 0)) {
    return;
  }
  if (t1 <= t0) {
    Error(res, 400,
          "empty window: t1 (" + std::to_string(t1) + ") must be after t0 (" + std::to_string(t0) +
              ")");
    return;
  }
  WindowRequest w;
  w.t0 = engine::SaturatingAdd(origin, t0);
  w.t1 = engine::SaturatingAdd(origin, t1);
  if (w.t1 <= w.t0) {
    Error(res, 400, "window out of range");
    return;
  }
  w.px = static_cast<int>(px);
  w.max_block_span = max_block_span;
  w.cache = block_cache.get();
  if (!TrackListParam(req, res, &w.tracks)) return;
  std::shared_ptr<std::atomic<int64_t>> newest;
  if (req.has_param("client")) {
    const std::string client = req.get_param_value("client").substr(0, 64);
    std::lock_guard<std::mutex> l(seq_mu);
    if (latest.size() > 10000) latest.clear();  // bounded; a cleared client just restarts
    auto& slot = latest[client];
    if (!slot) slot = std::make_shared<std::atomic<int64_t>>(seq);
    int64_t cur = slot->load();
    while (cur < seq && !slot->compare_exchange_weak(cur, seq)) {
    }
    newest = slot;
    w.cancelled = [newest, seq] { return newest->load() > seq; };
  }
  auto db = Acquire();
  if (!db.ok()) {
    Error(res, 500, db.status().message());
    return;
  }
  // Unknown tracks are an error, not an empty answer.
  if (!w.tracks.empty()) {
    auto st = (*db)->Prepare("SELECT 1 FROM tracks WHERE track = ?1");
    if (!st.ok()) {
      Error(res, 500, st.status().message());
      Release(std::move(*db));
      return;
    }
    for (uint32_t t : w.tracks) {
      st->Reset();
      st->Bind(1, t);
      auto row = st->Step();
      if (!row.ok() || !*row) {
        Error(res, 404, "unknown track " + std::to_string(t));
        Release(std::move(*db));
        return;
      }
    }
  }
  WindowResult r;
  const auto started = std::chrono::steady_clock::now();
  Status s = ComputeWindow(db->get(), w, &r);
  if (!s.ok()) {
    Release(std::move(*db));
    const int code = s.code() == Status::Code::kAborted           ? 409
                     : s.code() == Status::Code::kInvalidArgument ? 400
                                                                  : 500;
    Error(res, code, s.message());
    return;
  }
  // Names of the answer.
  std::unordered_map<uint32_t, std::string> local;
  auto name_of = [&](uint32_t id) -> std::string {
    {
      std::lock_guard<std::mutex> l(names_mu);
      auto it = names.find(id);
      if (it != names.end()) return it->second;
    }
    std::string text;
    auto st = (*db)->Prepare("SELECT s FROM strings WHERE id = ?1");
    if (st.ok()) {
      st->Bind(1, static_cast<int64_t>(id));
      auto row = st->Step();
      if (row.ok() && *row) text = std::string(st->Text(0));
    }
    std::lock_guard<std::mutex> l(names_mu);
    if (names.size() < 1000000) names[id] = text;
    return text;
  };
  std::string body = WindowJson(r, w, name_of);
  Release(std::move(*db));
  // Times in the answer are relative to t0; say which t0 that is in the request's terms.
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  body.insert(body.size() - 1,
              ",\"origin_t0\":" + std::to_string(t0) + ",\"server_ms\":" + std::to_string(ms));
  res.set_content(std::move(body), kJson);
}

StatusOr<int64_t> ViewServer::Impl::FindTs(Db* db, int64_t rank, int64_t id, int64_t start_before,
                                           int64_t end_after) {
  // The blocks of the rank that may hold an event starting by `start_before` and ending at or
  // after `end_after` (the zone maps), latest first, decoded until the event is found; a
  // damaged block is passed over.
  engine::BlockStore store(db, db->path());
  engine::BlockSelection sel;
  sel.ranks = {rank};
  sel.ts_hi = start_before;
  sel.ts_lo = end_after;
  sel.order = engine::BlockSelection::Order::kTimeDesc;
  engine::DecodedBlock b;
  const auto track = static_cast<uint32_t>(static_cast<uint64_t>(id) >> 32);
  const auto k = static_cast<uint64_t>(id) & 0xffffffffu;
  TRACEDB_ASSIGN_OR_RETURN(std::vector<engine::BlockZoneRow> zones, store.Select(sel));
  for (const engine::BlockZoneRow& z : zones) {
    if (!store.Read(z, engine::kColTrack | engine::kColK | engine::kColTs, &b).ok()) continue;
    for (size_t i = 0; i < b.n; ++i) {
      if (b.track[i] == track && b.k[i] == k) return b.ts[i];
    }
  }
  return Status::NotFound("event " + std::to_string(id) + " not found");
}

Status ViewServer::Impl::EventJson(Db* db, int64_t id, int64_t ts, std::string* out,
                                   int64_t* parent, int64_t* rank) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt tr, db->Prepare("SELECT rank FROM tracks WHERE track = ?1"));
  tr.Bind(1, static_cast<int64_t>(static_cast<uint64_t>(id) >> 32));
  TRACEDB_ASSIGN_OR_RETURN(bool known, tr.Step());
  if (!known) return Status::NotFound("unknown track in event id " + std::to_string(id));
  *rank = tr.Int(0);
  const std::string sql = "SELECT * FROM events WHERE rank = " + std::to_string(*rank) +
                          " AND ts = " + std::to_string(ts) + " AND id = " + std::to_string(id);
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare(sql));
  TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row)
    return Status::NotFound("no event " + std::to_string(id) + " at ts " + std::to_string(ts));
  *out = "{\"sql\":" + Quote(sql) + ",\"fields\":{";
  *parent = -1;
  for (int c = 0; c < sqlite3_column_count(st.raw()); ++c) {
    if (c) *out += ',';
    const std::string name = st.ColumnName(c);
    engine::json::AppendString(out, name);
    *out += ':';
    query::json::AppendColumn(out, st, c, query::json::BigInts::kString);
    if (name == "parent" && !st.IsNull(c)) *parent = st.Int(c);
  }
  *out += "}}";
  return Status::Ok();
}

void ViewServer::Impl::Event(const httplib::Request& req, httplib::Response& res) {
  // id: the event id; ts: its start, ns since the epoch (the window answer gives both).
  int64_t id = 0, ts = 0;
  if (!IntParam(req, res, "id", &id, true, 0) || !IntParam(req, res, "ts", &ts, true)) return;
  auto db = Acquire();
  if (!db.ok()) {
    Error(res, 500, db.status().message());
    return;
  }
  ScopedDeadline deadline(db->get(), o.sql_timeout_ms);
  std::string ev, body;
  int64_t parent = -1, rank = 0;
  Status s = EventJson(db->get(), id, ts, &ev, &parent, &rank);
  if (!s.ok()) {
    Release(std::move(*db));
    Error(res, s.code() == Status::Code::kNotFound ? 404 : 500, s.message());
    return;
  }
  body = "{\"event\":" + ev + ",\"parents\":[";
  // The parent chain, innermost first (bounded by the depth limit of the format).
  int64_t child_ts = ts;
  for (int n = 0; parent >= 0 && n < 256; ++n) {
    auto pts = FindTs(db->get(), rank, parent, child_ts, child_ts);
    if (!pts.ok()) break;
    int64_t next = -1, r = 0;
    std::string p;
    if (!EventJson(db->get(), parent, *pts, &p, &next, &r).ok()) break;
    if (n) body += ',';
    body += p;
    parent = next;
    child_ts = *pts;
  }
  body += "]}";
  Release(std::move(*db));
  res.set_content(std::move(body), kJson);
}

Status ViewServer::Impl::RunSql(Db* db, const std::string& sql,
                                const std::vector<std::string>& args, size_t max_rows,
                                std::string* out) {
  size_t used = 0;
  // Read-only in every sense while prepared and run (view/sql_guard.h).
  ScopedClientSql client(db);
  auto prepared = db->PrepareFirst(sql, &used);
  if (!prepared.ok()) {
    if (sqlite3_errcode(db->raw()) == SQLITE_AUTH) {
      return Status::InvalidArgument(
          "not allowed in the viewer (read-only: no ATTACH, no PRAGMA "
          "that sets, no transaction): " +
          prepared.status().message());
    }
    return prepared.status();
  }
  Stmt st = std::move(*prepared);
  if (st.raw() == nullptr) return Status::InvalidArgument("no SQL statement given");
  if (sql.find_first_not_of(" \t\r\n;", used) != std::string::npos) {
    return Status::InvalidArgument("one statement at a time, please");
  }
  if (!sqlite3_stmt_readonly(st.raw())) {
    return Status::InvalidArgument("the viewer's database is read-only");
  }
  const size_t max_bytes = kMaxSqlBodyBytes;
  for (size_t i = 0; i < args.size(); ++i) st.Bind(static_cast<int>(i + 1), args[i]);
  const int cols = sqlite3_column_count(st.raw());
  *out = "{\"columns\":[";
  for (int c = 0; c < cols; ++c) {
    if (c) *out += ',';
    engine::json::AppendString(out, st.ColumnName(c));
  }
  *out += "],\"rows\":[";
  size_t n = 0;
  bool truncated = false;
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    if (n == max_rows || out->size() > max_bytes) {
      truncated = true;
      break;
    }
    if (n++) *out += ',';
    *out += '[';
    for (int c = 0; c < cols; ++c) {
      if (c) *out += ',';
      query::json::AppendColumn(out, st, c, query::json::BigInts::kString);
    }
    *out += ']';
  }
  *out += "],\"truncated\":";
  *out += truncated ? "true" : "false";
  *out += '}';
  return Status::Ok();
}

void ViewServer::Impl::AnswerSql(httplib::Response& res, const std::string& sql,
                                 const std::vector<std::string>& args, size_t max_rows) {
  auto db = Acquire();
  if (!db.ok()) {
    Error(res, 500, db.status().message());
    return;
  }
  std::string body;
  Status s;
  {
    ScopedDeadline deadline(db->get(), o.sql_timeout_ms);
    s = RunSql(db->get(), sql, args, max_rows, &body);
  }
  Release(std::move(*db));
  if (!s.ok()) {
    Error(res, 400, s.message());
    return;
  }
  res.set_content(std::move(body), kJson);
}

void ViewServer::Impl::Sql(const httplib::Request& req, httplib::Response& res) {
  if (!req.has_param("q")) {
    Error(res, 400, "missing parameter 'q' (the SQL)");
    return;
  }
  AnswerSql(res, req.get_param_value("q"), {}, kMaxSqlRows);
}

void ViewServer::Impl::Search(const httplib::Request& req, httplib::Response& res) {
  // glob: a name pattern (SQLite GLOB: * ? [...]); t0, t1 as for /api/window (optional).
  int64_t t0 = INT64_MIN / 2, t1 = INT64_MAX / 2;
  if (!IntParam(req, res, "t0", &t0, false) || !IntParam(req, res, "t1", &t1, false)) return;
  if (!req.has_param("glob") || req.get_param_value("glob").empty()) {
    Error(res, 400, "missing parameter 'glob' (a name pattern such as MPI_*)");
    return;
  }
  AnswerSql(res,
            "SELECT id, rank, track, name, ts - " + std::to_string(origin) +
                " AS rel_ts, dur, ts FROM events WHERE name IN "
                "(SELECT s FROM strings WHERE s GLOB ?1) AND ts < ?2 + " +
                std::to_string(origin) + " AND end_ts >= ?3 + " + std::to_string(origin) +
                " ORDER BY dur DESC LIMIT " + std::to_string(kMaxSearchRows + 1),
            {req.get_param_value("glob"), std::to_string(t1), std::to_string(t0)}, kMaxSearchRows);
}

}  // namespace tracedb::view
