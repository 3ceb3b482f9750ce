// The `tracedb view` server. See view_server.h; the API is documented in docs/view.md.
#include "view/view_server.h"

#include "view/sql_guard.h"

#include <httplib.h>
#include <sys/random.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/db/db_schema.h"
#include "engine/db/event_block.h"
#include "engine/util/coding.h"
#include "engine/util/parse_number.h"
#include "query/export/block_select.h"
#include "query/export/json_text.h"
#include "query/open/query_db.h"
#include "view/assets.h"
#include "view/lod.h"
#include "view/why_overlay.h"

namespace tracedb::view {
namespace {

using engine::Db;
using engine::Stmt;

constexpr size_t kMaxSqlRows = 5000;
constexpr size_t kMaxSqlBodyBytes = 16 << 20;  // an SQL answer stops (truncated) past this
constexpr size_t kMaxSearchRows = 2000;
constexpr size_t kMaxFlows = 4000;
constexpr size_t kMaxSteps = 100000;

std::string RandomToken() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    const ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string t;
  for (unsigned char c : b) {
    t += kHex[c >> 4];
    t += kHex[c & 15];
  }
  return t;
}

bool SameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

// The type of every JSON answer. Debian's cpp-httplib is built with brotli and compresses, at
// brotli's highest quality, any answer whose type is exactly "application/json" (or starts with
// "text/") for a client that accepts it, as browsers do: 2 s of server CPU for a 350 KB window
// on a loaded machine, for nothing over loopback. A charset parameter makes it send as is.
constexpr char kJson[] = "application/json; charset=utf-8";

std::string Quote(std::string_view s) {
  std::string out;
  query::json::AppendString(&out, s);
  return out;
}

void Error(httplib::Response& res, int status, std::string_view msg) {
  res.status = status;
  res.set_content("{\"error\":" + Quote(msg) + "}", kJson);
}

// A request parameter that must be an integer: false (and a 400 answer) when it is not.
bool IntParam(const httplib::Request& req, httplib::Response& res, const char* name, int64_t* out,
              bool required, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) {
  if (!req.has_param(name)) {
    if (!required) return true;
    Error(res, 400, std::string("missing parameter '") + name + "'");
    return false;
  }
  const std::string v = req.get_param_value(name);
  int64_t x = 0;
  if (!engine::ParseInt64(v, &x)) {
    Error(res, 400,
          std::string("parameter '") + name + "' is not an integer: '" + v.substr(0, 64) + "'");
    return false;
  }
  if (x < lo || x > hi) {
    Error(res, 400,
          std::string("parameter '") + name + "' = " + v + " is out of range [" +
              std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return false;
  }
  *out = x;
  return true;
}

// The value of column `c` of `st` as JSON (integers as numbers when doubles hold them
// exactly, else as strings).
void AppendColumn(std::string* s, const Stmt& st, int c) {
  switch (sqlite3_column_type(st.raw(), c)) {
    case SQLITE_NULL:
      s->append("null");
      break;
    case SQLITE_INTEGER: {
      const int64_t v = st.Int(c);
      const bool exact = v <= (int64_t{1} << 53) && v >= -(int64_t{1} << 53);
      if (!exact) s->push_back('"');
      s->append(std::to_string(v));
      if (!exact) s->push_back('"');
      break;
    }
    case SQLITE_FLOAT: {
      const double v = sqlite3_column_double(st.raw(), c);
      if (!std::isfinite(v)) {
        s->append("null");
      } else {
        char buf[40];
        s->append(buf, query::json::WriteDouble(buf, v));
      }
      break;
    }
    case SQLITE_BLOB:
      s->append("\"<blob " + std::to_string(st.Blob(c).size()) + " bytes>\"");
      break;
    default:
      query::json::AppendString(s, st.Text(c));
  }
}

}  // namespace

struct ViewServer::Impl {
  ViewServerOptions o;
  httplib::Server http;
  int port = 0;

  // Job facts, read once.
  int64_t origin = 0, end = 0;
  std::string meta_json;
  int64_t max_block_span = -1;              // ns, WindowRequest::max_block_span
  std::unique_ptr<BlockCache> block_cache;  // null when o.block_cache_mb is 0

  // Database connections, one per concurrent request.
  std::mutex pool_mu;
  std::vector<std::unique_ptr<Db>> pool;

  // The newest window request of each client: older ones still running give up.
  std::mutex seq_mu;
  std::unordered_map<std::string, std::shared_ptr<std::atomic<int64_t>>> latest;

  // Interned strings (name ids of window answers).
  std::mutex names_mu;
  std::unordered_map<uint32_t, std::string> names;

  Status Init();
  StatusOr<std::unique_ptr<Db>> Acquire();
  void Release(std::unique_ptr<Db> db);
  void Routes();
  bool Authorized(const httplib::Request& req) const;
  bool HostAllowed(const httplib::Request& req) const;

  void Meta(const httplib::Request& req, httplib::Response& res);
  void Window(const httplib::Request& req, httplib::Response& res);
  void Event(const httplib::Request& req, httplib::Response& res);
  void Search(const httplib::Request& req, httplib::Response& res);
  void Sql(const httplib::Request& req, httplib::Response& res);
  void Flows(const httplib::Request& req, httplib::Response& res);
  void Why(const httplib::Request& req, httplib::Response& res);
  // The critical path and wait states, analysed once over the whole job (first /api/why).
  std::mutex why_mu;
  bool why_built = false;
  std::string why_error;
  WhyOverlay why;
  // Flow pairs, matched once over the whole job (the first /api/flows request builds them).
  struct FlowPair {
    uint32_t label = 0;  // index into flow_labels ("message", or the collective's name)
    int64_t a_id = 0, a_ts = 0, b_id = 0, b_ts = 0, extra = 0;
  };
  std::mutex flows_mu;
  bool flows_built = false;
  std::string flows_error;
  std::vector<FlowPair> flows;  // by a_ts
  std::vector<std::string> flow_labels;
  int64_t flow_longest = 0;
  Status BuildFlows(Db* db);

  Status EventJson(Db* db, int64_t id, int64_t ts, std::string* out, int64_t* parent,
                   int64_t* rank);
  StatusOr<int64_t> FindTs(Db* db, int64_t rank, int64_t id, int64_t start_before,
                           int64_t end_after);
  // Runs `sql` (one statement) into {"columns":[…],"rows":[[…]…],"truncated":b}.
  Status RunSql(Db* db, const std::string& sql, const std::vector<std::string>& args,
                size_t max_rows, std::string* out);
};

StatusOr<std::unique_ptr<Db>> ViewServer::Impl::Acquire() {
  {
    std::lock_guard<std::mutex> l(pool_mu);
    if (!pool.empty()) {
      std::unique_ptr<Db> db = std::move(pool.back());
      pool.pop_back();
      return db;
    }
  }
  TRACEDB_ASSIGN_OR_RETURN(std::unique_ptr<Db> db, query::OpenQueryDb(o.db_path, false));
  TRACEDB_RETURN_IF_ERROR(db->Exec("PRAGMA query_only = ON"));
  // The events table connected now, outside the client SQL's authorizer (its constructor
  // declares the table's schema, which the authorizer would refuse).
  TRACEDB_RETURN_IF_ERROR(db->Exec("SELECT 1 FROM events LIMIT 0"));
  return db;
}

void ViewServer::Impl::Release(std::unique_ptr<Db> db) {
  std::lock_guard<std::mutex> l(pool_mu);
  pool.push_back(std::move(db));
}

Status ViewServer::Impl::Init() {
  TRACEDB_ASSIGN_OR_RETURN(std::unique_ptr<Db> db, Acquire());
  Db* d = db.get();
  TRACEDB_ASSIGN_OR_RETURN(origin, d->QueryInt("SELECT coalesce(min(min_ts), 0) FROM blocks"));
  TRACEDB_ASSIGN_OR_RETURN(end, d->QueryInt("SELECT coalesce(max(max_end), 0) FROM blocks"));
  TRACEDB_ASSIGN_OR_RETURN(int64_t events,
                           d->QueryInt("SELECT coalesce(sum(count), 0) FROM blocks"));
  std::string m = "{\"db\":" + Quote(o.db_path) + ",\"origin\":\"" + std::to_string(origin) +
                  "\",\"duration\":" + std::to_string(std::max<int64_t>(0, end - origin)) +
                  ",\"events\":" + std::to_string(events) + ",\"ranks\":[";
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st,
                             d->Prepare("SELECT DISTINCT b.rank, r.host FROM blocks b "
                                        "LEFT JOIN ranks r ON r.rank = b.rank ORDER BY 1"));
    bool first = true;
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      if (!first) m += ',';
      first = false;
      m += "{\"rank\":" + std::to_string(st.Int(0)) + ",\"host\":" + Quote(st.Text(1)) + "}";
    }
  }
  m += "],\"tracks\":[";
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, d->Prepare("SELECT track, rank, kind, name, tid, sort_index FROM tracks "
                            "ORDER BY rank, sort_index, track"));
    bool first = true;
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      if (!first) m += ',';
      first = false;
      std::string name(st.Text(3));
      if (name.empty()) {
        name = std::string(st.Text(2)) + " " +
               (st.IsNull(4) ? std::to_string(st.Int(0)) : std::to_string(st.Int(4)));
      }
      m += "{\"track\":" + std::to_string(st.Int(0)) + ",\"rank\":" + std::to_string(st.Int(1)) +
           ",\"kind\":" + Quote(st.Text(2)) + ",\"name\":" + Quote(name) + "}";
    }
  }
  // Step markers of the lowest rank that has them, for the time axis.
  m += "],\"steps\":[";
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st,
                             d->Prepare("SELECT ts, step FROM steps WHERE rank = "
                                        "(SELECT min(rank) FROM steps) ORDER BY ts LIMIT ?1"));
    st.Bind(1, static_cast<int64_t>(kMaxSteps));
    bool first = true;
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      if (!first) m += ',';
      first = false;
      m += "[" + std::to_string(st.Int(0) - origin) + "," + std::to_string(st.Int(1)) + "]";
    }
  }
  m += "]}";
  meta_json = std::move(m);
  if (o.block_cache_mb > 0) block_cache = std::make_unique<BlockCache>(o.block_cache_mb << 20);
  TRACEDB_ASSIGN_OR_RETURN(max_block_span, MaxBlockSpan(d));  // lets windows use the rank index
  Release(std::move(db));
  return Status::Ok();
}

// A page on another site whose name resolves to 127.0.0.1 (DNS rebinding) sends its own name as
// Host: only the names of this machine's loopback, or the address bound, with the port.
bool ViewServer::Impl::HostAllowed(const httplib::Request& req) const {
  const std::string host = req.get_header_value("Host");
  const std::string p = ":" + std::to_string(port);
  for (const std::string& h :
       {std::string("127.0.0.1"), std::string("localhost"), std::string("[::1]"), o.host}) {
    if (host == h + p) return true;
  }
  return false;
}

bool ViewServer::Impl::Authorized(const httplib::Request& req) const {
  if (req.has_header("X-Tracedb-Token")) {
    return SameToken(req.get_header_value("X-Tracedb-Token"), o.token);
  }
  return req.has_param("token") && SameToken(req.get_param_value("token"), o.token);
}

void ViewServer::Impl::Routes() {
  http.set_payload_max_length(64 * 1024);
  http.set_read_timeout(10, 0);
  http.set_keep_alive_max_count(1000);
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!HostAllowed(req)) {
      Error(res, 403,
            "Host '" + req.get_header_value("Host") +
                "' is not this server's (127.0.0.1, localhost or [::1] with its port)");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!Authorized(req)) {
      Error(res, 403, "missing or wrong token: use the URL that `tracedb view` printed");
      return httplib::Server::HandlerResponse::Handled;
    }
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Content-Type-Options", "nosniff");
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what += std::string(": ") + e.what();
        } catch (...) {
        }
        Error(res, 500, what);
      });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own JSON error
    Error(res, res.status,
          res.status == 404 ? "no such page: " + req.path.substr(0, 200)
                            : "bad request (HTTP " + std::to_string(res.status) + ")");
  });
  auto asset = [this](const httplib::Request& req, httplib::Response& res) {
    const Asset* a = FindAsset(req.path == "/" ? "/index.html" : req.path);
    if (a == nullptr) {
      Error(res, 404, "no such page: " + req.path.substr(0, 200));
      return;
    }
    std::string body(reinterpret_cast<const char*>(a->data), a->size);
    if (std::strcmp(a->path, "/index.html") == 0) {
      // The page's own scripts and API calls carry the token.
      for (size_t p; (p = body.find("__TOKEN__")) != std::string::npos;) {
        body.replace(p, 9, o.token);
      }
    }
    res.set_content(std::move(body), a->content_type);
  };
  http.Get("/", asset);
  http.Get("/index.html", asset);
  http.Get("/units.js", asset);
  http.Get("/app.js", asset);
  http.Get("/app.css", asset);
  http.Get("/api/meta", [this](const auto& q, auto& r) { Meta(q, r); });
  http.Get("/api/window", [this](const auto& q, auto& r) { Window(q, r); });
  http.Get("/api/event", [this](const auto& q, auto& r) { Event(q, r); });
  http.Get("/api/search", [this](const auto& q, auto& r) { Search(q, r); });
  http.Get("/api/sql", [this](const auto& q, auto& r) { Sql(q, r); });
  http.Get("/api/flows", [this](const auto& q, auto& r) { Flows(q, r); });
  http.Get("/api/why", [this](const auto& q, auto& r) { Why(q, r); });
}

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
  if (req.has_param("tracks") && !req.get_param_value("tracks").empty()) {
    const std::string list = req.get_param_value("tracks");
    size_t p = 0;
    while (p <= list.size()) {
      const size_t c = std::min(list.find(',', p), list.size());
      const std::string one = list.substr(p, c - p);
      char* e = nullptr;
      errno = 0;
      const unsigned long long v = std::strtoull(one.c_str(), &e, 10);
      if (one.empty() || *e != '\0' || errno == ERANGE || v > UINT32_MAX) {
        Error(res, 400, "parameter 'tracks': not a track id: '" + one.substr(0, 64) + "'");
        return;
      }
      w.tracks.push_back(static_cast<uint32_t>(v));
      p = c + 1;
    }
    if (w.tracks.size() > 100000) {
      Error(res, 400, "parameter 'tracks': too many tracks");
      return;
    }
  }
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
  // after `end_after` (the zone maps), decoded until the event is found.
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db->Prepare("SELECT block FROM blocks WHERE rank = ?1 AND min_ts <= ?2 AND "
                           "max_end >= ?3 ORDER BY min_ts DESC"));
  st.Bind(1, rank);
  st.Bind(2, start_before);
  st.Bind(3, end_after);
  TRACEDB_ASSIGN_OR_RETURN(Stmt data, db->Prepare("SELECT data FROM blocks WHERE block = ?1"));
  engine::DecodedBlock b;
  const auto track = static_cast<uint32_t>(static_cast<uint64_t>(id) >> 32);
  const auto k = static_cast<uint64_t>(id) & 0xffffffffu;
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    data.Reset();
    data.Bind(1, st.Int(0));
    TRACEDB_ASSIGN_OR_RETURN(bool found, data.Step());
    if (!found) continue;
    if (!engine::DecodeBlock(data.Blob(0), st.Int(0), &b,
                             engine::kColTrack | engine::kColK | engine::kColTs)
             .ok()) {
      continue;
    }
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
    query::json::AppendString(out, name);
    *out += ':';
    AppendColumn(out, st, c);
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
    query::json::AppendString(out, st.ColumnName(c));
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
      AppendColumn(out, st, c);
    }
    *out += ']';
  }
  *out += "],\"truncated\":";
  *out += truncated ? "true" : "false";
  *out += '}';
  return Status::Ok();
}

void ViewServer::Impl::Sql(const httplib::Request& req, httplib::Response& res) {
  if (!req.has_param("q")) {
    Error(res, 400, "missing parameter 'q' (the SQL)");
    return;
  }
  auto db = Acquire();
  if (!db.ok()) {
    Error(res, 500, db.status().message());
    return;
  }
  std::string body;
  Status s;
  {
    ScopedDeadline deadline(db->get(), o.sql_timeout_ms);
    s = RunSql(db->get(), req.get_param_value("q"), {}, kMaxSqlRows, &body);
  }
  Release(std::move(*db));
  if (!s.ok()) {
    Error(res, 400, s.message());
    return;
  }
  res.set_content(std::move(body), kJson);
}

void ViewServer::Impl::Search(const httplib::Request& req, httplib::Response& res) {
  // glob: a name pattern (SQLite GLOB: * ? [...]); t0, t1 as for /api/window (optional).
  int64_t t0 = INT64_MIN / 2, t1 = INT64_MAX / 2;
  if (!IntParam(req, res, "t0", &t0, false) || !IntParam(req, res, "t1", &t1, false)) return;
  if (!req.has_param("glob") || req.get_param_value("glob").empty()) {
    Error(res, 400, "missing parameter 'glob' (a name pattern such as MPI_*)");
    return;
  }
  auto db = Acquire();
  if (!db.ok()) {
    Error(res, 500, db.status().message());
    return;
  }
  std::string body;
  Status s;
  {
    ScopedDeadline deadline(db->get(), o.sql_timeout_ms);
    s = RunSql(db->get(),
               "SELECT id, rank, track, name, ts - " + std::to_string(origin) +
                   " AS rel_ts, dur, ts FROM events WHERE name IN "
                   "(SELECT s FROM strings WHERE s GLOB ?1) AND ts < ?2 + " +
                   std::to_string(origin) + " AND end_ts >= ?3 + " + std::to_string(origin) +
                   " ORDER BY dur DESC LIMIT " + std::to_string(kMaxSearchRows + 1),
               {req.get_param_value("glob"), std::to_string(t1), std::to_string(t0)},
               kMaxSearchRows, &body);
  }
  Release(std::move(*db));
  if (!s.ok()) {
    Error(res, 400, s.message());
    return;
  }
  res.set_content(std::move(body), kJson);
}

Status ViewServer::Impl::BuildFlows(Db* db) {
  // Once per server: the views match messages and collectives over the whole job (their
  // numbering needs every event), so their pairs are kept, sorted by the first end's time.
  std::vector<FlowPair> out;
  std::vector<std::string> labels;
  std::unordered_map<std::string, uint32_t> label_ids;
  auto run = [&](const std::string& sql, bool collective) -> Status {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare(sql));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      FlowPair f;
      const std::string label = collective ? std::string(st.Text(0)) : "message";
      auto [it, fresh] = label_ids.try_emplace(label, static_cast<uint32_t>(labels.size()));
      if (fresh) labels.push_back(label);
      f.label = it->second;
      f.a_id = st.Int(1);
      f.a_ts = st.Int(2);
      f.b_id = st.Int(3);
      f.b_ts = st.Int(4);
      f.extra = st.Int(5);
      out.push_back(f);
    }
    return Status::Ok();
  };
  // The views read only MPI events (and Horovod's RANK_READY ticks): the zone maps say
  // whether there are any, without decoding.
  TRACEDB_ASSIGN_OR_RETURN(
      int64_t candidates,
      db->QueryInt("SELECT count(*) FROM block_names WHERE cat IN (SELECT id FROM strings "
                   "WHERE s = 'mpi') OR name IN (SELECT id FROM strings WHERE s = 'RANK_READY')"));
  if (candidates == 0) {
    flows.clear();
    return Status::Ok();
  }
  TRACEDB_RETURN_IF_ERROR(
      run("SELECT 'message', send_id, send_ts, recv_id, recv_end_ts, bytes "
          "FROM p2p_messages",
          false));
  TRACEDB_RETURN_IF_ERROR(
      run("SELECT a.name, a.id, a.ts, b.id, b.ts, a.wait_ns FROM collective_arrivals a "
          "JOIN collective_arrivals b ON b.comm = a.comm AND b.seq = a.seq AND "
          "b.rank = a.last_rank WHERE a.rank <> a.last_rank",
          true));
  std::sort(out.begin(), out.end(),
            [](const FlowPair& x, const FlowPair& y) { return x.a_ts < y.a_ts; });
  int64_t longest = 0;
  for (const FlowPair& f : out) longest = std::max(longest, f.b_ts - f.a_ts);
  flows = std::move(out);
  flow_labels = std::move(labels);
  flow_longest = longest;
  return Status::Ok();
}

void ViewServer::Impl::Flows(const httplib::Request& req, httplib::Response& res) {
  // Matched point-to-point messages (p2p_messages: send -> receive) and, per collective, each
  // rank's call -> the last rank's (collective_arrivals), that overlap [t0, t1).
  int64_t t0 = 0, t1 = 0;
  if (!IntParam(req, res, "t0", &t0, true) || !IntParam(req, res, "t1", &t1, true)) return;
  if (t1 <= t0) {
    Error(res, 400, "empty window");
    return;
  }
  std::unique_lock<std::mutex> lock(flows_mu, std::try_to_lock);
  if (!lock.owns_lock()) {  // another request is matching them: ask again later
    res.set_content("{\"pending\":true}", kJson);
    return;
  }
  if (!flows_built) {
    auto db = Acquire();
    if (!db.ok()) {
      Error(res, 500, db.status().message());
      return;
    }
    Status s;
    {
      ScopedDeadline deadline(db->get(), 300000);
      s = BuildFlows(db->get());
    }
    Release(std::move(*db));
    flows_built = true;
    if (!s.ok()) flows_error = s.message();
  }
  if (!flows_error.empty()) {
    Error(res, 500, "flows: " + flows_error);
    return;
  }
  const int64_t lo = engine::SaturatingAdd(origin, t0), hi = engine::SaturatingAdd(origin, t1);
  auto it = std::lower_bound(flows.begin(), flows.end(), engine::SaturatingAdd(lo, -flow_longest),
                             [](const FlowPair& f, int64_t ts) { return f.a_ts < ts; });
  std::string m = "{\"messages\":{\"rows\":[", c = "{\"rows\":[";
  size_t nm = 0, nc = 0;
  bool truncated = false;
  auto id = [](std::string* s, int64_t v) {
    const bool exact = v <= (int64_t{1} << 53) && v >= -(int64_t{1} << 53);
    if (!exact) s->push_back('"');
    s->append(std::to_string(v));
    if (!exact) s->push_back('"');
  };
  for (; it != flows.end() && it->a_ts < hi; ++it) {
    if (it->b_ts < lo && it->a_ts < lo) continue;
    const bool message = flow_labels[it->label] == "message" && it->label == 0;
    std::string* s = message ? &m : &c;
    size_t& n = message ? nm : nc;
    if (n == kMaxFlows) {
      truncated = true;
      continue;
    }
    if (n++) s->push_back(',');
    s->push_back('[');
    query::json::AppendString(s, flow_labels[it->label]);
    s->push_back(',');
    id(s, it->a_id);
    s->append("," + std::to_string(it->a_ts - origin) + ",");
    id(s, it->b_id);
    s->append("," + std::to_string(it->b_ts - origin) + "," + std::to_string(it->extra) + "]");
  }
  // job_flows: the pairs of the whole job; with none, the page stops asking.
  res.set_content(m + "]},\"collectives\":" + c +
                      "]},\"truncated\":" + (truncated ? "true" : "false") +
                      ",\"job_flows\":" + std::to_string(flows.size()) + "}",
                  kJson);
}

void ViewServer::Impl::Why(const httplib::Request& req, httplib::Response& res) {
  // The critical path's pieces and the waits that overlap [t0, t1) (view/why_overlay.h).
  int64_t t0 = 0, t1 = 0;
  if (!IntParam(req, res, "t0", &t0, true) || !IntParam(req, res, "t1", &t1, true)) return;
  if (t1 <= t0) return Error(res, 400, "empty window");
  std::unique_lock<std::mutex> lock(why_mu, std::try_to_lock);
  if (!lock.owns_lock()) return res.set_content("{\"pending\":true}", kJson);
  if (!why_built) {
    auto db = Acquire();
    if (!db.ok()) return Error(res, 500, db.status().message());
    Status s;
    {
      ScopedDeadline deadline(db->get(), 300000);
      s = why.Build(db->get(), o.why_max_events);
    }
    Release(std::move(*db));
    why_built = true;
    if (!s.ok()) why_error = s.message();
  }
  if (!why_error.empty()) return Error(res, 500, "why: " + why_error);
  res.set_content(
      why.WindowJson(engine::SaturatingAdd(origin, t0), engine::SaturatingAdd(origin, t1), origin),
      kJson);
}

ViewServer::ViewServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ViewServer::~ViewServer() { Stop(); }

StatusOr<std::unique_ptr<ViewServer>> ViewServer::Start(const ViewServerOptions& o) {
  auto impl = std::make_unique<Impl>();
  impl->o = o;
  if (impl->o.token.empty()) impl->o.token = RandomToken();
  TRACEDB_RETURN_IF_ERROR(impl->Init());
  impl->Routes();
  if (o.port == 0) {
    impl->port = impl->http.bind_to_any_port(o.host);
  } else {
    impl->port = impl->http.bind_to_port(o.host, o.port) ? o.port : -1;
  }
  if (impl->port <= 0) {
    return Status::IOError("cannot listen on " + o.host + ":" + std::to_string(o.port) + ": " +
                           std::strerror(errno));
  }
  return std::unique_ptr<ViewServer>(new ViewServer(std::move(impl)));
}

int ViewServer::port() const { return impl_->port; }
const std::string& ViewServer::token() const { return impl_->o.token; }
std::string ViewServer::url() const {
  return "http://" + impl_->o.host + ":" + std::to_string(impl_->port) +
         "/?token=" + impl_->o.token;
}
bool ViewServer::Run() { return impl_->http.listen_after_bind(); }
void ViewServer::Stop() {
  if (impl_) impl_->http.stop();
}

}  // namespace tracedb::view
