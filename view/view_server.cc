// The `tracedb view` server: opening the database and reading the job's facts, the pool of
// connections, the routes with their Host and token checks, start and stop. The handlers are in
// view_handlers.cc and view_flows.cc. See view_server.h; the API is documented in docs/view.md.
#include "view/view_server.h"

#include <httplib.h>

#include <cstring>
#include <memory>

#include "query/open/query_db.h"
#include "view/assets.h"
#include "view/sql_guard.h"
#include "view/view_params.h"
#include "view/view_server_impl.h"

namespace tracedb::view {

using engine::Db;
using engine::Stmt;

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
