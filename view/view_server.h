// The HTTP server of `tracedb view`: serves the embedded web UI and a JSON API over one trace
// database, opened read-only. It listens on 127.0.0.1 only, and every request must carry the
// server's random token (`?token=` or the `X-Tracedb-Token` header), so that other local users
// cannot read the trace, and must name the server in its Host header (127.0.0.1, localhost or
// [::1] with the port: no DNS rebinding). The SQL a client sends runs under view/sql_guard.h
// (read-only authorizer, deadline, size bounds). Bad requests get a 4xx answer with
// {"error": "..."}; a window request
// is cancelled when a newer one from the same client arrives.
// Thread safety: Start/Stop from one thread; requests are served by cpp-httplib's thread pool,
// each on a database connection of its own.
// API: docs/view.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/util/status.h"

namespace tracedb::view {

struct ViewServerOptions {
  std::string db_path;
  std::string host = "127.0.0.1";
  int port = 0;                // 0: a free port chosen by the system
  std::string token;           // empty: 32 random hex digits
  int sql_timeout_ms = 10000;  // SQL of the UI's boxes is interrupted after this
  // Decoded blocks kept between window requests (view::BlockCache), in MB: about 45 bytes per
  // event, so 128 MB holds ~3M events, six windows at the decode budget. 0: none.
  size_t block_cache_mb = 128;
  // /api/why runs the why analyses over the whole job, which hold about 90 bytes per event
  // (docs/why.md): above this many events it answers an error instead.
  int64_t why_max_events = 20000000;
};

class ViewServer {
 public:
  // Opens the database (read-only) and checks it; binds the port.
  static StatusOr<std::unique_ptr<ViewServer>> Start(const ViewServerOptions& o);
  ~ViewServer();

  int port() const;
  const std::string& token() const;
  std::string url() const;  // http://127.0.0.1:PORT/?token=TOKEN

  // Serves until Stop() (blocks). Returns false when listening failed.
  bool Run();
  void Stop();

  struct Impl;

 private:
  explicit ViewServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tracedb::view
