// The CLI end to end: `tracedb shell` read from a pipe (dot-commands, statements over several
// lines, errors), `tracedb compact --watch` following a live job to its end, and the Horovod
// "who negotiated last" view over imported timelines.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "query/open/query_db.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;

std::string MakeDb(TempDir& tmp) {
  int rc = 0;
  std::string out = RunCommand(
      std::string(TRACEDB_WORKLOAD_PATH) + " " + ShellQuote(tmp.Sub("trace")) + " 1 200 0 2>&1",
      &rc);
  EXPECT_EQ(rc, 0) << out;
  const std::string db = tmp.Sub("job.tdb");
  out = RunCommand(TracedbBin() + " compact " + ShellQuote(tmp.Sub("trace")) + " -o " +
                       ShellQuote(db) + " -q 2>&1",
                   &rc);
  EXPECT_EQ(rc, 0) << out;
  return db;
}

// A piped script whose last statement has no ';' still runs it (as sqlite3 does); a trailing
// comment alone runs nothing and is no error.
TEST(Shell, RunsAFinalStatementWithoutSemicolon) {
  TempDir tmp;
  const std::string db = MakeDb(tmp);
  int rc = 0;
  auto run = [&](const std::string& script) {
    WriteFile(tmp.Sub("s.sql"), script);
    return RunCommand("cat " + ShellQuote(tmp.Sub("s.sql")) + " | " + TracedbBin() + " shell " +
                          ShellQuote(db) + " 2>&1",
                      &rc);
  };
  std::string out =
      run(".mode csv\nSELECT 1 AS a;\nSELECT count(*) AS n\nFROM events WHERE name = 'forward'");
  EXPECT_EQ(out, "a\n1\nn\n200\n");
  EXPECT_EQ(rc, 0);
  out = run(".mode csv\nSELECT 2 AS b;\n-- the end");
  EXPECT_EQ(out, "b\n2\n");
  EXPECT_EQ(rc, 0);
  out = run("SELECT no_such FROM events\n");
  EXPECT_NE(out.find("no such column: no_such"), std::string::npos) << out;
  EXPECT_EQ(rc, 1);
}

// .mode json prints exact numbers, and null where JSON has none (infinities); CSV the same digits.
TEST(Shell, JsonAndCsvNumbersAreExact) {
  TempDir tmp;
  const std::string db = MakeDb(tmp);
  WriteFile(tmp.Sub("s.sql"),
            ".mode json\nSELECT 0.1 + 0.2 AS a, 1.0 / 3 AS b, 1e300 * 1e300 AS c, 1e6 AS d;\n"
            ".mode csv\nSELECT 0.1 + 0.2 AS a, -1e300 * 1e300 AS c;\n");
  int rc = 0;
  const std::string out = RunCommand(
      TracedbBin() + " shell " + ShellQuote(db) + " < " + ShellQuote(tmp.Sub("s.sql")) + " 2>&1",
      &rc);
  EXPECT_EQ(out,
            "[\n{\"a\": 0.30000000000000004, \"b\": 0.3333333333333333, \"c\": null, "
            "\"d\": 1000000}\n]\na,c\n0.30000000000000004,-inf\n");
  EXPECT_EQ(rc, 0);
}

TEST(Shell, ReadsStatementsDotCommandsAndReportsErrors) {
  TempDir tmp;
  const std::string db = MakeDb(tmp);
  WriteFile(tmp.Sub("script.sql"),
            ".mode csv\n"
            "SELECT name, count(*)\n"
            "  FROM events\n"
            "  WHERE name = 'forward'\n"
            "  GROUP BY name;\n"
            ".tables\n"
            "SELECT no_such_column FROM events;\n"
            ".mode json\n"
            "SELECT 1 AS one;\n"
            ".bogus\n"
            ".quit\n"
            "SELECT 'not reached';\n");
  int rc = 0;
  const std::string out = RunCommand(TracedbBin() + " shell " + ShellQuote(db) + " < " +
                                         ShellQuote(tmp.Sub("script.sql")) + " 2>&1",
                                     &rc);
  EXPECT_NE(out.find("name,count(*)\nforward,200\n"), std::string::npos) << out;
  EXPECT_NE(out.find("span_stats"), std::string::npos) << out;  // .tables lists the views
  EXPECT_NE(out.find("events,virtual table"), std::string::npos) << out;
  EXPECT_NE(out.find("no such column: no_such_column"), std::string::npos) << out;
  EXPECT_NE(out.find("[\n{\"one\": 1}\n]"), std::string::npos) << out;
  EXPECT_NE(out.find("unknown command .bogus"), std::string::npos) << out;
  EXPECT_EQ(out.find("not reached"), std::string::npos) << out;
  EXPECT_EQ(rc, 1);  // a statement failed (scripts report it in the exit code)
}

TEST(Compact, WatchFollowsALiveJobToItsEnd) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  const std::string db = tmp.Sub("watch.tdb");
  int watch_rc = -1;
  std::string watch_out;
  // The watcher starts before the job has written anything and stops by itself once every file
  // is closed.
  std::thread watcher([&] {
    watch_out = RunCommand(TracedbBin() + " compact " + ShellQuote(tmp.path()) + "/trace -o " +
                               ShellQuote(db) + " --watch --interval 0.1 2>&1",
                           &watch_rc);
  });
  fs::create_directories(trace);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int rc = 0;
  const std::string job =
      RunCommand("TRACEDB_FLUSH_MS=20 WORKLOAD_PAUSE_MS=50 " + std::string(TRACEDB_WORKLOAD_PATH) +
                     " " + ShellQuote(trace) + " 2 8000 0 2>&1",
                 &rc);
  ASSERT_EQ(rc, 0) << job;
  watcher.join();
  EXPECT_EQ(watch_rc, 0) << watch_out;
  EXPECT_NE(watch_out.find("watch ended"), std::string::npos) << watch_out;
  auto q = query::OpenQueryDb(db);
  ASSERT_TRUE(q.ok());
  auto n = (*q)->QueryInt("SELECT count(*) FROM events", -1);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2 * 8000 * 6);
}

TEST(Views, HorovodNegotiationsNameTheLastRank) {
  TempDir tmp;
  const std::string db = tmp.Sub("hvd.tdb");
  int rc = 0;
  const std::string out = RunCommand(
      TracedbBin() + " import " +
          ShellQuote(SourceRoot() + "/fixtures/import/horovod/old_framing/input/timeline.json") +
          " -o " + ShellQuote(db) + " 2>&1",
      &rc);
  ASSERT_EQ(rc, 0) << out;
  auto q = query::OpenQueryDb(db);
  ASSERT_TRUE(q.ok());
  auto st = (*q)->Prepare(
      "SELECT name, last_rank, last_ready_after_ns FROM negotiations ORDER BY ts LIMIT 2");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ASSERT_TRUE(*st->Step());
  EXPECT_EQ(st->Text(0), "NEGOTIATE_ALLREDUCE");
  EXPECT_EQ(st->Int(1), 0);     // ticks of ranks 1 (at 1002 µs) then 0 (at 1004 µs)
  EXPECT_EQ(st->Int(2), 3000);  // 3 µs after the negotiation began
  ASSERT_TRUE(*st->Step());
  EXPECT_EQ(st->Text(0), "NEGOTIATE_BROADCAST");
  EXPECT_EQ(st->Int(1), 0);
}

TEST(Views, RealHorovodTimelineAnswersWhoNegotiatedLast) {
  const std::string file =
      SharedFixturePath("horovod/andrewor14_horovod_timeline_mpi_allreduce.json");
  if (file.empty()) GTEST_SKIP() << "no shared fixtures at " << SharedFixtures();
  TempDir tmp;
  const std::string db = tmp.Sub("hvd.tdb");
  int rc = 0;
  const std::string out = RunCommand(
      TracedbBin() + " import " + ShellQuote(file) + " -o " + ShellQuote(db) + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  auto q = query::OpenQueryDb(db);
  ASSERT_TRUE(q.ok());
  // Every negotiation with ticks gets a last rank among the job's 12.
  auto with_ticks =
      (*q)->QueryInt("SELECT count(DISTINCT parent) FROM events WHERE name = 'RANK_READY'", -1);
  auto rows = (*q)->QueryInt("SELECT count(*) FROM negotiations", -1);
  auto bad = (*q)->QueryInt(
      "SELECT count(*) FROM negotiations WHERE last_rank NOT BETWEEN 0 AND 11 OR "
      "name NOT LIKE 'NEGOTIATE_%'",
      -1);
  ASSERT_TRUE(with_ticks.ok() && rows.ok() && bad.ok());
  EXPECT_GT(*rows, 600);
  EXPECT_EQ(*rows, *with_ticks);
  EXPECT_EQ(*bad, 0);
}

}  // namespace
}  // namespace tracedb::testing
