// The `tracedb view` server's job-wide overlays, each built once on first request: /api/flows
// (matched messages and collective arrivals) and /api/why (critical path and waits,
// view/why_overlay.h). API: docs/view.md.
#include <algorithm>

#include "engine/util/coding.h"
#include "engine/util/json_text.h"
#include "query/export/json_rows.h"
#include "view/sql_guard.h"
#include "view/view_params.h"
#include "view/view_server_impl.h"

namespace tracedb::view {

using engine::Db;
using engine::Stmt;

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
    query::json::AppendInt(s, v, query::json::BigInts::kString);
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
    engine::json::AppendString(s, flow_labels[it->label]);
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

}  // namespace tracedb::view
