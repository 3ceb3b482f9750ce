// Known-answer tests of the why analyses (query/analysis/why.h, docs/why.md) on a real MPI job:
// tests/mpi/why_program.cc under `tracedb record -- mpirun -np 4`, with delays injected at
// known (step, rank, phase):
//   step 2, rank 2, backward +60 ms  the others wait in MPI_Allreduce (wait at N x N)
//   step 5, rank 1, pack     +40 ms  rank 2 waits in MPI_Recv (late sender), and the lateness
//                                    reaches ranks 0 and 3 at the barrier after the exchange
//   step 8, rank 0, load     +50 ms  ranks 1-3 wait in MPI_Bcast for the root (late broadcast)
// Each injected delay must be the top root cause of its step, with a cost within +-50% of the
// delay times the 3 ranks that end up waiting for it, and `tracedb explain` must say so. The
// same job without delays gives few causes, each far smaller than the injected ones (no
// absolute time bound: the run with delays is the yardstick).
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "query/query_db.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

std::string Mpirun() {
  std::string cmd = std::string(TRACEDB_MPIEXEC) + " --oversubscribe";
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd;
}

struct Injected {
  int step, rank;
  const char* phase;
  int ms;
  int waiting;  // ranks that wait for it (in wait-state patterns)
};
constexpr Injected kDelays[] = {
    {2, 2, "backward", 60, 3}, {5, 1, "pack", 40, 3}, {8, 0, "load", 50, 3}};
constexpr int kSteps = 10;

std::string Record(TempDir* tmp, const std::string& name, bool with_delays) {
  const std::string db = tmp->Sub(name);
  std::string args = std::to_string(kSteps);
  if (with_delays)
    for (const Injected& d : kDelays)
      args += " " + std::to_string(d.step) + ":" + std::to_string(d.rank) + ":" + d.phase + ":" +
              std::to_string(d.ms);
  int rc = 0;
  const std::string out = RunCommand(TracedbBin() + " record --force -o " + ShellQuote(db) +
                                         " -- " + Mpirun() + " -np 4 " +
                                         ShellQuote(TRACEDB_WHY_PROGRAM) + " " + args + " 2>&1",
                                     &rc);
  EXPECT_EQ(rc, 0) << out;
  return db;
}

class WhyMpi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    delayed_ = Record(tmp_, "delayed.tdb", true);
    quiet_ = Record(tmp_, "quiet.tdb", false);
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  static TempDir* tmp_;
  static std::string delayed_, quiet_;
};
TempDir* WhyMpi::tmp_ = nullptr;
std::string WhyMpi::delayed_, WhyMpi::quiet_;

TEST_F(WhyMpi, EachInjectedDelayIsTheTopCauseOfItsStep) {
  auto db = query::OpenQueryDb(delayed_);
  ASSERT_TRUE(db.ok()) << db.status().message();
  for (const Injected& d : kDelays) {
    SCOPED_TRACE("step " + std::to_string(d.step));
    auto st = (*db)->Prepare(
        "SELECT rank, name, cost_ns FROM root_causes WHERE step = ?1 "
        "ORDER BY cost_ns DESC LIMIT 1");
    ASSERT_TRUE(st.ok()) << st.status().message();
    st->Bind(1, d.step);
    auto row = st->Step();
    ASSERT_TRUE(row.ok()) << row.status().message();
    ASSERT_TRUE(*row) << "no cause reported";
    EXPECT_EQ(st->Int(0), d.rank);
    EXPECT_EQ(std::string(st->Text(1)), d.phase);
    const double expect = d.ms * 1e6 * d.waiting;
    EXPECT_GE(static_cast<double>(st->Int(2)), 0.5 * expect);
    EXPECT_LE(static_cast<double>(st->Int(2)), 1.5 * expect);
  }
  // The patterns each injection produces are there, on the injected steps.
  auto count = [&](const std::string& where) {
    auto n = (*db)->QueryInt("SELECT count(*) FROM wait_states WHERE " + where, -1);
    return n.ok() ? *n : -1;
  };
  EXPECT_EQ(count("step = 2 AND pattern = 'wait_at_nxn' AND waited_for = 2 AND "
                  "call = 'MPI_Allreduce' AND wait_ns > 30000000"),
            3);
  EXPECT_EQ(count("step = 5 AND pattern = 'late_sender' AND rank = 2 AND waited_for = 1 AND "
                  "wait_ns > 20000000"),
            1);
  EXPECT_EQ(count("step = 8 AND pattern = 'late_broadcast' AND waited_for = 0 AND "
                  "wait_ns > 25000000"),
            3);
}

TEST_F(WhyMpi, ExplainSaysItInWords) {
  for (const Injected& d : kDelays) {
    int rc = 0;
    const std::string s = std::to_string(d.step);
    const std::string json = RunCommand(TracedbBin() + " explain " + ShellQuote(delayed_) +
                                            " --steps " + s + ":" + s + " -n 1 -f json",
                                        &rc);
    ASSERT_EQ(rc, 0) << json;
    EXPECT_NE(json.find("{\"step\":" + s + ",\"rank\":" + std::to_string(d.rank) +
                        ",\"name\":\"" + d.phase + "\""),
              std::string::npos)
        << json;
  }
  int rc = 0;
  const std::string text = RunCommand(TracedbBin() + " explain " + ShellQuote(delayed_), &rc);
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("step 2: rank 2 spent "), std::string::npos) << text;
  EXPECT_NE(text.find("more in backward than the median rank; ranks 0, 1, 3 waited "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("in MPI_Allreduce for it"), std::string::npos) << text;
  for (const char* p : {"wait_at_nxn", "late_sender", "late_broadcast"})
    EXPECT_NE(text.find(p), std::string::npos) << text;
}

TEST_F(WhyMpi, NoInjectedDelayGivesFewSmallCauses) {
  auto quiet = query::OpenQueryDb(quiet_);
  ASSERT_TRUE(quiet.ok()) << quiet.status().message();
  auto delayed = query::OpenQueryDb(delayed_);
  ASSERT_TRUE(delayed.ok()) << delayed.status().message();
  auto smallest = (*delayed)->QueryInt(
      "SELECT min(c) FROM (SELECT max(cost_ns) AS c FROM root_causes "
      "WHERE step IN (2, 5, 8) GROUP BY step)",
      -1);
  ASSERT_TRUE(smallest.ok());
  ASSERT_GT(*smallest, 0);
  auto n = (*quiet)->QueryInt("SELECT count(*) FROM root_causes", -1);
  auto top = (*quiet)->QueryInt("SELECT coalesce(max(cost_ns), 0) FROM root_causes", -1);
  ASSERT_TRUE(n.ok() && top.ok());
  // Few: under one per step on average; small: each under a third of the smallest injected.
  EXPECT_LE(*n, kSteps) << "causes reported without any delay";
  EXPECT_LT(*top, *smallest / 3);
}

}  // namespace
}  // namespace tracedb::testing
