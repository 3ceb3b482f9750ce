// The state of one `tracedb view` server (view_server.h), shared by the files that implement it:
// view_server.cc (opening, the connection pool, routes, token and Host checks),
// view_handlers.cc (meta, window, event, search, SQL) and view_flows.cc (flows, why).
// Internal to view/. Thread safety: as noted per member.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"
#include "view/lod.h"
#include "view/view_server.h"
#include "view/why_overlay.h"

namespace tracedb::view {

inline constexpr size_t kMaxSqlRows = 5000;
inline constexpr size_t kMaxSqlBodyBytes = 16 << 20;  // an SQL answer stops (truncated) past this
inline constexpr size_t kMaxSearchRows = 2000;
inline constexpr size_t kMaxFlows = 4000;
inline constexpr size_t kMaxSteps = 100000;

struct ViewServer::Impl {
  using Db = engine::Db;

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
  // Answers with RunSql's JSON on a pooled connection under the SQL deadline (400 on its error).
  void AnswerSql(httplib::Response& res, const std::string& sql,
                 const std::vector<std::string>& args, size_t max_rows);
};

}  // namespace tracedb::view
