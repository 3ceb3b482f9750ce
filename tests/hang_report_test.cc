// The hang report's rules (query/hang/hang_report.h, docs/hang.md) on hand-built traces whose
// answer is known: segment files written from a spec (tests/segment_fixture.h), compacted with
// the real `tracedb compact --finish` (every span still open becomes an open row), then
// BuildHangReport. Each case states who is blocked where; the culprits follow from the rules.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "query/hang/hang_report.h"
#include "query/open/query_db.h"
#include "tests/segment_fixture.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

// One rank's file: an anchor, the names, thread 1 with `events`, a late anchor (last seen at
// t = 2 ms), END. Names: 1 MPI_Allreduce, 2 MPI_Recv, 3 fetch_batch, 4 MPI_Send.
std::string Rank(int rank, int world, const std::string& events) {
  const std::string r = std::to_string(rank);
  return "file trace " + r + " " + std::to_string(100 + rank) +
         " 0 host=node0 world=" + std::to_string(world) +
         "\n"
         "anchor 1000000000000 0\n"
         "string 1 MPI_Allreduce\nstring 2 MPI_Recv\nstring 3 fetch_batch\nstring 4 MPI_Send\n"
         "comm 0 " +
         std::to_string(world) + " " + r + " " + (world == 3 ? "0,1,2" : "0,1,2,3") +
         "\n"
         "thread 1 " +
         std::to_string(4000 + rank) + " main\nevents 1\n" + events +
         "anchor 1000002000000 2000000\nend\n";
}

query::hang::HangReport Report(const std::string& spec) {
  TempDir tmp;
  EXPECT_TRUE(WriteSegmentsFromSpec(tmp.path(), spec).ok());
  const std::string db = tmp.Sub("job.tdb");
  int rc = 0;
  const std::string out = RunCommand(TracedbBin() + " compact " + ShellQuote(tmp.Sub("trace")) +
                                         " -o " + ShellQuote(db) + " --finish -q 2>&1",
                                     &rc);
  EXPECT_EQ(rc, 0) << out;
  auto q = query::OpenQueryDb(db);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  auto rep = query::hang::BuildHangReport(q->get());
  EXPECT_TRUE(rep.ok()) << rep.status().ToString();
  return rep.ok() ? *rep : query::hang::HangReport();
}

std::vector<int32_t> Culprits(const query::hang::HangReport& r) {
  std::vector<int32_t> out;
  for (const auto& c : r.culprits) out.push_back(c.rank);
  return out;
}

// Rule 1: ranks 0, 1, 3 wait in allreduce seq 5; rank 2 is in fetch_batch, blocked in a receive
// from rank 3 (which waits in the collective): rank 2 alone, and the reason says deadlock.
TEST(HangReport, TheRankMissingFromTheCollectiveIsTheCulprit) {
  std::string spec;
  for (int r : {0, 1, 3}) {
    spec += Rank(r, 4, "X 1000 100 1 cat=4 comm=0 seq=4\nB 5000 1 cat=4 comm=0 seq=5\n");
  }
  spec +=
      Rank(2, 4, "X 1000 100 1 cat=4 comm=0 seq=4\nB 3000 3\nB 4000 2 cat=4 peer=3 tag=7 comm=0\n");
  const auto rep = Report(spec);
  EXPECT_EQ(Culprits(rep), std::vector<int32_t>({2}));
  ASSERT_EQ(rep.collectives.size(), 1u);
  EXPECT_EQ(rep.collectives[0].seq, 5);
  EXPECT_EQ(rep.collectives[0].ranks_in, std::vector<int32_t>({0, 1, 3}));
  EXPECT_EQ(rep.collectives[0].ranks_missing, std::vector<int32_t>({2}));
  EXPECT_TRUE(rep.collectives[0].members_known);
  ASSERT_EQ(rep.ranks.size(), 4u);
  const auto& r2 = rep.ranks[2];
  ASSERT_TRUE(r2.blocked.has_value());
  ASSERT_EQ(r2.open_spans.size(), 2u);
  EXPECT_EQ(r2.open_spans[0].name, "MPI_Recv");  // innermost first
  EXPECT_EQ(r2.open_spans[1].name, "fetch_batch");
  EXPECT_EQ(r2.open_spans[0].peer, 3);
  // Last seen at the late anchor: t = 2 ms on the common clock.
  EXPECT_EQ(r2.open_spans[0].end, 1000002000000);
  EXPECT_NE(rep.culprits[0].reason.find("deadlock"), std::string::npos) << rep.culprits[0].reason;
  EXPECT_NE(rep.culprits[0].reason.find("seq 4"), std::string::npos) << rep.culprits[0].reason;
}

// Rule 2: no collective; rank 0 receives from 1, rank 1 receives from 2, rank 2 has no span open
// (it computes, or ended): the end of the chain, rank 2, is the culprit.
TEST(HangReport, TheEndOfAWaitForChainIsTheCulprit) {
  const std::string spec = Rank(0, 3, "B 1000 2 cat=4 peer=1 comm=0\n") +
                           Rank(1, 3, "B 1000 2 cat=4 peer=2 comm=0\n") +
                           Rank(2, 3, "X 1000 100 3\n");
  const auto rep = Report(spec);
  EXPECT_EQ(Culprits(rep), std::vector<int32_t>({2}));
  EXPECT_TRUE(rep.collectives.empty());
}

// Rule 2, a cycle: ranks 0 and 1 receive from each other: both are culprits; rank 2, sending
// to rank 0, is not (its send matches nobody's wait for it).
TEST(HangReport, EveryRankOfAReceiveCycleIsACulprit) {
  const std::string spec = Rank(0, 3, "B 1000 2 cat=4 peer=1 comm=0\n") +
                           Rank(1, 3, "B 1000 2 cat=4 peer=0 comm=0\n") +
                           Rank(2, 3, "B 1000 4 cat=4 peer=0 comm=0\n");
  const auto rep = Report(spec);
  EXPECT_EQ(Culprits(rep), std::vector<int32_t>({0, 1}));
}

// A receive matched by the peer's pending send to it is no wait-for edge; nothing open
// anywhere else: no culprit, and a job that ended cleanly reports every rank with no open span.
TEST(HangReport, AMatchedSendIsNoCulpritAndACleanJobHasNone) {
  const auto matched =
      Report(Rank(0, 3, "B 1000 2 cat=4 peer=1 comm=0\n") +
             Rank(1, 3, "B 1000 4 cat=4 peer=0 comm=0\n") + Rank(2, 3, "X 1000 100 3\n"));
  EXPECT_TRUE(matched.culprits.empty());
  const auto clean = Report(Rank(0, 3, "X 1000 100 1 cat=4 comm=0 seq=0\n") +
                            Rank(1, 3, "X 1000 100 1 cat=4 comm=0 seq=0\n") +
                            Rank(2, 3, "X 1000 100 1 cat=4 comm=0 seq=0\n"));
  EXPECT_TRUE(clean.culprits.empty());
  EXPECT_EQ(clean.open_rows, 0u);
  for (const auto& r : clean.ranks) EXPECT_TRUE(r.open_spans.empty()) << r.rank;
  const std::string json = query::hang::HangReportJson(clean);
  EXPECT_NE(json.find("\"culprits\":[]"), std::string::npos) << json;
}

}  // namespace
}  // namespace tracedb::testing
