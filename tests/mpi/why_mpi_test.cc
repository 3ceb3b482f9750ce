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

#include <cstdio>
#include <string>
#include <vector>

#include "query/open/query_db.h"
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
  const std::string out =
      RunCommand(TracedbBin() + " record --force -o " + ShellQuote(db) + " -- " + Mpirun() +
                     " -np 4 " + ShellQuote(TRACEDB_WHY_PROGRAM) + " " + args + " 2>&1",
                 &rc);
  EXPECT_EQ(rc, 0) << out;
  return db;
}

// What is wrong with the top causes of the injected steps in `db` ("" when nothing).
std::string InjectedMisses(const std::string& path) {
  auto db = query::OpenQueryDb(path);
  if (!db.ok()) return db.status().message();
  std::string misses;
  for (const Injected& d : kDelays) {
    auto st = (*db)->Prepare(
        "SELECT rank, name, cost_ns FROM root_causes WHERE step = ?1 "
        "ORDER BY cost_ns DESC LIMIT 1");
    if (!st.ok()) return st.status().message();
    st->Bind(1, d.step);
    auto row = st->Step();
    if (!row.ok() || !*row) {
      misses += "step " + std::to_string(d.step) + ": no cause; ";
      continue;
    }
    const double expect = d.ms * 1e6 * d.waiting;
    const double cost = static_cast<double>(st->Int(2));
    if (st->Int(0) != d.rank || st->Text(1) != d.phase || cost < 0.5 * expect ||
        cost > 1.5 * expect)
      misses += "step " + std::to_string(d.step) + ": rank " + std::to_string(st->Int(0)) + " " +
                std::string(st->Text(1)) + " cost " + std::to_string(st->Int(2)) + "; ";
  }
  return misses;
}

// What is wrong with the causes of the run without delays, measured against the run with
// them ("" when nothing). Few: at most two per step of those that cost a tenth of the smallest
// injected one or more; small: each under a third of the smallest injected one, all together
// under half of the injected ones. Smaller causes are not counted: a busy machine stalls ranks
// for a few ms each step, and the analysis reports such stalls, rightly (a CI run on a loaded
// machine gave 22 causes of 1.4 to 12 ms against 120 ms or more injected).
std::string QuietMisses(const std::string& quiet_path, const std::string& delayed_path) {
  auto quiet = query::OpenQueryDb(quiet_path);
  auto delayed = query::OpenQueryDb(delayed_path);
  if (!quiet.ok() || !delayed.ok()) return "cannot open the databases";
  auto smallest = (*delayed)->QueryInt(
      "SELECT min(c) FROM (SELECT max(cost_ns) AS c FROM root_causes "
      "WHERE step IN (2, 5, 8) GROUP BY step)",
      -1);
  auto injected = (*delayed)->QueryInt(
      "SELECT sum(c) FROM (SELECT max(cost_ns) AS c FROM root_causes "
      "WHERE step IN (2, 5, 8) GROUP BY step)",
      -1);
  if (!smallest.ok() || !injected.ok()) return "a query failed";
  auto n = (*quiet)->QueryInt(
      "SELECT count(*) FROM root_causes WHERE cost_ns >= " + std::to_string(*smallest / 10), -1);
  auto top = (*quiet)->QueryInt("SELECT coalesce(max(cost_ns), 0) FROM root_causes", -1);
  auto total = (*quiet)->QueryInt("SELECT coalesce(sum(cost_ns), 0) FROM root_causes", -1);
  if (!n.ok() || !top.ok() || !total.ok()) return "a query failed";
  std::string misses;
  if (*smallest <= 0) misses += "no injected cause; ";
  if (*n > 2 * kSteps) misses += std::to_string(*n) + " causes; ";
  if (*top >= *smallest / 3) misses += "top cost " + std::to_string(*top) + "; ";
  if (*total >= *injected / 2) misses += "total cost " + std::to_string(*total) + "; ";
  return misses;
}

class WhyMpi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    // The ranks share two cores with whatever else runs: a rank the kernel stalls for longer
    // than an injected delay is a real delay of its own, and outranks it. Such a run is
    // recorded again, twice at most (the load of a busy machine comes and goes; the tests below
    // then check the last run).
    delayed_ = Record(tmp_, "delayed.tdb", true);
    for (int again = 2; again <= 3; ++again) {
      const std::string misses = InjectedMisses(delayed_);
      if (misses.empty()) break;
      std::fprintf(stderr, "why_mpi_test: recording again after a noisy run (%s)\n",
                   misses.c_str());
      delayed_ = Record(tmp_, "delayed" + std::to_string(again) + ".tdb", true);
    }
    quiet_ = Record(tmp_, "quiet.tdb", false);
    for (int again = 2; again <= 3; ++again) {
      const std::string misses = QuietMisses(quiet_, delayed_);
      if (misses.empty()) break;
      std::fprintf(stderr, "why_mpi_test: recording again after a noisy run (%s)\n",
                   misses.c_str());
      quiet_ = Record(tmp_, "quiet" + std::to_string(again) + ".tdb", false);
    }
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
    EXPECT_NE(json.find("{\"step\":" + s + ",\"rank\":" + std::to_string(d.rank) + ",\"name\":\"" +
                        d.phase + "\""),
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
  const std::string misses = QuietMisses(quiet_, delayed_);
  int rc = 0;
  EXPECT_EQ(misses, "") << RunCommand(TracedbBin() + " explain " + ShellQuote(quiet_), &rc);
}

}  // namespace
}  // namespace tracedb::testing
