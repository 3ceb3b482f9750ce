// The collective and point-to-point matching of the why model (why_internal.h), in C++ over the
// rows its one decoding of the blocks collected (MatchInput), instead of reading the query
// layer's tables through SQL (which decoded the communication blocks three more times and
// handed every row over as SQL values). The definitions are those of the query layer, kept
// identical, rows and order included (the analyses' tie-breaks depend on the order):
//   collectives  query/views/views_collective.cc: events with a seq (cat mpi or comm; nccl
//   instants)
//                and Horovod RANK_READY ticks at their negotiation (comm 0, seq = its id),
//                partitioned by (comm, seq), NULL comm first, each latest first
//   messages     query/views/views_p2p.cc: sends and receives (blocking ones, and nonblocking
//                postings joined to their completion by (rank, flow)) numbered per (rank,
//                comm, peer, tag) in time order, sends meeting receives on (comm, dst, src,
//                tag, n); a NULL comm or tag matches nothing
// tests/why_match_test.cc checks both against the query layer's tables on hand-built traces.
#include <algorithm>
#include <compare>
#include <numeric>
#include <tuple>

#include "engine/db/event_block.h"
#include "query/analysis/why_internal.h"

namespace tracedb::query::analysis::internal {
namespace {

using engine::EventArgs;

// A nullable integer, NULL first as SQLite sorts (views_p2p.cc's Opt).
struct Opt {
  int64_t v = 0;
  bool has = false;
  bool operator==(const Opt& o) const { return has == o.has && (!has || v == o.v); }
  bool operator<(const Opt& o) const { return has != o.has ? !has : has && v < o.v; }
};

Opt Arg(const MatchInput::Mpi& e, uint32_t bit, int64_t v) {
  return (e.mask & bit) ? Opt{v, true} : Opt{};
}

struct Send {
  uint32_t ev;  // index into MatchInput::mpi
  int32_t src;
  Opt comm;
  int64_t src_in_comm, dst_in_comm, tag, ts;
  int64_t id;
  int64_t n = 0;
};

struct Recv {
  uint32_t ev;  // the receive's event (the completion for a nonblocking one)
  int32_t dst;
  Opt comm;
  int64_t dst_in_comm, src_in_comm;
  Opt tag;
  int64_t posted_ts;
  int64_t id;
  int64_t n = 0;
};

int64_t RankInComm(const Model& m, int32_t rank, const Opt& comm) {
  if (!comm.has) return rank;
  auto it = m.in_comm.find({rank, comm.v});
  return it == m.in_comm.end() ? rank : it->second;
}

// Numbers each partition's rows 1, 2, ... in order of (ts, id), as row_number() does
// (views_p2p.cc's Number).
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

struct MatchKey {
  int64_t comm, dst, src, tag, n;
  auto operator<=>(const MatchKey&) const = default;
};

}  // namespace

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
    a.rank = t.peer;
    a.name = it->second;
    a.has_comm = true;
    a.comm = 0;
    a.seq = t.parent;
    a.id = t.id;
    a.ts = t.ts;
    a.has_dur = false;
    a.end_ts = a.ts;  // no duration: the model's end is the entry
    a.has_peer = t.is_comm;
    a.peer = t.peer;
    a.lane_wait = t.lane_wait;
    r.push_back(a);
  }
  std::sort(r.begin(), r.end(), [](const Arrival& x, const Arrival& y) {
    if (x.has_comm != y.has_comm) return !x.has_comm;
    if (x.has_comm && x.comm != y.comm) return x.comm < y.comm;
    if (x.seq != y.seq) return x.seq < y.seq;
    if (x.ts != y.ts) return x.ts > y.ts;
    if (x.rank != y.rank) return x.rank < y.rank;
    return x.id < y.id;
  });
  for (size_t lo = 0; lo < r.size();) {
    size_t hi = lo + 1;
    while (hi < r.size() && r[hi].has_comm == r[lo].has_comm &&
           (!r[lo].has_comm || r[hi].comm == r[lo].comm) && r[hi].seq == r[lo].seq)
      ++hi;
    const int64_t max_ts = r[lo].ts, last = r[lo].rank;
    for (size_t i = lo; i < hi; ++i) {
      r[i].wait = max_ts - r[i].ts;
      r[i].last_rank = last;
    }
    lo = hi;
  }
  m->arrivals = std::move(r);
  in->ticks = {};
  in->negotiations = {};
}

void MatchMessages(MatchInput* in, Model* m) {
  const std::vector<MatchInput::Mpi>& ev = in->mpi;
  auto what = [&](uint32_t name) -> uint8_t {
    return name < in->p2p_name.size() ? in->p2p_name[name] : 0;
  };
  constexpr uint8_t kSendName = 1, kRecvName = 2, kIrecvName = 4;
  std::vector<Send> sends;
  for (uint32_t i = 0; i < ev.size(); ++i) {
    const MatchInput::Mpi& e = ev[i];
    if (!(what(e.name) & kSendName)) continue;
    if (!(e.mask & EventArgs::kPeer) || e.peer < 0 || !(e.mask & EventArgs::kTag)) continue;
    const Opt comm = Arg(e, EventArgs::kComm, e.comm);
    sends.push_back(Send{i, e.rank, comm, RankInComm(*m, e.rank, comm), e.peer, e.tag, e.ts, e.id});
  }
  Number(
      &sends, [](const Send& s) { return std::make_tuple(s.src, s.comm, s.dst_in_comm, s.tag); },
      [](const Send& s) { return s.ts; });
  std::vector<Recv> recvs;
  // Blocking receives carry their source and tag.
  for (uint32_t i = 0; i < ev.size(); ++i) {
    const MatchInput::Mpi& e = ev[i];
    if (!(what(e.name) & kRecvName) || !(e.mask & EventArgs::kPeer) || e.peer < 0) continue;
    const Opt comm = Arg(e, EventArgs::kComm, e.comm);
    recvs.push_back(Recv{i, e.rank, comm, RankInComm(*m, e.rank, comm), e.peer,
                         Arg(e, EventArgs::kTag, e.tag), e.ts, e.id});
  }
  // Nonblocking ones: each posting (MPI_Irecv with a flow) with every other MPI event of its
  // rank with the same flow and a source (the completion), postings in event order per
  // completion. Postings sorted by (rank, flow, event order) stand in for the hash chains.
  // Postings as (rank, flow, event) sorted: the same order as the hash chains, and a binary
  // search over one contiguous array.
  struct Post {
    int32_t rank;
    uint64_t flow;
    uint32_t ev;
  };
  std::vector<Post> posts;
  for (uint32_t i = 0; i < ev.size(); ++i)
    if ((what(ev[i].name) & kIrecvName) && (ev[i].mask & EventArgs::kFlow))
      posts.push_back(Post{ev[i].rank, ev[i].flow, i});
  auto post_less = [](const Post& x, const Post& y) {
    return x.rank != y.rank ? x.rank < y.rank : x.flow != y.flow ? x.flow < y.flow : x.ev < y.ev;
  };
  if (!std::is_sorted(posts.begin(), posts.end(), post_less))
    std::sort(posts.begin(), posts.end(), post_less);
  if (!posts.empty()) {
    for (uint32_t di = 0; di < ev.size(); ++di) {
      const MatchInput::Mpi& d = ev[di];
      if (!(d.mask & EventArgs::kFlow) || !(d.mask & EventArgs::kPeer) || d.peer < 0) continue;
      auto it = std::lower_bound(posts.begin(), posts.end(), Post{d.rank, d.flow, 0}, post_less);
      for (; it != posts.end() && it->rank == d.rank && it->flow == d.flow; ++it) {
        const MatchInput::Mpi& s = ev[it->ev];
        if (s.id == d.id) continue;
        const Opt comm = Arg(s, EventArgs::kComm, s.comm);
        recvs.push_back(Recv{di, s.rank, comm, RankInComm(*m, s.rank, comm), d.peer,
                             Arg(d, EventArgs::kTag, d.tag), s.ts, d.id});
      }
    }
  }
  Number(
      &recvs, [](const Recv& r) { return std::make_tuple(r.dst, r.comm, r.src_in_comm, r.tag); },
      [](const Recv& r) { return r.posted_ts; });
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
  // Sends meet receives on (comm, dst_in_comm, src_in_comm, tag, n): a sort-merge join, every
  // pair of rows with equal keys, as views_p2p.cc emits them.
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
        const MatchInput::Mpi& se = ev[s.ev];
        const MatchInput::Mpi& re = ev[r.ev];
        // Both sides must be communication events of the model (as its lookups by id were).
        if (!se.is_comm || !re.is_comm) continue;
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
      }
    }
    a = a_end;
    b = b_end;
  }
  in->mpi = {};
}

}  // namespace tracedb::query::analysis::internal
