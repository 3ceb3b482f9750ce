// The why model's own collective and point-to-point matching (query/analysis/why_match.cc, run
// by LoadModel over its one decoding of the blocks) against the query layer's tables it replaces
// in the analyses (tracedb_collective_arrivals, tracedb_p2p_messages and tracedb_p2p_receives,
// which tests/events_differential_test.cc checks against plain SQL): the same rows in the same
// order, on seeded random traces that hold the cases the definitions single out: NULL comm and
// tag, ties in ts, NCCL instants (arrivals) and spans (not), sends without a tag or a peer,
// nonblocking receives whose flow is reused (one completion, several postings), blocking
// receives that also carry a flow, Horovod negotiations with RANK_READY ticks with and without
// a peer, and ticks under a span that is no negotiation.
#include <gtest/gtest.h>

#include <cinttypes>
#include <random>
#include <string>
#include <vector>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "query/analysis/why_internal.h"
#include "query/open/query_db.h"
#include "tests/hand_trace.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

using engine::EventArgs;

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  int64_t Int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

 private:
  std::mt19937_64 rng_;
};

// Writes a 4-rank trace of `n` events per rank (roughly) drawn from `seed`.
void Build(const std::string& path, uint64_t seed, int n) {
  auto w = engine::TraceWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().message();
  engine::TraceWriter* tw = w->get();
  engine::TraceBuilder b(tw);
  ASSERT_TRUE(tw->BeginBatch().ok());
  Gen g(seed);
  const uint32_t mpi = tw->Intern("mpi"), nccl = tw->Intern("nccl"), comm = tw->Intern("comm");
  const uint32_t compute = tw->Intern("compute");
  auto name = [&](const char* s) { return tw->Intern(s); };
  for (int r = 0; r < 4; ++r) {
    const uint32_t t = AddRankTrack(tw, r, 4, "why-match-test");
    int64_t ts = 1000;
    auto advance = [&]() { ts += g.Chance(0.15) ? 0 : g.Int(1, 500); };
    for (int i = 0; i < n; ++i) {
      advance();
      const int what = static_cast<int>(g.Int(0, 7));
      EventArgs a;
      if (what == 0) {  // a collective: MPI span, NCCL instant or span; comm 1, 2 or NULL
        a.mask = EventArgs::kSeq;
        a.seq = static_cast<uint64_t>(g.Int(0, 6));
        if (!g.Chance(0.15)) {
          a.mask |= EventArgs::kComm;
          a.comm = static_cast<uint32_t>(g.Int(1, 2));
        }
        if (g.Chance(0.3)) {
          a.mask |= EventArgs::kPeer;
          a.peer = static_cast<int32_t>(g.Int(0, 3));
        }
        const int64_t k = g.Int(0, 3);
        const char* nm = k == 0 ? "MPI_Allreduce" : k == 1 ? "MPI_Bcast" : "ncclAllReduce";
        if (k == 3)
          ASSERT_TRUE(b.Instant(t, ts, name(nm), nccl, &a).ok());
        else
          ASSERT_TRUE(b.Complete(t, ts, g.Int(0, 300), name(nm), k == 2 ? nccl : mpi, &a).ok());
      } else if (what <= 2) {  // a send
        a.mask = EventArgs::kPeer | EventArgs::kBytes;
        a.peer = g.Chance(0.05) ? -1 : static_cast<int32_t>(g.Int(0, 3));
        a.bytes = 8;
        if (!g.Chance(0.1)) {
          a.mask |= EventArgs::kTag;
          a.tag = static_cast<int32_t>(g.Int(0, 2));
        }
        if (!g.Chance(0.1)) {
          a.mask |= EventArgs::kComm;
          a.comm = 1;
        }
        const char* nm = g.Chance(0.5) ? "MPI_Send" : g.Chance(0.5) ? "MPI_Isend" : "MPI_Ssend";
        ASSERT_TRUE(b.Complete(t, ts, g.Int(0, 200), name(nm), mpi, &a).ok());
      } else if (what <= 4) {  // a blocking receive, now and then with a flow
        a.mask = EventArgs::kPeer | EventArgs::kComm;
        a.peer = static_cast<int32_t>(g.Int(0, 3));
        a.comm = 1;
        if (!g.Chance(0.1)) {
          a.mask |= EventArgs::kTag;
          a.tag = static_cast<int32_t>(g.Int(0, 2));
        }
        if (g.Chance(0.1)) {
          a.mask |= EventArgs::kFlow;
          a.flow = static_cast<uint64_t>(g.Int(1, 4));
        }
        ASSERT_TRUE(b.Complete(t, ts, g.Int(0, 400), name("MPI_Recv"), mpi, &a).ok());
      } else if (what == 5) {  // MPI_Irecv then its completion, flows reused (1..4)
        a.mask = EventArgs::kFlow | EventArgs::kComm;
        a.flow = static_cast<uint64_t>(g.Int(1, 4));
        a.comm = 1;
        ASSERT_TRUE(b.Complete(t, ts, g.Int(0, 20), name("MPI_Irecv"), mpi, &a).ok());
        advance();
        EventArgs d;
        d.mask = EventArgs::kFlow | EventArgs::kPeer;
        d.flow = a.flow;
        d.peer = static_cast<int32_t>(g.Int(0, 3));
        if (!g.Chance(0.1)) {
          d.mask |= EventArgs::kTag;
          d.tag = static_cast<int32_t>(g.Int(0, 2));
        }
        ASSERT_TRUE(b.Complete(t, ts, g.Int(0, 300), name("MPI_Wait"), mpi, &d).ok());
      } else if (what == 6) {  // a negotiation (or, now and then, another span) with ticks
        const bool negotiation = !g.Chance(0.2);
        ASSERT_TRUE(b.Begin(t, ts, name(negotiation ? "NEGOTIATE_ALLREDUCE" : "QUEUE"),
                            negotiation ? comm : compute, nullptr)
                        .ok());
        const int ticks = static_cast<int>(g.Int(1, 4));
        for (int k = 0; k < ticks; ++k) {
          advance();
          EventArgs ready;
          if (!g.Chance(0.15)) {
            ready.mask = EventArgs::kPeer;
            ready.peer = static_cast<int32_t>(g.Int(0, 3));
          }
          ASSERT_TRUE(
              b.Instant(t, ts, name("RANK_READY"), comm, ready.mask ? &ready : nullptr).ok());
        }
        advance();
        ASSERT_TRUE(b.End(t, ts).ok());
      } else {  // compute
        ASSERT_TRUE(b.Complete(t, ts, g.Int(1, 500), name("forward"), compute, nullptr).ok());
      }
    }
  }
  ASSERT_TRUE(tw->CommitBatch().ok());
}

std::string Opt(bool has, int64_t v) { return has ? std::to_string(v) : "NULL"; }

void Check(uint64_t seed) {
  TempDir tmp;
  const std::string path = tmp.Sub("match.tdb");
  ASSERT_NO_FATAL_FAILURE(Build(path, seed, 400));
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto m = query::analysis::internal::LoadModel(db->get());
  ASSERT_TRUE(m.ok()) << m.status().message();
  // Collective arrivals: every row, in the table's order.
  std::vector<std::string> mine;
  int64_t ticks = 0;
  for (const auto& a : m->arrivals) {
    const std::string nm = a.name < 0 ? "NULL" : m->names[static_cast<size_t>(a.name)];
    ticks += a.has_dur ? 0 : 1;
    mine.push_back(std::to_string(a.rank) + "|" + nm + "|" + Opt(a.has_comm, a.comm) + "|" +
                   std::to_string(a.seq) + "|" + std::to_string(a.id) + "|" + std::to_string(a.ts) +
                   "|" + Opt(a.has_dur, a.end_ts) + "|" + std::to_string(a.wait) + "|" +
                   std::to_string(a.last_rank));
  }
  const std::vector<std::string> arrivals =
      SqlRows(db->get(),
              "SELECT rank, name, comm, seq, id, ts, end_ts, wait_ns, last_rank "
              "FROM tracedb_collective_arrivals");
  EXPECT_EQ(mine, arrivals) << "seed " << seed;
  EXPECT_GT(arrivals.size(), 100u) << "seed " << seed << ": too few arrivals to tell";
  EXPECT_GT(ticks, 10) << "seed " << seed << ": too few Horovod ticks to tell";
  // Messages with their receive's posting time (the last receives row of the id, as the
  // model used to read it), in the table's order.
  mine.clear();
  for (const auto& msg : m->messages)
    mine.push_back(std::to_string(msg.send_id) + "|" + std::to_string(msg.recv_id) + "|" +
                   std::to_string(msg.src) + "|" + std::to_string(msg.dst) + "|" +
                   std::to_string(msg.send_ts) + "|" + std::to_string(msg.recv_posted_ts) + "|" +
                   std::to_string(msg.send.ts) + "|" + std::to_string(msg.recv.ts));
  const std::vector<std::string> messages =
      SqlRows(db->get(),
              "SELECT m.send_id, m.recv_id, m.src, m.dst, m.send_ts, "
              " (SELECT r.posted_ts FROM tracedb_p2p_receives r WHERE r.id = m.recv_id "
              "  ORDER BY r.rowid DESC LIMIT 1), "
              " (SELECT ts FROM events e WHERE e.id = m.send_id), "
              " (SELECT ts FROM events e WHERE e.id = m.recv_id) "
              "FROM tracedb_p2p_messages m");
  EXPECT_EQ(mine, messages) << "seed " << seed;
  EXPECT_GT(messages.size(), 50u) << "seed " << seed << ": too few messages to tell";
  const std::vector<std::string> nonblocking =
      SqlRows(db->get(),
              "SELECT count(*) FROM tracedb_p2p_messages m JOIN events e ON e.id = m.recv_id "
              "WHERE e.name = 'MPI_Wait'");
  ASSERT_EQ(nonblocking.size(), 1u);
  EXPECT_GT(std::stoll(nonblocking[0]), 10) << "seed " << seed << ": no nonblocking receives";
}

TEST(WhyMatch, AgainstTheQueryLayersTables) {
  for (uint64_t seed : {1u, 2u, 3u, 20261127u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ASSERT_NO_FATAL_FAILURE(Check(seed));
  }
}

}  // namespace
}  // namespace tracedb::testing
