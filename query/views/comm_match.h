// The one matcher of communication events: the MPI point-to-point matching (sends, receives,
// messages) and the collective partitioning by (comm, seq), for both of its users, the query
// layer's tables (query/views/views_p2p.cc, query/views/views_collective.cc) and the why model
// (query/analysis/why_match.cc). Each reads the events its own way (the tables through the block
// store, the model in its one decoding); the rows, their numbering, the join and the order are
// defined here once, as the plain SQL defines them (ViewsReferenceSql() in query/views/views.h):
//   sends      MPI sends with a peer >= 0 and a tag, numbered n = 1, 2, ... per (src, comm,
//              dst_in_comm, tag) in order of (ts, id)
//   receives   blocking receives with a peer >= 0, and nonblocking postings (a name with the
//              kPost role and a flow) joined on (rank, flow) to every other event of that rank
//              and flow with a peer >= 0 (the completion); numbered per (dst, comm, src_in_comm,
//              tag) in order of (posted_ts, id)
//   messages   sends meeting receives on (comm, dst_in_comm, src_in_comm, tag, n); a NULL comm
//              or tag matches nothing (SQL's `=`); every pair of equal keys, in key order
//   arrivals   collective arrivals partitioned by (comm, seq), NULL comm first, each partition
//              latest first (ts DESC, then rank, id)
// Header-only: templates over each caller's event and arrival rows, inlined so that neither
// side pays a call per row. query/analysis may include it (it links nothing of query/views).
// tests/why_match_test.cc checks the model's matching row for row against the tables, and
// tests/events_differential_test.cc the tables against the plain SQL.
// Thread safety: pure functions of their arguments.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string_view>
#include <tuple>
#include <vector>

#include "engine/db/event_block.h"

namespace tracedb::query::comm_match {

// A nullable integer (a typed argument an event may lack), NULL first as SQLite sorts.
struct Opt {
  int64_t v = 0;
  bool has = false;
  bool operator==(const Opt& o) const { return has == o.has && (!has || v == o.v); }
  bool operator<(const Opt& o) const { return has != o.has ? !has : has && v < o.v; }
};

// What an MPI call's name makes it, as bits (a caller maps its string ids to them).
enum Role : uint8_t { kSend = 1, kRecv = 2, kPost = 4 };

// The role of the MPI call named `name`: a send, a blocking receive (with its source and tag),
// or the posting of a nonblocking receive (joined to its completion by flow); 0 for others.
inline constexpr std::string_view kSendNames[] = {
    "MPI_Send",   "MPI_Ssend",  "MPI_Bsend",  "MPI_Rsend",    "MPI_Isend",
    "MPI_Issend", "MPI_Ibsend", "MPI_Irsend", "MPI_Sendrecv", "MPI_Sendrecv_replace"};
inline uint8_t RoleOfName(std::string_view name) {
  uint8_t r = 0;
  for (std::string_view x : kSendNames)
    if (name == x) r |= kSend;
  if (name == "MPI_Recv" || name == "MPI_Mrecv") r |= kRecv;
  if (name == "MPI_Irecv" || name == "MPI_Imrecv") r |= kPost;
  return r;
}

// A send: `ev` indexes the caller's event array (for its other columns).
struct Send {
  uint32_t ev;
  int32_t src;
  Opt comm;
  int64_t src_in_comm, dst_in_comm, tag, ts, id;
  int64_t n = 0;
};

// A receive: `ev` is the event that carries its source and tag, the blocking call or a
// nonblocking receive's completion; posted_ts is the posting's time (the call's own for a
// blocking one), rank and comm are the posting's.
struct Recv {
  uint32_t ev;
  int32_t dst;
  Opt comm;
  int64_t dst_in_comm, src_in_comm;
  Opt tag;
  int64_t posted_ts, id;
  int64_t n = 0;
};

namespace detail {

// An event's typed argument as an Opt.
template <typename Event, typename V>
Opt Arg(const Event& e, uint32_t bit, V v) {
  return (e.mask & bit) ? Opt{static_cast<int64_t>(v), true} : Opt{};
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

struct MatchKey {
  int64_t comm, dst, src, tag, n;
  auto operator<=>(const MatchKey&) const = default;
};

}  // namespace detail

// Event: a struct with id, ts, rank, name, mask (engine::EventArgs bits), peer, tag, comm and
// flow, in the caller's event order (block order). role(name) -> Role bits;
// in_comm(rank, const Opt& comm) -> the rank's rank in that communicator (the rank itself when
// comm is NULL or unknown).

// The sends of `ev`, numbered.
template <typename Event, typename RoleOf, typename InComm>
std::vector<Send> Sends(const std::vector<Event>& ev, RoleOf role, InComm in_comm) {
  using engine::EventArgs;
  std::vector<Send> out;
  for (uint32_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    if (!(role(e.name) & kSend)) continue;
    if (!(e.mask & EventArgs::kPeer) || e.peer < 0 || !(e.mask & EventArgs::kTag)) continue;
    const Opt comm = detail::Arg(e, EventArgs::kComm, e.comm);
    out.push_back(Send{i, e.rank, comm, in_comm(e.rank, comm), static_cast<int64_t>(e.peer),
                       static_cast<int64_t>(e.tag), e.ts, e.id});
  }
  detail::Number(
      &out, [](const Send& s) { return std::make_tuple(s.src, s.comm, s.dst_in_comm, s.tag); },
      [](const Send& s) { return s.ts; });
  return out;
}

// The receives of `ev`, numbered: the blocking ones in event order, then per completion (in
// event order) its postings (in event order).
template <typename Event, typename RoleOf, typename InComm>
std::vector<Recv> Receives(const std::vector<Event>& ev, RoleOf role, InComm in_comm) {
  using engine::EventArgs;
  std::vector<Recv> out;
  // Blocking receives carry their source and tag.
  for (uint32_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    if (!(role(e.name) & kRecv) || !(e.mask & EventArgs::kPeer) || e.peer < 0) continue;
    const Opt comm = detail::Arg(e, EventArgs::kComm, e.comm);
    out.push_back(Recv{i, e.rank, comm, in_comm(e.rank, comm), static_cast<int64_t>(e.peer),
                       detail::Arg(e, EventArgs::kTag, e.tag), e.ts, e.id});
  }
  // Nonblocking ones: each posting (a kPost name with a flow) with every other event of its
  // rank with the same flow and a source (the completion). The postings as (rank, flow, event)
  // sorted: per (rank, flow) in event order, found by a binary search over one array.
  struct Post {
    int32_t rank;
    uint64_t flow;
    uint32_t ev;
  };
  auto post_less = [](const Post& x, const Post& y) {
    return x.rank != y.rank ? x.rank < y.rank : x.flow != y.flow ? x.flow < y.flow : x.ev < y.ev;
  };
  std::vector<Post> posts;
  for (uint32_t i = 0; i < ev.size(); ++i)
    if ((role(ev[i].name) & kPost) && (ev[i].mask & EventArgs::kFlow))
      posts.push_back(Post{ev[i].rank, static_cast<uint64_t>(ev[i].flow), i});
  if (!std::is_sorted(posts.begin(), posts.end(), post_less))
    std::sort(posts.begin(), posts.end(), post_less);
  if (!posts.empty()) {
    for (uint32_t di = 0; di < ev.size(); ++di) {
      const Event& d = ev[di];
      if (!(d.mask & EventArgs::kFlow) || !(d.mask & EventArgs::kPeer) || d.peer < 0) continue;
      const Post key{d.rank, static_cast<uint64_t>(d.flow), 0};
      auto it = std::lower_bound(posts.begin(), posts.end(), key, post_less);
      for (; it != posts.end() && it->rank == key.rank && it->flow == key.flow; ++it) {
        const Event& s = ev[it->ev];
        if (s.id == d.id) continue;
        const Opt comm = detail::Arg(s, EventArgs::kComm, s.comm);
        out.push_back(Recv{di, s.rank, comm, in_comm(s.rank, comm), static_cast<int64_t>(d.peer),
                           detail::Arg(d, EventArgs::kTag, d.tag), s.ts, d.id});
      }
    }
  }
  detail::Number(
      &out, [](const Recv& r) { return std::make_tuple(r.dst, r.comm, r.src_in_comm, r.tag); },
      [](const Recv& r) { return r.posted_ts; });
  return out;
}

// Calls on_pair(const Send&, const Recv&) for every message: sends meet receives on (comm,
// dst_in_comm, src_in_comm, tag, n), a sort-merge join; pairs come in key order, and within a
// key in the order of the sends, then of the receives, as given.
template <typename OnPair>
void JoinMessages(const std::vector<Send>& sends, const std::vector<Recv>& recvs, OnPair on_pair) {
  using detail::MatchKey;
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
    for (size_t x = a; x < a_end; ++x)
      for (size_t y = b; y < b_end; ++y) on_pair(sends[si[x]], recvs[ri[y]]);
    a = a_end;
    b = b_end;
  }
}

// Sets the columns every arrival of a Horovod RANK_READY tick shares: rank `peer` arrives at the
// negotiation (comm 0, seq = the negotiation span's id `parent`) at `ts`, with no duration. The
// caller sets the columns of its own rows (end_ts, ...).
template <typename Arrival>
void SetTickArrival(Arrival* a, int64_t peer, int32_t name, int64_t parent, int64_t id,
                    int64_t ts) {
  a->rank = peer;
  a->name = name;
  a->has_comm = true;
  a->comm = 0;
  a->seq = parent;
  a->id = id;
  a->ts = ts;
  a->has_dur = false;
}

// Sorts collective arrivals by (comm, seq), NULL comm first, each partition latest first (ts
// DESC, then rank, id), and calls on_partition(lo, hi) for each partition [lo, hi) of *rows:
// (*rows)[lo] is the last to arrive, (*rows)[hi - 1] the first. Arrival: a struct with has_comm,
// comm, seq, ts, rank and id.
template <typename Arrival, typename OnPartition>
void PartitionArrivals(std::vector<Arrival>* rows, OnPartition on_partition) {
  std::vector<Arrival>& r = *rows;
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
    on_partition(lo, hi);
    lo = hi;
  }
}

}  // namespace tracedb::query::comm_match
