// WriteViewFixture. See view_fixture.h.
#include "tests/view_fixture.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"

namespace tracedb::testing {

void WriteViewFixture(const std::string& path) {
  auto w = engine::TraceWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  engine::TraceWriter& tw = **w;
  ASSERT_TRUE(tw.BeginBatch().ok());
  engine::TraceBuilder b(&tw);
  const uint32_t compute = tw.Intern("compute"), mpi = tw.Intern("mpi");
  for (int rank = 0; rank < 2; ++rank) {
    engine::RankRecord rr;
    rr.rank = rank;
    rr.host = rank == 0 ? "node-a" : "node-b";
    rr.world_size = 2;
    ASSERT_TRUE(tw.SetRank(rr).ok());
    engine::TrackSpec main;
    main.rank = rank;
    main.name = "main";
    main.tid = 100 + rank;
    main.local_id = 1;
    const uint32_t t_main = tw.Track(main);
    engine::TrackSpec lane;
    lane.rank = rank;
    lane.kind = "lane";
    lane.name = "comm";
    lane.sort_index = 1;
    const uint32_t t_lane = tw.Track(lane);
    engine::TrackSpec ctr;
    ctr.rank = rank;
    ctr.kind = "counter";
    ctr.name = "counters";
    ctr.sort_index = 2;
    const uint32_t t_ctr = tw.Track(ctr);
    for (int i = 0; i < kViewSteps; ++i) {
      const int64_t s = kViewEpoch + i * kViewStepNs + rank * 7;
      tw.AddStep(rank, s, i);
      ASSERT_TRUE(b.Begin(t_main, s, tw.Intern("step"), compute, nullptr).ok());
      ASSERT_TRUE(b.Begin(t_main, s + 1000, tw.Intern("forward"), compute, nullptr).ok());
      for (int j = 0; j < 20; ++j) {
        ASSERT_TRUE(
            b.Complete(t_main, s + 2000 + j * 1500, 500 + j, tw.Intern("kernel"), compute, nullptr)
                .ok());
      }
      ASSERT_TRUE(b.End(t_main, s + 41000).ok());
      ASSERT_TRUE(b.Complete(t_main, s + 45000, 40000 + i % 13, tw.Intern("backward"), compute,
                             nullptr, R"({"bucket": 3})")
                      .ok());
      ASSERT_TRUE(b.Instant(t_main, s + 88000, tw.Intern("mark"), 0, nullptr).ok());
      ASSERT_TRUE(b.End(t_main, s + 90000).ok());
      ASSERT_TRUE(b.Counter(t_ctr, s + 500, tw.Intern("loss"), 0, std::sin(i * 0.1)).ok());
      ASSERT_TRUE(b.Counter(t_ctr, s + 600, tw.Intern("mem"), 0, i % 17).ok());
      engine::EventArgs coll;
      coll.mask = engine::EventArgs::kSeq | engine::EventArgs::kComm | engine::EventArgs::kBytes;
      coll.seq = static_cast<uint64_t>(i);
      coll.comm = 1;
      coll.bytes = 4096;
      ASSERT_TRUE(b.Complete(t_lane, s + 50000 + rank * 300 + (i % 5) * 100, 20000,
                             tw.Intern("MPI_Allreduce"), mpi, &coll)
                      .ok());
      engine::EventArgs msg;
      msg.mask = engine::EventArgs::kPeer | engine::EventArgs::kTag | engine::EventArgs::kComm |
                 engine::EventArgs::kBytes;
      msg.peer = 1 - rank;
      msg.tag = 5;
      msg.comm = 1;
      msg.bytes = 1024;
      if (rank == 0) {
        ASSERT_TRUE(b.Complete(t_lane, s + 75000, 2000, tw.Intern("MPI_Send"), mpi, &msg).ok());
      } else {
        ASSERT_TRUE(b.Complete(t_lane, s + 74000, 5000, tw.Intern("MPI_Recv"), mpi, &msg).ok());
      }
    }
  }
  ASSERT_TRUE(tw.CommitBatch().ok());
}

}  // namespace tracedb::testing
