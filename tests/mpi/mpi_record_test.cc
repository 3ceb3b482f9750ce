// MPI capture end to end through `tracedb record -- mpirun ...`: an MPI program that never calls
// tracedb, recorded on 4 ranks, gives a database whose MPI report counts every routine's calls
// and bytes exactly as the program did; its output and exit code are unchanged; collectives are
// matched across ranks; point-to-point messages are matched; and ranks on (simulated) other
// hosts with clocks 5 ms off are aligned by the MPI clock sync within the stored uncertainty.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "query/open/query_db.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;

std::string Mpirun() {
  std::string cmd = std::string(TRACEDB_MPIEXEC) + " --oversubscribe";
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd;
}

std::string Record(const std::string& db, const std::string& mpi_args, int* rc) {
  return RunCommand(TracedbBin() + " record --force -o " + ShellQuote(db) + " -- " + Mpirun() +
                        " " + mpi_args + " 2>&1",
                    rc);
}

std::map<std::string, std::pair<int64_t, int64_t>> ReadExpected(const std::string& path) {
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  std::ifstream in(path);
  std::string name;
  int64_t count, bytes;
  while (in >> name >> count >> bytes) out[name] = {count, bytes};
  return out;
}

TEST(MpiRecord, ReportCountsEveryRoutineExactlyAndOutputIsUnchanged) {
  TempDir tmp;
  const std::string plain_dir = tmp.Sub("plain"), traced_dir = tmp.Sub("traced");
  fs::create_directories(plain_dir);
  fs::create_directories(traced_dir);
  int rc_plain = 0, rc = 0;
  const std::string plain = RunCommand(Mpirun() + " -np 4 " + ShellQuote(TRACEDB_MPI_WORKLOAD) +
                                           " " + ShellQuote(plain_dir) + " 2>/dev/null",
                                       &rc_plain);
  const std::string db = tmp.Sub("job.tdb");
  // stdout only: the recorder's summary goes to stderr.
  const std::string traced = RunCommand(
      TracedbBin() + " record --force -o " + ShellQuote(db) + " -- " + Mpirun() + " -np 4 " +
          ShellQuote(TRACEDB_MPI_WORKLOAD) + " " + ShellQuote(traced_dir) + " 2>/dev/null",
      &rc);
  EXPECT_EQ(rc, rc_plain);
  EXPECT_EQ(traced, plain);
  ASSERT_TRUE(fs::exists(db)) << traced;

  auto q = query::OpenQueryDb(db);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  for (int rank = 0; rank < 4; ++rank) {
    auto expected = ReadExpected(traced_dir + "/expected-" + std::to_string(rank) + ".txt");
    ASSERT_FALSE(expected.empty()) << rank;
    auto st = (*q)->Prepare(
        "SELECT name, count(*), total(bytes) FROM events WHERE cat = 'mpi' AND rank = ?1 "
        "GROUP BY name");
    ASSERT_TRUE(st.ok());
    st->Bind(1, rank);
    std::map<std::string, std::pair<int64_t, int64_t>> got;
    while (*st->Step()) {
      got[std::string(st->Text(0))] = {st->Int(1), static_cast<int64_t>(st->Double(2))};
    }
    for (const auto& [name, cb] : expected) {
      EXPECT_EQ(got[name].first, cb.first) << "rank " << rank << " " << name << " calls";
      EXPECT_EQ(got[name].second, cb.second) << "rank " << rank << " " << name << " bytes";
    }
  }
  // The report lists the same numbers (JSON form).
  int rrc = 0;
  const std::string json =
      RunCommand(TracedbBin() + " report mpi " + ShellQuote(db) + " --format json", &rrc);
  EXPECT_EQ(rrc, 0);
  auto e0 = ReadExpected(traced_dir + "/expected-0.txt");
  const std::string send =
      "{\"routine\": \"MPI_Send\", \"calls\": " + std::to_string(e0["MPI_Send"].first) +
      ", \"bytes\": " + std::to_string(e0["MPI_Send"].second);
  EXPECT_NE(json.find(send), std::string::npos) << json.substr(0, 2000);
  const std::string text = RunCommand(TracedbBin() + " report mpi " + ShellQuote(db), &rrc);
  EXPECT_EQ(rrc, 0);
  EXPECT_NE(text.find("MPI Routine                        #calls     avg. bytes      time(sec)"),
            std::string::npos);
  EXPECT_NE(text.find("Message size distributions:"), std::string::npos);
  EXPECT_NE(text.find("had the maximum communication time"), std::string::npos);

  // Collectives on MPI_COMM_WORLD are matched on all 4 ranks; every matched point-to-point
  // message names a send and a receive of the same size on two ranks.
  auto v = (*q)->QueryInt("SELECT count(*) FROM collectives WHERE comm = 0 AND ranks <> 4", -1);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 0);
  v = (*q)->QueryInt("SELECT count(*) FROM collectives WHERE comm = 0", -1);
  EXPECT_GT(*v, 5);
  v = (*q)->QueryInt("SELECT count(*) FROM p2p_messages WHERE src <> dst", -1);
  ASSERT_TRUE(v.ok());
  EXPECT_GT(*v, 0);
  // MPI_Send -> MPI_Recv pairs: as many as MPI_Send calls on communicator 0 (every send in the
  // workload is received).
  v = (*q)->QueryInt(
      "SELECT count(*) FROM p2p_messages m JOIN events s ON s.id = m.send_id "
      "WHERE s.name = 'MPI_Send' AND m.comm = 0",
      -1);
  int64_t sends = 0;
  for (int r = 0; r < 4; ++r) {
    auto e = ReadExpected(traced_dir + "/expected-" + std::to_string(r) + ".txt");
    sends += e["MPI_Send"].first;
  }
  EXPECT_EQ(*v, sends);

  // The Chrome export draws the matched messages as flows.
  const std::string exported = RunCommand(TracedbBin() + " export --chrome " + ShellQuote(db) +
                                              " -o " + ShellQuote(tmp.Sub("job.json")) + " 2>&1",
                                          &rrc);
  EXPECT_EQ(rrc, 0) << exported;
  auto msgs = (*q)->QueryInt("SELECT count(*) FROM p2p_messages", -1);
  EXPECT_NE(exported.find(std::to_string(*msgs) + " extra (0 not drawn)"), std::string::npos)
      << exported;
}

TEST(MpiRecord, RanksOnOtherHostsAreAlignedByClockSync) {
  TempDir tmp;
  const std::string db = tmp.Sub("barrier.tdb");
  int rc = 0;
  // Ranks 2 and 3 pretend to run on another host whose realtime clock is 5 ms ahead.
  const std::string out =
      Record(db,
             // -x applies to one app context: every option is repeated in both.
             "-np 2 -x TRACEDB_MPI_SYNC_GROUP=2 -x TRACEDB_HOSTNAME=hostA " +
                 ShellQuote(TRACEDB_BARRIER_PROGRAM) +
                 " 40 : -np 2 -x TRACEDB_MPI_SYNC_GROUP=2 -x TRACEDB_HOSTNAME=hostB "
                 "-x TRACEDB_REALTIME_OFFSET_NS=5000000 " +
                 ShellQuote(TRACEDB_BARRIER_PROGRAM) + " 40",
             &rc);
  ASSERT_EQ(rc, 0) << out;
  auto q = query::OpenQueryDb(db);
  ASSERT_TRUE(q.ok());
  std::map<int, std::pair<std::string, int64_t>> clock;
  auto cs = (*q)->Prepare("SELECT rank, clock_method, uncertainty_ns FROM clock_alignment");
  ASSERT_TRUE(cs.ok());
  while (*cs->Step()) {
    clock[static_cast<int>(cs->Int(0))] = {std::string(cs->Text(1)),
                                           cs->IsNull(2) ? -1 : cs->Int(2)};
  }
  ASSERT_EQ(clock.size(), 4u) << out;
  EXPECT_EQ(clock[1].first, "same-host");
  EXPECT_EQ(clock[2].first, "sync");
  EXPECT_EQ(clock[3].first, "sync");
  // Every rank's exit from each barrier, against rank 0's.
  auto st = (*q)->Prepare(
      "SELECT a.rank, b.end_ts - a.end_ts FROM collective_arrivals a JOIN collective_arrivals b "
      "ON b.comm = a.comm AND b.seq = a.seq AND b.rank = 0 "
      "WHERE a.name = 'MPI_Barrier' AND a.comm = 0 AND a.rank <> 0");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  std::map<int, std::vector<int64_t>> diffs;
  while (*st->Step()) diffs[static_cast<int>(st->Int(0))].push_back(std::llabs(st->Int(1)));
  ASSERT_EQ(diffs.size(), 3u);
  for (auto& [rank, d] : diffs) {
    ASSERT_GE(d.size(), 40u) << rank;
    std::sort(d.begin(), d.end());
    // Without the sync, ranks 2 and 3 would be 5 ms off. Exits from a barrier differ by the
    // time the release takes to reach each process: tens of µs, or a scheduler quantum when 4
    // busy-polling ranks share 2 cores. The lower quartile is immune to the descheduled ones.
    const int64_t q1 = d[d.size() / 4];
    EXPECT_LT(q1, clock[rank].second + 200000)
        << "rank " << rank << " (" << clock[rank].first << ", uncertainty " << clock[rank].second
        << " ns) barrier exits differ from rank 0's by " << q1 << " ns (lower quartile), "
        << d[d.size() / 2] << " ns (median)";
  }
}

}  // namespace
}  // namespace tracedb::testing
