// The collective views (collective_calls, collective_arrivals, collectives, stragglers,
// collective_wait; computed by the table-valued function of query/views/views_collective.h) on a
// small hand-built trace whose every expected value is worked out by hand below: arrivals on
// three ranks, a rank missing from a collective, a tie for last place, a NULL comm, NCCL issue
// instants (and an NCCL span that is not one), an event with a seq outside the collective
// categories, and a Horovod negotiation with a repeated RANK_READY tick.
// tests/events_differential_test.cc compares the same views with their plain SQL on random traces.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "query/open/query_db.h"
#include "tests/hand_trace.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

using engine::EventArgs;

EventArgs Coll(int64_t comm, uint64_t seq, bool has_comm = true) {
  EventArgs a;
  a.mask = EventArgs::kSeq | (has_comm ? uint32_t{EventArgs::kComm} : 0u);
  a.comm = static_cast<uint32_t>(comm);
  a.seq = seq;
  return a;
}

// Rows of `sql` as text, one string per row ("NULL" for NULL), fields joined by '|'.
TEST(CollectiveViews, HandBuiltTraceGivesHandDerivedRows) {
  TempDir tmp;
  const std::string path = tmp.Sub("coll.tdb");
  int64_t negotiation_id = 0;
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    engine::TraceWriter* tw = w->get();
    engine::TraceBuilder b(tw);
    ASSERT_TRUE(tw->BeginBatch().ok());
    std::vector<uint32_t> track(3);
    for (int r = 0; r < 3; ++r) {
      track[r] = AddRankTrack(tw, r, 3, "collective-test");
    }
    const uint32_t allreduce = tw->Intern("MPI_Allreduce"), mpi = tw->Intern("mpi");
    const uint32_t nccl_name = tw->Intern("ncclAllReduce"), nccl = tw->Intern("nccl");
    const uint32_t compute = tw->Intern("compute"), fwd = tw->Intern("forward");
    const uint32_t negotiate = tw->Intern("NEGOTIATE_ALLREDUCE"), comm = tw->Intern("comm");
    const uint32_t ready = tw->Intern("RANK_READY");
    EventArgs a;
    // A: comm 5 seq 1 on ranks 0, 1, 2 at 100, 130, 120 (durations 50, 10, 30).
    a = Coll(5, 1);
    ASSERT_TRUE(b.Complete(track[0], 100, 50, allreduce, mpi, &a).ok());
    ASSERT_TRUE(b.Complete(track[1], 130, 10, allreduce, mpi, &a).ok());
    ASSERT_TRUE(b.Complete(track[2], 120, 30, allreduce, mpi, &a).ok());
    // B: comm 5 seq 2 on ranks 0 and 2 only, both at 200: the lower rank counts as last.
    a = Coll(5, 2);
    ASSERT_TRUE(b.Complete(track[0], 200, 5, allreduce, mpi, &a).ok());
    ASSERT_TRUE(b.Complete(track[2], 200, 7, allreduce, mpi, &a).ok());
    // C: no comm, seq 1, rank 1 alone.
    a = Coll(0, 1, /*has_comm=*/false);
    ASSERT_TRUE(b.Complete(track[1], 210, 4, allreduce, mpi, &a).ok());
    // A seq outside the collective categories: no arrival.
    a = Coll(5, 3);
    ASSERT_TRUE(b.Complete(track[1], 220, 4, fwd, compute, &a).ok());
    // NCCL: issue instants of comm 7 seq 1 on ranks 0 and 2 at 300 and 310; a span with a seq
    // in cat nccl is not an arrival.
    a = Coll(7, 1);
    ASSERT_TRUE(b.Instant(track[0], 300, nccl_name, nccl, &a).ok());
    ASSERT_TRUE(b.Instant(track[2], 310, nccl_name, nccl, &a).ok());
    ASSERT_TRUE(b.Complete(track[1], 305, 20, nccl_name, nccl, &a).ok());
    // Horovod: rank 0's negotiation 400..500 with ticks of ranks 2 (410), 1 (450), 2 (460).
    ASSERT_TRUE(b.Begin(track[0], 400, negotiate, comm, nullptr).ok());
    for (auto [peer, ts] : std::vector<std::pair<int32_t, int64_t>>{{2, 410}, {1, 450}, {2, 460}}) {
      EventArgs t;
      t.mask = EventArgs::kPeer;
      t.peer = peer;
      ASSERT_TRUE(b.Instant(track[0], ts, ready, comm, &t).ok());
    }
    ASSERT_TRUE(b.End(track[0], 500).ok());
    ASSERT_TRUE(tw->CommitBatch().ok());
  }
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  engine::Db* q = db->get();
  auto id = q->QueryInt("SELECT id FROM events WHERE name = 'NEGOTIATE_ALLREDUCE'", -1);
  ASSERT_TRUE(id.ok());
  negotiation_id = *id;
  ASSERT_GE(negotiation_id, 0);
  const std::string n = std::to_string(negotiation_id);

  // rank, name, comm, seq, ts, dur, end_ts, late_ns, wait_ns, ranks, last_rank
  EXPECT_EQ(SqlRows(q,
                    "SELECT rank, name, comm, seq, ts, dur, end_ts, late_ns, wait_ns, ranks, "
                    "last_rank FROM collective_arrivals ORDER BY comm, seq, ts, rank"),
            (std::vector<std::string>{
                "1|MPI_Allreduce|NULL|1|210|4|214|0|0|1|1",
                "2|ALLREDUCE|0|" + n + "|410|NULL|NULL|0|50|3|2",
                "1|ALLREDUCE|0|" + n + "|450|NULL|NULL|40|10|3|2",
                "2|ALLREDUCE|0|" + n + "|460|NULL|NULL|50|0|3|2",
                "0|MPI_Allreduce|5|1|100|50|150|0|30|3|1",
                "2|MPI_Allreduce|5|1|120|30|150|20|10|3|1",
                "1|MPI_Allreduce|5|1|130|10|140|30|0|3|1",
                "0|MPI_Allreduce|5|2|200|5|205|0|0|2|0",
                "2|MPI_Allreduce|5|2|200|7|207|0|0|2|0",
                "0|ncclAllReduce|7|1|300|0|300|0|10|2|2",
                "2|ncclAllReduce|7|1|310|0|310|10|0|2|2",
            }));
  EXPECT_EQ(SqlRows(q, "SELECT count(*) FROM collective_calls"), (std::vector<std::string>{"11"}));
  // comm, seq, name, ranks, first, last, skew, last_rank, exit_spread, max_dur
  EXPECT_EQ(
      SqlRows(q,
              "SELECT comm, seq, name, ranks, first_arrival, last_arrival, skew_ns, last_rank, "
              "exit_spread_ns, max_dur FROM collectives ORDER BY comm, seq"),
      (std::vector<std::string>{
          "NULL|1|MPI_Allreduce|1|210|210|0|1|0|4",
          "0|" + n + "|ALLREDUCE|3|410|460|50|2|NULL|NULL",
          "5|1|MPI_Allreduce|3|100|130|30|1|10|50", "5|2|MPI_Allreduce|2|200|200|0|0|2|7",
          "7|1|ncclAllReduce|2|300|310|10|2|10|0",  // instants: end_ts = ts
      }));
  // rank, times_last, caused_wait_ns, max_skew_ns (collectives on more than one rank)
  EXPECT_EQ(SqlRows(q, "SELECT * FROM stragglers ORDER BY rank"),
            (std::vector<std::string>{"0|1|0|0", "1|1|30|30", "2|2|60|50"}));
  // rank, collectives, waited_ns, late_ns, times_last
  EXPECT_EQ(SqlRows(q, "SELECT * FROM collective_wait ORDER BY rank"),
            (std::vector<std::string>{"0|3|40|0|1", "1|3|10|70|2", "2|5|60|80|3"}));
}

// A job without Horovod ticks, whose collective_arrivals rows the table streams one partition at
// a time (merging the ranks' calls per communicator in seq order): 5 ranks, several blocks per
// rank, MPI calls on a NULL communicator and on communicators 1 and 7, PyTorch calls (cat comm),
// NCCL issue instants and NCCL spans (not arrivals), ranks missing from collectives, a rank
// calling one seq twice, arrival ties. `back` makes one rank's seq go back once, which the table
// must notice and compute whole. Both against the window functions of the plain SQL.
void WriteCallsJob(const std::string& path, bool back) {
  auto w = engine::TraceWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().message();
  engine::TraceWriter* tw = w->get();
  engine::TraceBuilder b(tw);
  ASSERT_TRUE(tw->BeginBatch().ok());
  const int ranks = 5;
  std::vector<uint32_t> track;
  for (int r = 0; r < ranks; ++r) track.push_back(AddRankTrack(tw, r, ranks, "stream-test"));
  const uint32_t allreduce = tw->Intern("MPI_Allreduce"), bcast = tw->Intern("MPI_Bcast");
  const uint32_t mpi = tw->Intern("mpi"), comm = tw->Intern("comm"), nccl = tw->Intern("nccl");
  const uint32_t nccl_name = tw->Intern("ncclAllReduce"), c10d = tw->Intern("c10d::allreduce_");
  const uint32_t compute = tw->Intern("compute");
  std::mt19937_64 rng(back ? 11 : 10);
  for (int r = 0; r < ranks; ++r) {
    int64_t ts = 0;
    uint64_t seq[4] = {0, 0, 0, 0};  // per (NULL, 1, 7, nccl 3)
    bool went_back = false;
    for (int step = 0; step < 20000; ++step) {
      const int64_t base = static_cast<int64_t>(step) * 100000;
      ts = std::max(ts, base);
      ASSERT_TRUE(b.Complete(track[static_cast<size_t>(r)], ts, 500, compute, 0, nullptr).ok());
      ts += 600;
      const int which = static_cast<int>(rng() % 4);
      if (rng() % 10 == 0) continue;  // this rank skips the collective: a partition without it
      EventArgs a;
      a.mask = EventArgs::kSeq | (which == 0 ? 0u : uint32_t{EventArgs::kComm});
      a.comm = which == 1 ? 1 : which == 2 ? 7 : 3;
      a.seq = seq[which] + static_cast<uint64_t>(step / 4);  // non-decreasing per comm
      if (rng() % 50 == 0) seq[which] += 1;                  // and sometimes a gap
      if (back && r == 2 && step >= 10000 && !went_back) {
        a.seq = 1;
        went_back = true;
      }                                                              // back to an old seq
      const int64_t at = ts + 10 * static_cast<int64_t>(rng() % 4);  // ties across ranks
      const auto t = static_cast<size_t>(r);
      if (which == 3) {
        ASSERT_TRUE(b.Instant(track[t], at, nccl_name, nccl, &a).ok());
        ASSERT_TRUE(b.Complete(track[t], at + 1, 5, nccl_name, nccl, &a).ok());  // no arrival
      } else {
        ASSERT_TRUE(b.Complete(track[t], at, 40, which == 2 ? bcast : allreduce,
                               which == 1 ? comm : mpi, &a)
                        .ok());
        if (rng() % 100 == 0) {  // the same seq again on this rank
          ASSERT_TRUE(b.Complete(track[t], at + 50, 10, which == 1 ? c10d : allreduce,
                                 which == 1 ? comm : mpi, &a)
                          .ok());
        }
      }
      ts = at + 100;
    }
  }
  ASSERT_TRUE(tw->CommitBatch().ok());
}

void ExpectArrivalsAsPlainSql(const std::string& path, bool back) {
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  engine::Db* q = db->get();
  // Rank 2 calls seq 1 late in the job only when it went back.
  EXPECT_EQ(SqlRows(q,
                    "SELECT count(*) > 0 FROM events WHERE rank = 2 AND seq = 1 AND ts > "
                    "1000000000"),
            (std::vector<std::string>{back ? "1" : "0"}));
  const std::vector<std::string> got = SqlRows(q, "SELECT * FROM collective_arrivals");
  const std::vector<std::string> want = SqlRows(
      q,
      "WITH c AS (SELECT rank, name, comm, seq, id, ts, dur, end_ts FROM events WHERE (cat IN "
      "('mpi', 'comm') OR (cat = 'nccl' AND kind = 'instant')) AND seq IS NOT NULL) "
      "SELECT rank, name, comm, seq, id, ts, dur, end_ts, ts - min(ts) OVER w, max(ts) OVER w - "
      "ts, count(*) OVER w, first_value(rank) OVER (PARTITION BY comm, seq ORDER BY ts DESC, "
      "rank) FROM c WINDOW w AS (PARTITION BY comm, seq) ORDER BY comm, seq, ts DESC, rank, id");
  ASSERT_GT(want.size(), 60000u);
  EXPECT_EQ(got.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i] != want[i] && bad++ < 5) {
      ADD_FAILURE() << "row " << i << ": " << got[i] << " vs " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u);
  // Several blocks per rank (the writer's blocks hold 16384 rows).
  EXPECT_EQ(SqlRows(q, "SELECT count(*) >= 10 FROM blocks"), (std::vector<std::string>{"1"}));
  // Scanned again within one statement (the inner loop of a join), the table is computed whole
  // once and kept: three scans give three times the rows.
  EXPECT_EQ(SqlRows(q,
                    "SELECT count(*), sum(y.late_ns) FROM (SELECT 1 FROM collective_arrivals "
                    "LIMIT 3) x, collective_arrivals y"),
            SqlRows(q, "SELECT 3 * count(*), 3 * sum(late_ns) FROM collective_arrivals"));
}

TEST(CollectiveViews, StreamedPartitionsAsPlainSql) {
  TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(WriteCallsJob(tmp.Sub("in_order.tdb"), false));
  ExpectArrivalsAsPlainSql(tmp.Sub("in_order.tdb"), false);
}

TEST(CollectiveViews, SeqGoingBackComputesTheWholeTable) {
  TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(WriteCallsJob(tmp.Sub("back.tdb"), true));
  ExpectArrivalsAsPlainSql(tmp.Sub("back.tdb"), true);
}

}  // namespace
}  // namespace tracedb::testing
