// The why views (wait_states, root_causes, critical_path; query/analysis/why_views.h) on small
// hand-built traces whose every wait and cause is worked out by hand below, and the waits
// compared with plain SQL over `events` written independently of the C++ (the patterns'
// definitions in docs/why.md, as self-joins of the communication events).
//   step 0  ranks 0, 1, 3 spend 200 us in backward, rank 2 260 us: wait_at_nxn in
//           MPI_Allreduce, 60 us each, cause (0, 2, backward) 180 us
//   step 1  MPI_Bcast with root 1, which spends 40 us in load first: late_broadcast, 30 us on
//           ranks 0, 2, 3; then MPI_Reduce with root 0 entering at 460 while rank 3 computes
//           until 530: early_reduce, 70 us, cause (1, 3, compute)
//   step 2  rank 0 packs 50 us then MPI_Send to rank 1, which waits in MPI_Recv since 610:
//           late_sender 40 us; rank 2 MPI_Ssend to rank 3 (works 60 us first): late_receiver
//           50 us, rank 2 waits until 660
//   step 3  after a barrier without waits, rank 0 is slow 100 us before sending to rank 1
//           (late_sender 100 us); rank 1's receive ends 10 us after the send began, it posts
//           5 us, then enters a second barrier, where ranks 2 and 3 have waited since 1000
//           (115 us each): 100 us of each are indirect cost of rank 0's slow phase (rank 1 was
//           waiting for it), 10 us are rank 1's MPI_Recv after the wait, 5 us its post phase;
//           rank 0 waits 5 us there because rank 1 left its receive 5 us after rank 0 left its
//           send (charged to rank 1's MPI_Recv)
#include <gtest/gtest.h>

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
constexpr int64_t kUs = 1000;

EventArgs Coll(uint32_t comm, uint64_t seq, int32_t root = -1) {
  EventArgs a;
  a.mask = EventArgs::kSeq | EventArgs::kComm;
  if (root >= 0) a.mask |= EventArgs::kPeer;
  a.comm = comm;
  a.seq = seq;
  a.peer = root;
  return a;
}

EventArgs P2p(int32_t peer, int32_t tag) {
  EventArgs a;
  a.mask = EventArgs::kPeer | EventArgs::kTag | EventArgs::kComm | EventArgs::kBytes;
  a.peer = peer;
  a.tag = tag;
  a.comm = 1;
  a.bytes = 64;
  return a;
}

class WhyViews : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = tmp_.Sub("why.tdb");
    auto w = engine::TraceWriter::Open(path_);
    ASSERT_TRUE(w.ok()) << w.status().message();
    engine::TraceWriter* tw = w->get();
    engine::TraceBuilder b(tw);
    ASSERT_TRUE(tw->BeginBatch().ok());
    std::vector<uint32_t> t(4);
    for (int r = 0; r < 4; ++r) {
      t[r] = AddRankTrack(tw, r, 4, "why-test");
      for (int step = 0; step < 4; ++step)
        tw->AddStep(r, std::vector<int64_t>{0, 400, 600, 1000}[step] * kUs, step);
    }
    const uint32_t mpi = tw->Intern("mpi"), compute = tw->Intern("compute");
    auto n = [&](const char* s) { return tw->Intern(s); };
    auto span = [&](int r, int64_t ts, int64_t dur, const char* name, uint32_t cat,
                    const EventArgs* a = nullptr) {
      ASSERT_TRUE(b.Complete(t[r], ts * kUs, dur * kUs, n(name), cat, a).ok());
    };
    // Step 0: forward 100 us everywhere; backward 200 us, rank 2 260 us; allreduce to 370.
    for (int r = 0; r < 4; ++r) {
      const int64_t bw = r == 2 ? 260 : 200;
      span(r, 0, 100, "forward", compute);
      span(r, 100, bw, "backward", compute);
      EventArgs a = Coll(1, 1);
      span(r, 100 + bw, 370 - (100 + bw), "MPI_Allreduce", mpi, &a);
    }
    // Step 1: broadcast from root 1 (load 400..440), ranks 0, 2, 3 enter at 410; all end 450.
    span(1, 400, 40, "load", compute);
    for (int r = 0; r < 4; ++r) {
      EventArgs a = Coll(1, 2, /*root=*/1);
      const int64_t in = r == 1 ? 440 : 410;
      span(r, in, 450 - in, "MPI_Bcast", mpi, &a);
    }
    // Reduce to root 0: compute from 450 for 10 (rank 0), 20 (ranks 1, 2), 80 us (rank 3).
    for (int r = 0; r < 4; ++r) {
      const int64_t c = std::vector<int64_t>{10, 20, 20, 80}[r];
      span(r, 450, c, "compute", compute);
      EventArgs a = Coll(1, 3, /*root=*/0);
      span(r, 450 + c, 540 - (450 + c), "MPI_Reduce", mpi, &a);
    }
    // Step 2: 0 -> 1 (late sender), 2 -> 3 synchronous (late receiver).
    span(0, 600, 50, "pack", compute);
    {
      EventArgs a = P2p(1, 7);
      span(0, 650, 5, "MPI_Send", mpi, &a);
      a = P2p(0, 7);
      span(1, 610, 50, "MPI_Recv", mpi, &a);
      a = P2p(3, 8);
      span(2, 610, 60, "MPI_Ssend", mpi, &a);
      span(3, 600, 60, "work", compute);
      a = P2p(2, 8);
      span(3, 660, 12, "MPI_Recv", mpi, &a);
    }
    // A barrier without waits closes step 2 (all enter at 990).
    for (int r = 0; r < 4; ++r) {
      EventArgs a = Coll(1, 4);
      span(r, 990, 10, "MPI_Barrier", mpi, &a);
    }
    // Step 3: rank 0 slow 1000..1100, sends to 1 (waiting since 1000); then a barrier.
    span(0, 1000, 100, "slow", compute);
    {
      EventArgs a = P2p(1, 9);
      span(0, 1100, 5, "MPI_Send", mpi, &a);
      a = P2p(0, 9);
      span(1, 1000, 110, "MPI_Recv", mpi, &a);
      span(1, 1110, 5, "post", compute);
      const int64_t in[4] = {1110, 1115, 1000, 1000};
      for (int r = 0; r < 4; ++r) {
        a = Coll(1, 5);
        span(r, in[r], 1120 - in[r], "MPI_Barrier", mpi, &a);
      }
    }
    ASSERT_TRUE(tw->CommitBatch().ok());
  }

  TempDir tmp_;
  std::string path_;
};

TEST_F(WhyViews, WaitStatesAreTheHandDerivedOnes) {
  auto db = query::OpenQueryDb(path_);
  ASSERT_TRUE(db.ok()) << db.status().message();
  const std::vector<std::string> expect = {
      "0|0|wait_at_nxn|60000|2|MPI_Allreduce", "0|1|late_broadcast|30000|1|MPI_Bcast",
      "0|1|early_reduce|70000|3|MPI_Reduce",   "0|3|wait_at_nxn|5000|1|MPI_Barrier",
      "1|0|wait_at_nxn|60000|2|MPI_Allreduce", "1|2|late_sender|40000|0|MPI_Recv",
      "1|3|late_sender|100000|0|MPI_Recv",     "2|1|late_broadcast|30000|1|MPI_Bcast",
      "2|2|late_receiver|50000|3|MPI_Ssend",   "2|3|wait_at_nxn|115000|1|MPI_Barrier",
      "3|0|wait_at_nxn|60000|2|MPI_Allreduce", "3|1|late_broadcast|30000|1|MPI_Bcast",
      "3|3|wait_at_nxn|115000|1|MPI_Barrier"};
  EXPECT_EQ(SqlRows(db->get(),
                    "SELECT rank, step, pattern, wait_ns, waited_for, call FROM wait_states "
                    "ORDER BY rank, ts"),
            expect);
  // The waiting event is the rank's own call.
  EXPECT_EQ(SqlRows(db->get(),
                    "SELECT count(*) FROM wait_states w JOIN events e ON e.id = w.id "
                    "WHERE e.rank = w.rank AND e.name = w.call AND e.ts = w.ts"),
            std::vector<std::string>{"13"});
  EXPECT_EQ(SqlRows(db->get(), "SELECT pattern, waits, wait_ns FROM wait_state_totals ORDER BY 1"),
            (std::vector<std::string>{"early_reduce|1|70000", "late_broadcast|3|90000",
                                      "late_receiver|1|50000", "late_sender|2|140000",
                                      "wait_at_nxn|6|415000"}));
}

// The same waits in plain SQL over `events`, written from the definitions (docs/why.md), not
// from the C++: each pattern a self-join of the communication events.
TEST_F(WhyViews, WaitStatesEqualPlainSql) {
  auto db = query::OpenQueryDb(path_);
  ASSERT_TRUE(db.ok()) << db.status().message();
  const std::string plain = R"sql(
    WITH c AS (SELECT id, rank, name, comm, seq, ts, dur, peer, step FROM events
               WHERE cat = 'mpi' AND seq IS NOT NULL),
    lastin AS (SELECT comm, seq, max(ts) AS ts FROM c GROUP BY comm, seq),
    nxn AS (
      SELECT c.id, c.rank, c.step, 'wait_at_nxn' AS pattern, min(l.ts - c.ts, c.dur) AS wait_ns,
             (SELECT x.rank FROM c x WHERE x.comm = c.comm AND x.seq = c.seq
              ORDER BY x.ts DESC, x.rank LIMIT 1) AS waited_for
      FROM c JOIN lastin l ON l.comm = c.comm AND l.seq = c.seq
      WHERE c.name IN ('MPI_Allreduce', 'MPI_Barrier') AND l.ts > c.ts),
    bcast AS (
      SELECT c.id, c.rank, c.step, 'late_broadcast', min(root.ts - c.ts, c.dur), root.rank
      FROM c JOIN c root ON root.comm = c.comm AND root.seq = c.seq AND root.rank = c.peer
      WHERE c.name = 'MPI_Bcast' AND c.rank <> root.rank AND root.ts > c.ts),
    reduce AS (
      SELECT root.id, root.rank, root.step, 'early_reduce',
             min(max(o.ts) - root.ts, root.dur),
             (SELECT x.rank FROM c x WHERE x.comm = root.comm AND x.seq = root.seq
              AND x.rank <> root.rank ORDER BY x.ts DESC, x.rank LIMIT 1)
      FROM c root JOIN c o ON o.comm = root.comm AND o.seq = root.seq AND o.rank <> root.rank
      WHERE root.name = 'MPI_Reduce' AND root.rank = root.peer
      GROUP BY root.id HAVING max(o.ts) > root.ts),
    s AS (SELECT * FROM events WHERE cat = 'mpi' AND name IN ('MPI_Send', 'MPI_Ssend')),
    r AS (SELECT * FROM events WHERE cat = 'mpi' AND name = 'MPI_Recv'),
    p AS (SELECT s.id AS sid, s.rank AS src, s.ts AS sts, s.dur AS sdur, s.name AS sname,
                 r.id AS rid, r.rank AS dst, r.ts AS rts, r.dur AS rdur, r.step AS rstep,
                 s.step AS sstep
          FROM s JOIN r ON r.rank = s.peer AND s.rank = r.peer AND r.tag = s.tag),
    ls AS (SELECT rid, dst, rstep, 'late_sender', min(sts - rts, rdur), src FROM p
           WHERE sts > rts),
    lr AS (SELECT sid, src, sstep, 'late_receiver', rts - sts, dst FROM p
           WHERE sname = 'MPI_Ssend' AND rts > sts AND sts + sdur > rts)
    SELECT * FROM nxn UNION ALL SELECT * FROM bcast UNION ALL SELECT * FROM reduce
    UNION ALL SELECT * FROM ls UNION ALL SELECT * FROM lr ORDER BY 1, 4)sql";
  const auto want = SqlRows(db->get(), plain);
  EXPECT_EQ(want.size(), 13u);
  EXPECT_EQ(SqlRows(db->get(),
                    "SELECT id, rank, step, pattern, wait_ns, waited_for FROM wait_states "
                    "ORDER BY 1, 4"),
            want);
}

TEST_F(WhyViews, RootCausesChargeEachDelayOnceWithWhatItPropagated) {
  auto db = query::OpenQueryDb(path_);
  ASSERT_TRUE(db.ok()) << db.status().message();
  // cost = direct + indirect; excess over the median rank of the step.
  const std::vector<std::string> expect = {
      "3|0|slow|300000|100000|200000|100000|1", "0|2|backward|180000|180000|0|60000|0,1,3",
      "1|1|load|90000|90000|0|40000|0,2,3",     "1|3|compute|70000|70000|0|60000|0",
      "2|3|work|50000|50000|0|60000|2",         "2|0|pack|40000|40000|0|50000|1",
      "3|1|MPI_Recv|25000|25000|0|10000|0,2,3", "3|1|post|10000|10000|0|5000|2,3"};
  EXPECT_EQ(SqlRows(db->get(),
                    "SELECT step, rank, name, cost_ns, direct_ns, indirect_ns, excess_ns, "
                    "waiting_ranks FROM tracedb_root_causes ORDER BY cost_ns DESC, step"),
            expect);
  // Every wait is charged once, in full: directly, or indirectly through the wait before it.
  EXPECT_EQ(SqlRows(db->get(),
                    "SELECT (SELECT sum(direct_ns) + sum(indirect_ns) FROM tracedb_root_causes), "
                    "(SELECT sum(wait_ns) FROM wait_states)"),
            std::vector<std::string>{"765000|765000"});
  // Seven stand out (each the only rank with time in its name that step); rank 1's 10 us in
  // MPI_Recv after its wait is within the variation of MPI_Recv over the job.
  EXPECT_EQ(SqlRows(db->get(), "SELECT count(*) FROM root_causes"), std::vector<std::string>{"7"});
}

TEST_F(WhyViews, CriticalPathFollowsTheWaits) {
  auto db = query::OpenQueryDb(path_);
  ASSERT_TRUE(db.ok()) << db.status().message();
  // Step 0: the path runs on rank 2 (the late one) until the allreduce it entered last.
  const auto s0 =
      SqlRows(db->get(), "SELECT rank, name, dur FROM critical_path WHERE step = 0 ORDER BY ord");
  ASSERT_FALSE(s0.empty());
  EXPECT_EQ(s0[0], "2|forward|100000");
  EXPECT_EQ(s0[1], "2|backward|260000");
  // Step 3: rank 0's slow phase, its send, then rank 1's receive tail, post and barrier.
  const auto s3 =
      SqlRows(db->get(), "SELECT rank, name FROM critical_path WHERE step = 3 ORDER BY ord");
  ASSERT_GE(s3.size(), 3u);
  EXPECT_EQ(s3[0], "0|slow");
  EXPECT_EQ(s3[1], "1|MPI_Recv");
  // The path covers each step window without gaps or overlaps.
  EXPECT_EQ(SqlRows(db->get(),
                    "SELECT count(*) FROM (SELECT step, sum(dur) AS d, min(ts) AS a, "
                    "max(ts + dur) AS b FROM critical_path GROUP BY step) WHERE d <> b - a"),
            std::vector<std::string>{"0"});
  // What-if: rank 2's backward at the median (200 us) shortens step 0 by 60 us.
  EXPECT_EQ(SqlRows(db->get(),
                    "SELECT step_ns - whatif_step_ns FROM critical_path_whatif "
                    "WHERE step = 0 AND rank = 2 AND name = 'backward'"),
            std::vector<std::string>{"60000"});
}

// A wait in a call on a lane (PyTorch's c10d operations, which gloo's threads run) is not time
// spent in what the rank's thread did meanwhile. Six steps of 1000 us on 4 ranks: `backward` on
// the thread computes 200 + 2r us, then issues the gradient allreduce on its lane and blocks
// until it completes, 4 us after the last rank entered; at step 3 rank 2 computes 500 us more.
// Without the rule every rank's backward at step 3 lasts 710 us (the waiting ones blocked in it),
// the median rank too, so rank 2's delay had no excess and was filtered as noise. With it: the
// waiting ranks' backward is 710 less their wait (504, 502, 498 us): 206, 208, 212; median
// (206, 208, 212, 710) = 210, excess 500 us; the cost is the three waits, 1504 us.
TEST(WhyLaneWaits, AWaitOnALaneIsNotTimeInTheThreadsSpan) {
  TempDir tmp;
  const std::string path = tmp.Sub("lane.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    engine::TraceWriter* tw = w->get();
    engine::TraceBuilder b(tw);
    ASSERT_TRUE(tw->BeginBatch().ok());
    const uint32_t comm = tw->Intern("comm"), compute = tw->Intern("compute");
    const uint32_t backward = tw->Intern("backward"), allreduce = tw->Intern("gloo:all_reduce");
    for (int r = 0; r < 4; ++r) {
      engine::RankRecord rec;
      rec.rank = r;
      rec.world_size = 4;
      rec.source = "why-lane-test";
      ASSERT_TRUE(tw->SetRank(rec).ok());
      engine::TrackSpec thread;
      thread.rank = r;
      thread.name = "main";
      thread.tid = 200 + r;
      thread.local_id = 1;
      engine::TrackSpec lane;
      lane.rank = r;
      lane.kind = "lane";
      lane.name = "c10d 0";
      const uint32_t t = tw->Track(thread), l = tw->Track(lane);
      for (int step = 0; step < 6; ++step) {
        const int64_t base = step * 1000;
        tw->AddStep(r, base * kUs, step);
        const int64_t entry = 200 + 2 * r + (step == 3 && r == 2 ? 500 : 0);
        const int64_t last = step == 3 ? 704 : 206;
        ASSERT_TRUE(b.Complete(t, base * kUs, (last + 4) * kUs, backward, compute, nullptr).ok());
        EventArgs a = Coll(0x40000000u, static_cast<uint64_t>(step));
        ASSERT_TRUE(
            b.Complete(l, (base + entry) * kUs, (last + 4 - entry) * kUs, allreduce, comm, &a)
                .ok());
      }
    }
    ASSERT_TRUE(tw->CommitBatch().ok());
  }
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ(
      SqlRows(db->get(),
              "SELECT rank, wait_ns, waited_for FROM wait_states WHERE step = 3 ORDER BY rank"),
      (std::vector<std::string>{"0|504000|2", "1|502000|2", "3|498000|2"}));
  EXPECT_EQ(
      SqlRows(db->get(), "SELECT step, rank, name, cost_ns, excess_ns, call FROM root_causes"),
      (std::vector<std::string>{"3|2|backward|1504000|500000|gloo:all_reduce"}));
}

}  // namespace
}  // namespace tracedb::testing

namespace tracedb::testing {
namespace {

// Two ranks whose steps drift apart by 2.5 steps (a pipeline, or clocks nothing ties together):
// rank 0's step s is [100 s, 100 s + 100) us, rank 1's 250 us later; each step is 80 us of work
// and a 20 us MPI_Allreduce (matched by seq, so every one is a long wait). Each step's window
// (first start to last end) would span three steps: the windows must be disjoint, in step order,
// and together cover the job once.
TEST(WhyViewsSkew, StepWindowsAreDisjointWhenRanksDrift) {
  TempDir tmp;
  const std::string path = tmp.Sub("skew.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    engine::TraceWriter* tw = w->get();
    engine::TraceBuilder b(tw);
    ASSERT_TRUE(tw->BeginBatch().ok());
    const uint32_t mpi = tw->Intern("mpi"), compute = tw->Intern("compute");
    for (int r = 0; r < 2; ++r) {
      const uint32_t t = AddRankTrack(tw, r, 2, "why-test");
      for (int step = 0; step < 6; ++step) {
        const int64_t at = (100 * step + 250 * r) * kUs;
        tw->AddStep(r, at, step);
        ASSERT_TRUE(b.Complete(t, at, 80 * kUs, tw->Intern("work"), compute, nullptr).ok());
        EventArgs a = Coll(1, static_cast<uint64_t>(step + 1));
        ASSERT_TRUE(
            b.Complete(t, at + 80 * kUs, 20 * kUs, tw->Intern("MPI_Allreduce"), mpi, &a).ok());
      }
    }
    ASSERT_TRUE(tw->CommitBatch().ok());
  }
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  const std::string windows =
      "(SELECT step, min(ts) AS a, max(ts + dur) AS b, sum(dur) AS d FROM critical_path "
      "GROUP BY step)";
  EXPECT_EQ(SqlRows(db->get(), "SELECT count(*) FROM " + windows + " x JOIN " + windows +
                                   " y ON x.step < y.step AND x.b > y.a"),
            std::vector<std::string>{"0"});
  // Together once over the job: from rank 0's first start to rank 1's last end (850 us).
  EXPECT_EQ(SqlRows(db->get(), "SELECT sum(d), min(a), max(b) FROM " + windows),
            std::vector<std::string>{"850000|0|850000"});
  EXPECT_EQ(SqlRows(db->get(), "SELECT sum(path_ns) FROM critical_path_names"),
            std::vector<std::string>{"850000"});
}

}  // namespace
}  // namespace tracedb::testing
