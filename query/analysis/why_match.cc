// The collective and point-to-point matching of the why model (why_internal.h), in C++ over the
// rows its one decoding of the blocks collected (MatchInput), instead of reading the query
// layer's tables through SQL (which decoded the communication blocks three more times and
// handed every row over as SQL values). The matching itself is the query layer's one matcher
// (query/views/comm_match.h), which its tables use too, so the rows and their order are theirs
// (the analyses' tie-breaks depend on the order):
//   collectives  query/views/views_collective.cc: events with a seq (cat mpi or comm; nccl
//                instants) and Horovod RANK_READY ticks at their negotiation (comm 0, seq = its
//                id), partitioned by (comm, seq), NULL comm first, each latest first
//   messages     query/views/views_p2p.cc: sends and receives (blocking ones, and nonblocking
//                postings joined to their completion by (rank, flow)) numbered per (rank,
//                comm, peer, tag) in time order, sends meeting receives on (comm, dst, src,
//                tag, n); a NULL comm or tag matches nothing
// tests/why_match_test.cc checks both against the query layer's tables on hand-built traces.
#include <algorithm>
#include <numeric>

#include "query/analysis/why_internal.h"
#include "query/views/comm_match.h"

namespace tracedb::query::analysis::internal {
namespace cm = comm_match;

void MatchCollectives(MatchInput* in, Model* m) {
  std::vector<Arrival>& r = in->arrivals;
  // Horovod ticks: one arrival of rank `peer` at the negotiation (comm 0, seq = its id); the
  // first negotiation span of an id names it. A tick with a NULL peer is no arrival.
  std::stable_sort(in->negotiations.begin(), in->negotiations.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const MatchInput::Tick& t : in->ticks) {
    if (!t.has_peer) continue;
    auto it = std::lower_bound(in->negotiations.begin(), in->negotiations.end(), t.parent,
                               [](const auto& x, int64_t v) { return x.first < v; });
    if (it == in->negotiations.end() || it->first != t.parent) continue;
    Arrival a{};
    cm::SetTickArrival(&a, t.peer, it->second, t.parent, t.id, t.ts);
    a.end_ts = a.ts;  // no duration: the model's end is the entry
    a.has_peer = t.is_comm;
    a.peer = t.peer;
    a.lane_wait = t.lane_wait;
    r.push_back(a);
  }
  cm::PartitionArrivals(&r, [&](size_t lo, size_t hi) {
    const int64_t max_ts = r[lo].ts, last = r[lo].rank;
    for (size_t i = lo; i < hi; ++i) {
      r[i].wait = max_ts - r[i].ts;
      r[i].last_rank = last;
    }
  });
  m->arrivals = std::move(r);
  in->ticks = {};
  in->negotiations = {};
}

void MatchMessages(MatchInput* in, Model* m) {
  const std::vector<MatchInput::Mpi>& ev = in->mpi;
  auto role = [&](uint32_t name) -> uint8_t {
    return name < in->p2p_name.size() ? in->p2p_name[name] : 0;
  };
  auto in_comm = [&](int32_t rank, const cm::Opt& comm) -> int64_t {
    if (!comm.has) return rank;
    auto it = m->in_comm.find({rank, comm.v});
    return it == m->in_comm.end() ? rank : it->second;
  };
  const std::vector<cm::Send> sends = cm::Sends(ev, role, in_comm);
  const std::vector<cm::Recv> recvs = cm::Receives(ev, role, in_comm);
  // A receive's posting time as the model read it from tracedb_p2p_receives by id: the last
  // row of that id.
  std::vector<uint32_t> by_id(recvs.size());
  std::iota(by_id.begin(), by_id.end(), 0u);
  std::sort(by_id.begin(), by_id.end(), [&](uint32_t a, uint32_t b) {
    return recvs[a].id != recvs[b].id ? recvs[a].id < recvs[b].id : a < b;
  });
  auto posted_of = [&](int64_t id) {
    auto it = std::upper_bound(by_id.begin(), by_id.end(), id,
                               [&](int64_t v, uint32_t x) { return v < recvs[x].id; });
    return recvs[*std::prev(it)].posted_ts;  // the message's receive has this id
  };
  cm::JoinMessages(sends, recvs, [&](const cm::Send& s, const cm::Recv& r) {
    const MatchInput::Mpi& se = ev[s.ev];
    const MatchInput::Mpi& re = ev[r.ev];
    // Both sides must be communication events of the model (as its lookups by id were).
    if (!se.is_comm || !re.is_comm) return;
    Message msg;
    msg.send_id = s.id;
    msg.recv_id = r.id;
    msg.src = s.src;
    msg.dst = r.dst;
    msg.send_ts = s.ts;
    msg.recv_posted_ts = posted_of(r.id);
    msg.send = se.ev;
    msg.recv = re.ev;
    m->messages.push_back(msg);
  });
  in->mpi = {};
}

}  // namespace tracedb::query::analysis::internal
