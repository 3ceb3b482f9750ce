// Compaction end to end: clocks recovered within their stored uncertainty; incremental runs
// (on a live job) equal one run; a compaction killed at any moment resumes to the same rows;
// damaged segments are skipped and counted, never a crash; exact counts and top-n against what
// the recording processes emitted. A span open in a live process stays pending and closes when
// its end comes; only a process that is over has its spans written open.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "engine/db/sqlite.h"
#include "engine/segment/segment_dir.h"
#include "query/open/query_db.h"
#include "tests/db_invariants.h"
#include "tests/segment_fixture.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;

std::string Workload() {
#ifdef TRACEDB_WORKLOAD_PATH
  return TRACEDB_WORKLOAD_PATH;
#else
  return "workload_program";
#endif
}

// Runs `tracedb compact`; returns its exit code.
int Compact(const std::string& trace, const std::string& db, const std::string& flags = "") {
  int rc = 0;
  const std::string out = RunCommand(TracedbBin() + " compact " + ShellQuote(trace) + " -o " +
                                         ShellQuote(db) + " -q " + flags + " 2>&1",
                                     &rc);
  if (rc != 0) ADD_FAILURE() << out;
  return rc;
}

// Every row of `db` as text, in a canonical order.
std::string Dump(const std::string& db) {
  auto q = query::OpenQueryDb(db);
  if (!q.ok()) return q.status().ToString();
  auto st = (*q)->Prepare(
      "SELECT id, rank, tid, track_name, name, cat, kind, ts, dur, depth, parent, bytes, peer, "
      "seq, value FROM events ORDER BY id");
  if (!st.ok()) return st.status().ToString();
  std::string out;
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) return row.status().ToString();
    if (!*row) break;
    for (int i = 0; i < st->ColumnCount(); ++i) {
      out += st->IsNull(i) ? "NULL" : std::string(st->Text(i));
      out += i + 1 < st->ColumnCount() ? "|" : "\n";
    }
  }
  return out;
}

// The first line where two dumps differ, both ways ("" when they are equal): a failure then
// says which rows, not only that some do.
std::string FirstDifference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string l, m;
  for (size_t line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(x, l));
    const bool more_b = static_cast<bool>(std::getline(y, m));
    if (!more_a && !more_b) return "";
    if (!more_a || !more_b || l != m) {
      return "line " + std::to_string(line) + ": \"" + (more_a ? l : "(end)") + "\" against \"" +
             (more_b ? m : "(end)") + "\"";
    }
  }
}

int64_t QueryInt(const std::string& db, const std::string& sql) {
  auto q = query::OpenQueryDb(db);
  if (!q.ok()) {
    ADD_FAILURE() << q.status().ToString();
    return -1;
  }
  auto v = (*q)->QueryInt(sql, -1);
  if (!v.ok()) {
    ADD_FAILURE() << v.status().ToString();
    return -1;
  }
  return *v;
}

struct Expected {
  uint64_t rows = 0;
  std::vector<std::pair<uint64_t, int64_t>> top;  // (seq, dur)
};

Expected ParseWorkload(const std::string& out) {
  Expected e;
  std::istringstream in(out);
  std::string word;
  while (in >> word) {
    if (word == "rows") {
      in >> e.rows;
    } else if (word == "top") {
      uint64_t seq;
      int64_t dur;
      in >> seq >> dur;
      e.top.emplace_back(seq, dur);
    }
  }
  return e;
}

Expected RunWorkload(const std::string& dir, int threads, int spans, int rank,
                     const std::string& env = "") {
  int rc = 0;
  const std::string out = RunCommand(
      env + " " + ShellQuote(Workload()) + " " + ShellQuote(dir) + " " + std::to_string(threads) +
          " " + std::to_string(spans) + " " + std::to_string(rank) + " 2>&1",
      &rc);
  EXPECT_EQ(rc, 0) << out;
  return ParseWorkload(out);
}

TEST(Compaction, CountsAndTopNEqualWhatWasEmitted) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  uint64_t rows = 0;
  std::vector<std::pair<uint64_t, int64_t>> top;
  for (int rank = 0; rank < 3; ++rank) {
    Expected e = RunWorkload(trace, 2, 3000, rank);
    rows += e.rows;
    for (auto& t : e.top)
      top.emplace_back(t.first + static_cast<uint64_t>(rank) * 100000000, t.second);
  }
  const std::string db = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(trace, db), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events"), static_cast<int64_t>(rows));
  EXPECT_EQ(QueryInt(db,
                     "SELECT count(*) FROM events WHERE name = 'COMMUNICATE' AND lane "
                     "LIKE 'tensor.%' AND bytes > 0 AND peer IS NOT NULL"),
            3 * 2 * 3000);
  // The 10 longest "allreduce" over all ranks have the 10 longest emitted durations (equal up
  // to the clock-rate correction of a few ppm), and each is the event its serial names.
  std::sort(top.begin(), top.end(), [](auto& a, auto& b) { return a.second > b.second; });
  top.resize(10);
  auto q = query::OpenQueryDb(db);
  ASSERT_TRUE(q.ok());
  auto st = (*q)->Prepare(
      "SELECT rank, seq, dur FROM events WHERE name = 'allreduce' ORDER BY dur DESC LIMIT 10");
  ASSERT_TRUE(st.ok());
  for (size_t i = 0; i < 10; ++i) {
    auto row = st->Step();
    ASSERT_TRUE(row.ok() && *row) << i;
    const auto serial = static_cast<uint64_t>(st->Int(1));
    const double emitted = 1000.0 * (1 + static_cast<double>((serial * 7919) % 20000));
    const double got = static_cast<double>(st->Int(2));
    EXPECT_NEAR(got, emitted, emitted * 20e-6 + 2) << i;
    EXPECT_NEAR(got, static_cast<double>(top[i].second), top[i].second * 20e-6 + 2) << i;
  }
  auto more = st->Step();
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(*more);
  int rc = 0;
  EXPECT_EQ(RunCommand("sqlite3 " + ShellQuote(db) + " 'PRAGMA integrity_check'", &rc), "ok\n");
  ExpectDbInvariants(db);
}

TEST(Compaction, IncrementalOnALiveJobEqualsOneRun) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  const std::string inc = tmp.Sub("inc.tdb");
  // The workload flushes every 20 ms and rotates files every MB while we compact behind it; it
  // lasts about a second and a half (20 pauses of 60 ms per thread).
  std::thread job([&] {
    RunWorkload(trace, 2, 20000, 0,
                "TRACEDB_FLUSH_MS=20 TRACEDB_SEGMENT_MB=1 WORKLOAD_PAUSE_MS=60");
  });
  int passes = 0;
  for (int i = 0; i < 200 && !fs::exists(trace); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    job.join();
    done.store(true);
  });
  while (!done.load()) {
    int rc = 0;
    RunCommand(
        TracedbBin() + " compact " + ShellQuote(trace) + " -o " + ShellQuote(inc) + " -q 2>&1",
        &rc);
    passes += rc == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  waiter.join();
  ASSERT_EQ(Compact(trace, inc), 0);  // every file is closed now: this takes the rest
  const std::string one = tmp.Sub("one.tdb");
  ASSERT_EQ(Compact(trace, one), 0);
  EXPECT_GE(passes, 3);
  const std::string a = Dump(inc), b = Dump(one);
  EXPECT_EQ(QueryInt(one, "SELECT count(*) FROM events"), 2 * 20000 * 6);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_TRUE(a == b) << "incremental and one-shot compaction differ: " << FirstDifference(a, b)
                      << "; incremental " << QueryInt(inc, "SELECT count(*) FROM events")
                      << " events in " << QueryInt(inc, "SELECT count(*) FROM blocks")
                      << " blocks, one-shot " << QueryInt(one, "SELECT count(*) FROM blocks")
                      << " blocks";
  EXPECT_EQ(QueryInt(inc, "SELECT value FROM meta WHERE key = 'open_spans'"), 0);
  ExpectDbInvariants(inc);
  ExpectDbInvariants(one);
}

TEST(Compaction, KilledAtAnyMomentResumesToTheSameRows) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  for (int rank = 0; rank < 2; ++rank) {
    RunWorkload(trace, 2, 25000, rank, "TRACEDB_SEGMENT_MB=1");
  }
  const std::string one = tmp.Sub("one.tdb");
  ASSERT_EQ(Compact(trace, one), 0);
  const std::string reference = Dump(one);
  ASSERT_FALSE(reference.empty());

  const std::string db = tmp.Sub("killed.tdb");
  std::mt19937 rng(12345);
  int kills = 0;
  for (int attempt = 0; attempt < 40; ++attempt) {
    const std::string bin = TracedbBin();
    const pid_t pid = SpawnChild({bin, "compact", trace, "-o", db, "-q"}, {});
    ASSERT_GT(pid, 0) << bin << ": could not be started";
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 60));
    const bool killed = kill(pid, SIGKILL) == 0;
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
      ++kills;
    } else {
      ASSERT_TRUE(WIFEXITED(status)) << "attempt " << attempt;
      ASSERT_EQ(WEXITSTATUS(status), 0) << "attempt " << attempt;
      if (!killed || attempt > 5) break;  // finished before the kill: all done
    }
    // Whatever the moment of the kill, the database is valid.
    int rc = 0;
    if (fs::exists(db)) {
      EXPECT_EQ(RunCommand("sqlite3 " + ShellQuote(db) + " 'PRAGMA integrity_check'", &rc), "ok\n")
          << "attempt " << attempt;
    }
  }
  EXPECT_GE(kills, 1);
  ASSERT_EQ(Compact(trace, db), 0);
  EXPECT_TRUE(Dump(db) == reference) << "resumed compaction differs from one run";
}

TEST(Compaction, DamagedSegmentsAreSkippedAndCounted) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  Expected e = RunWorkload(trace, 1, 100000, 0, "TRACEDB_SEGMENT_MB=1");
  auto files = engine::ListSegmentFiles(trace);
  ASSERT_TRUE(files.ok());
  ASSERT_GE(files->size(), 2u);
  // Flip bytes in the middle of the first file and cut the last file's tail.
  {
    std::string bytes = ReadFile(files->front().path);
    for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; i += 16) bytes[i] ^= 0x5a;
    WriteFile(files->front().path, bytes);
    std::string last = ReadFile(files->back().path);
    last.resize(last.size() - 100);
    WriteFile(files->back().path, last);
  }
  // And a file that is not a segment at all.
  WriteFile(trace + "/rank-0/seg-1-000000.tds", "this is not a segment file");
  const std::string db = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(trace, db, "--finish"), 0);
  const int64_t rows = QueryInt(db, "SELECT count(*) FROM events");
  EXPECT_GT(rows, 0);
  EXPECT_LT(rows, static_cast<int64_t>(e.rows));
  EXPECT_GE(QueryInt(db, "SELECT sum(value) FROM stats WHERE name = 'corrupt_blocks'"), 1);
  EXPECT_EQ(QueryInt(db, "SELECT sum(value) FROM stats WHERE name = 'torn_tails'"), 1);
  EXPECT_EQ(QueryInt(db, "SELECT sum(value) FROM stats WHERE name = 'unreadable_files'"), 1);
  int rc = 0;
  const std::string info = RunCommand(TracedbBin() + " info " + ShellQuote(db) + " --json", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(info.find("\"corrupt_blocks\": "), std::string::npos) << info;
}

// Segments made elsewhere, with times at both ends of int64: events and steps at INT64_MIN and
// INT64_MAX, a span of INT64_MAX ns, anchors and a clock sync whose correction would move them
// past int64. Compaction must end with a DB or a described error (under ASan+UBSan, where
// scripts/test.sh runs this, an overflow aborts the compaction), and what it stores must be
// readable by the query layer.
TEST(Compaction, SegmentsWithTimesAtTheInt64ExtremesCompact) {
  TempDir tmp;
  const std::string spec = R"(
file trace 0 100 0 host=node0 world=2
anchor 1000000000000 0
anchor 9223372036854775807 9223372036854775000
string 1 MPI_Allreduce
string 2 forward
thread 1 10 main
events 1
S -9223372036854775808 1
I -9223372036854775808 2
X -9000000000000000000 10 1 comm=1 seq=1
X 0 9223372036854775807 2
X 9000000000000000000 10 1 comm=1 seq=2
S 9223372036854775807 2
I 9223372036854775807 2
end
file trace 1 200 0 host=node1 world=2
anchor -9223372036854775808 0
sync 0 0 9223372036854775807 1
sync 0 9223372036854775807 -9223372036854775808 1
string 1 MPI_Allreduce
thread 1 20 main
events 1
X -9223372036854775808 9223372036854775807 1 comm=1 seq=1
X 9223372036854775000 807 1 comm=1 seq=2
end
)";
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), spec).ok());
  const std::string db = tmp.Sub("job.tdb");
  int rc = -1;
  const std::string out = RunCommand(TracedbBin() + " compact " + ShellQuote(tmp.Sub("trace")) +
                                         " -o " + ShellQuote(db) + " --finish -q 2>&1",
                                     &rc);
  ASSERT_TRUE(rc == 0 || rc == 1) << "exit " << rc << ":\n" << out;
  EXPECT_EQ(out.find("runtime error"), std::string::npos) << out;
  if (rc != 0) return;  // refused, with a message
  // Nothing lost: the 7 events are stored (the S lines are steps), every end at or after its
  // start (ends clamp at the int64 maximum), and both steps of rank 0.
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events"), 7);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events WHERE end_ts < ts OR dur < 0"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM steps WHERE rank = 0"), 2);
  for (const char* sql : {"SELECT count(*) FROM (SELECT * FROM events ORDER BY end_ts)",
                          "SELECT count(*) FROM collectives", "SELECT count(*) FROM step_times",
                          "SELECT count(*) FROM clock_alignment"}) {
    const std::string q = RunCommand(
        TracedbBin() + " query " + ShellQuote(db) + " " + ShellQuote(sql) + " 2>&1", &rc);
    EXPECT_TRUE(rc == 0 || rc == 1) << sql << ": exit " << rc << ":\n" << q;
    EXPECT_EQ(q.find("runtime error"), std::string::npos) << q;
  }
}

// A shard's listing reads only its own ranks' directories (a job of 10,000 ranks in 1,250 node
// shards listed every rank's files once per shard: 12.5M directory reads); the filtered listing
// is the plain one filtered, and a filter that accepts no listed rank gives the plain listing.
TEST(Compaction, ListingOfSomeRanksIsThePlainListingFiltered) {
  TempDir tmp;
  for (int r = 0; r < 6; ++r) {
    const std::string dir = tmp.Sub("trace/rank-" + std::to_string(r));
    std::filesystem::create_directories(dir);
    for (int seq = 0; seq <= r % 3; ++seq) {
      WriteFile(dir + "/seg-" + std::to_string(100 + r) + "-00000" + std::to_string(seq) + ".tds",
                std::string(10 + r, 'x'));
    }
  }
  auto all = engine::ListSegmentFiles(tmp.Sub("trace"));
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 12u);
  auto keep = [](int32_t rank) { return rank == 0 || rank == 4 || rank == 5; };
  auto some = engine::ListSegmentFiles(tmp.Sub("trace"), keep);
  ASSERT_TRUE(some.ok()) << some.status().message();
  std::vector<std::string> expected, got;
  for (const auto& f : *all) {
    if (keep(f.rank)) expected.push_back(std::to_string(f.rank) + " " + f.path);
  }
  for (const auto& f : *some) got.push_back(std::to_string(f.rank) + " " + f.path);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(expected.size(), 6u);
  auto none = engine::ListSegmentFiles(tmp.Sub("trace"), [](int32_t) { return false; });
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->size(), all->size());
}

TEST(Compaction, ClearErrorsOnBadInput) {
  TempDir tmp;
  int rc = 0;
  std::string out = RunCommand(TracedbBin() + " compact " + ShellQuote(tmp.path()) + " -o " +
                                   ShellQuote(tmp.Sub("x.tdb")) + " 2>&1",
                               &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("no segment files"), std::string::npos) << out;
  WriteFile(tmp.Sub("not.tdb"), std::string(5000, 'x'));
  out = RunCommand(TracedbBin() + " query " + ShellQuote(tmp.Sub("not.tdb")) + " 'select 1' 2>&1",
                   &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("not.tdb"), std::string::npos) << out;
  out = RunCommand(
      TracedbBin() + " query " + ShellQuote(tmp.Sub("missing.tdb")) + " 'select 1' 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("no such database"), std::string::npos) << out;
}

// Ranks on three hosts with recorder clocks of different offsets and rates and hosts whose
// realtime clocks disagree: with MPI sync points, every event lands on the common clock (rank
// 0's recorder clock, offset to realtime at its first anchor) within the uncertainty stored for
// its rank, and rank 0's durations are exactly what it recorded (see the test below).
// A compact that fails leaves no database when there was none, and an existing one unchanged
// (byte for byte).
TEST(Compaction, AFailedCompactLeavesNoFileOrTheOldDbUnchanged) {
  TempDir tmp;
  const std::string empty = tmp.Sub("empty");
  fs::create_directories(empty + "/rank-0");
  int rc = 0;
  const std::string db = tmp.Sub("new.tdb");
  std::string out = RunCommand(
      TracedbBin() + " compact " + ShellQuote(empty) + " -o " + ShellQuote(db) + " 2>&1", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("no segment files"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(db));
  EXPECT_FALSE(fs::exists(db + "-journal"));

  // An existing database, then a compact of nothing into it.
  const std::string trace = tmp.Sub("trace");
  RunWorkload(trace, 1, 200, 0);
  const std::string old = tmp.Sub("old.tdb");
  ASSERT_EQ(Compact(trace, old), 0);
  const std::string before = ReadFile(old);
  ASSERT_FALSE(before.empty());
  out = RunCommand(
      TracedbBin() + " compact " + ShellQuote(empty) + " -o " + ShellQuote(old) + " 2>&1", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(ReadFile(old) == before) << "the old database changed";

  // An output that is not a database: a clear error, and the file is not ours to remove.
  const std::string junk = tmp.Sub("junk.tdb");
  WriteFile(junk, std::string(5000, 'x'));
  out = RunCommand(
      TracedbBin() + " compact " + ShellQuote(trace) + " -o " + ShellQuote(junk) + " 2>&1", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("junk.tdb"), std::string::npos) << out;
  EXPECT_EQ(ReadFile(junk), std::string(5000, 'x'));

  // --watch stopped before the job wrote anything leaves nothing either.
  const std::string watched = tmp.Sub("watched.tdb");
  out = RunCommand("timeout --preserve-status -s INT 1 " + TracedbBin() +
                       " compact --watch --interval 0.1 " + ShellQuote(empty) + " -o " +
                       ShellQuote(watched) + " 2>&1",
                   &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_FALSE(fs::exists(watched));
}

TEST(Compaction, KnownClockOffsetsLandWithinTheStoredUncertainty) {
  TempDir tmp;
  const int64_t T0 = 1700000000000000000;  // true time of the job start, ns
  struct Host {
    std::string name;
    int64_t realtime_offset;  // realtime = true + offset + drift * (t - T0)
    double realtime_drift;
  };
  struct RankClock {
    int rank;
    Host host;
    int64_t offset;  // local = (t - T0) * (1 + rate) + offset
    double rate;
    bool sync;
  };
  const Host a{"hostA", 0, 0}, b{"hostB", 3000000, 2e-6}, c{"hostC", -1500000, 0};
  const std::vector<RankClock> ranks = {{0, a, 1000000000, 3e-6, true},
                                        {1, b, 7000000000, 50e-6, true},
                                        {2, a, 2000000000, -20e-6, true},
                                        {3, c, 9000000000, 10e-6, false}};
  auto local_of = [](const RankClock& r, int64_t t) {
    return static_cast<int64_t>(std::llround((t - 1700000000000000000) * (1 + r.rate))) + r.offset;
  };
  auto realtime_of = [](const Host& h, int64_t t) {
    return t + h.realtime_offset +
           static_cast<int64_t>(std::llround((t - 1700000000000000000) * h.realtime_drift));
  };
  const int64_t kSyncErr = 700;  // the sync measurement is off by this much (within its bound)
  std::string spec;
  for (const RankClock& r : ranks) {
    spec += "file trace " + std::to_string(r.rank) + " " + std::to_string(100 + r.rank) +
            " 0 host=" + r.host.name + " world=4\n";
    spec += "string 1 work\nthread 1 " + std::to_string(1000 + r.rank) + " main\n";
    for (int s = 0; s <= 20; ++s) {  // an anchor every second for 20 s
      const int64_t t = T0 + int64_t{s} * 1000000000;
      spec += "anchor " + std::to_string(realtime_of(r.host, t)) + " " +
              std::to_string(local_of(r, t)) + " unc=50\n";
    }
    if (r.sync && r.rank != 0) {
      for (int64_t t : {T0 + 100000000, T0 + 19900000000}) {  // at MPI_Init and MPI_Finalize
        const int64_t off = local_of(ranks[0], t) - local_of(r, t) + kSyncErr;
        spec += "sync 0 " + std::to_string(local_of(r, t)) + " " + std::to_string(off) + " 2000\n";
      }
    }
    spec += "events 1\n";
    for (int e = 0; e < 40; ++e) {
      const int64_t t = T0 + 200000000 + int64_t{e} * 490000000;
      spec += "X " + std::to_string(local_of(r, t)) + " 1000000 1\n";
    }
    spec += "end\n";
  }
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), spec).ok());
  const std::string db = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(tmp.Sub("trace"), db), 0);
  auto q = query::OpenQueryDb(db);
  ASSERT_TRUE(q.ok());
  std::map<int, std::pair<std::string, int64_t>> clock;  // rank -> (method, uncertainty)
  auto cs = (*q)->Prepare("SELECT rank, clock_method, uncertainty_ns FROM clock_alignment");
  ASSERT_TRUE(cs.ok());
  while (*cs->Step()) {
    clock[static_cast<int>(cs->Int(0))] = {std::string(cs->Text(1)),
                                           cs->IsNull(2) ? -1 : cs->Int(2)};
  }
  EXPECT_EQ(clock[0].first, "reference");
  EXPECT_EQ(clock[1].first, "sync");
  EXPECT_EQ(clock[2].first, "same-host");
  EXPECT_EQ(clock[3].first, "realtime");
  EXPECT_EQ(clock[3].second, -1);  // no sync: unknown across hosts
  EXPECT_EQ(clock[0].second, 0);   // the reference is the common clock
  for (int r = 1; r < 3; ++r) EXPECT_GT(clock[r].second, 0) << r;
  EXPECT_GE(clock[1].second, kSyncErr);
  // The common clock is rank 0's recorder clock, realtime only as an offset (at its first
  // anchor, true time T0): common(t) = local_0(t) - local_0(T0) + realtime_A(T0).
  auto common_of = [&](int64_t t) {
    return local_of(ranks[0], t) - local_of(ranks[0], T0) + realtime_of(a, T0);
  };

  auto st = (*q)->Prepare("SELECT rank, ts, dur FROM events ORDER BY rank, ts");
  ASSERT_TRUE(st.ok());
  std::map<int, int> seen;
  while (*st->Step()) {
    const int rank = static_cast<int>(st->Int(0));
    const int64_t t_true = T0 + 200000000 + int64_t{seen[rank]++} * 490000000;
    const int64_t expected = common_of(t_true);
    const int64_t err = std::llabs(st->Int(1) - expected);
    if (rank == 3) {
      // Without sync only the hosts' realtime agreement holds (here 1.5 ms apart).
      EXPECT_NEAR(static_cast<double>(err), 1500000.0, 2000.0) << "rank 3";
    } else {
      EXPECT_LE(err, clock[rank].second + 2) << "rank " << rank << " event " << seen[rank];
    }
    if (rank == 0) {
      // Rank 0's clock runs 3 ppm fast against realtime: its recorded durations come back
      // exactly as recorded, not rescaled by that drift (999,997 ns before).
      EXPECT_EQ(st->Int(2), 1000000) << "rank 0 event " << seen[rank];
    } else {
      // Others: their clock's rate against rank 0's removed, to the rounding of the maps (each
      // of the two composed maps, to realtime and onto rank 0's clock, floors at each end).
      const double want = 1000000.0 * (1 + ranks[0].rate) / (1 + ranks[rank].rate);
      EXPECT_NEAR(static_cast<double>(st->Int(2)), want, 4) << rank;
    }
  }
  EXPECT_EQ(seen.size(), 4u);
  ExpectDbInvariants(db);
}

// docs/database-format.md "Open spans": a span begun in a process that is still running (its
// writer holds the file's lock) is not written open by a pass without --finish; when its end
// arrives in the next file, the next pass writes it closed, once, with its true duration.
TEST(Compaction, OpenSpanOfALiveProcessClosesWhenItsEndComes) {
  TempDir tmp;
  const std::string head =
      "file trace 0 77 0 host=node0 world=1\n"
      "anchor 1000000000000 0\n"
      "string 1 fetch_batch\nstring 2 MPI_Recv\n"
      "thread 1 4242 trainer\n"
      "events 1\n"
      "B 1000 1\n"
      "B 1200 2 cat=4 peer=3\n"
      "anchor 1000000002000 2000\n";
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), head).ok());
  const std::string file0 = tmp.Sub("trace/rank-0/seg-77-000000.tds");
  const int fd = ::open(file0.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);  // the writer is alive
  const std::string db = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(tmp.Sub("trace"), db), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT value FROM meta WHERE key = 'open_spans'"), 2);

  // The process goes on in its next file: both spans end, the file is closed.
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(),
                                    "file trace 0 77 1 host=node0 world=1\n"
                                    "anchor 1000000003000 3000\n"
                                    "thread 1 4242 trainer\n"
                                    "events 1\nE 5000 2\nE 6000 1\n"
                                    "anchor 1000000007000 7000\nend\n")
                  .ok());
  ::close(fd);  // file 0's writer is gone (it moved on), its tail taken whole
  ASSERT_EQ(Compact(tmp.Sub("trace"), db), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events WHERE open = 1"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT dur FROM events WHERE name = 'fetch_batch'"), 5000);
  EXPECT_EQ(QueryInt(db, "SELECT dur FROM events WHERE name = 'MPI_Recv'"), 3800);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events"), 2);
  // --finish on the same database adds nothing: nothing is left open.
  ASSERT_EQ(Compact(tmp.Sub("trace"), db, "--finish"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events"), 2);
}

// The same live process stopped for good: `compact --finish` writes its spans open, ending at its
// last anchor, innermost nested in outermost.
TEST(Compaction, FinishWritesTheOpenSpansOfALiveProcess) {
  TempDir tmp;
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(),
                                    "file trace 0 77 0 host=node0 world=1\n"
                                    "anchor 1000000000000 0\n"
                                    "string 1 fetch_batch\nstring 2 MPI_Recv\n"
                                    "thread 1 4242 trainer\n"
                                    "events 1\nB 1000 1\nB 1200 2 cat=4 peer=3\n"
                                    "anchor 1000000009000 9000\n")
                  .ok());
  const std::string file0 = tmp.Sub("trace/rank-0/seg-77-000000.tds");
  const int fd = ::open(file0.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string db = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(tmp.Sub("trace"), db), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events"), 0);
  ASSERT_EQ(Compact(tmp.Sub("trace"), db, "--finish"), 0);
  ::close(fd);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events WHERE open = 1"), 2);
  EXPECT_EQ(QueryInt(db, "SELECT dur FROM events WHERE name = 'fetch_batch' AND depth = 0"), 8000);
  EXPECT_EQ(QueryInt(db,
                     "SELECT dur FROM events WHERE name = 'MPI_Recv' AND depth = 1 AND "
                     "parent = (SELECT id FROM events WHERE name = 'fetch_batch')"),
            7800);
  EXPECT_EQ(QueryInt(db, "SELECT value FROM meta WHERE key = 'open_spans'"), 0);
}

// A process that closed its last file but is still alive (it stopped recording and runs on: this
// test's own pid, on this host) keeps its open span pending; `compact --finish` later, with
// nothing new to read, writes it open, ending at the process's last anchor.
TEST(Compaction, FinishWritesSpansAnEarlierPassLeftPending) {
  TempDir tmp;
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof(host) - 1), 0);
  const std::string pid = std::to_string(::getpid());
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), "file trace 0 " + pid + " 0 host=" + host +
                                                    " world=1\n"
                                                    "anchor 1000000000000 0\n"
                                                    "string 1 fetch_batch\n"
                                                    "thread 1 4242 trainer\n"
                                                    "events 1\nB 1000 1\n"
                                                    "anchor 1000009000000 9000000\nend\n")
                  .ok());
  const std::string db = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(tmp.Sub("trace"), db), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT value FROM meta WHERE key = 'open_spans'"), 1);
  ASSERT_EQ(Compact(tmp.Sub("trace"), db, "--finish"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events WHERE open = 1"), 1);
  EXPECT_EQ(QueryInt(db, "SELECT dur FROM events WHERE name = 'fetch_batch'"), 9000000 - 1000);
  EXPECT_EQ(QueryInt(db, "SELECT value FROM meta WHERE key = 'open_spans'"), 0);
  ASSERT_EQ(Compact(tmp.Sub("trace"), db, "--finish"), 0);  // nothing left: nothing added
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events"), 1);
}

// STEPSTATS blocks become `step_stats` rows on the common clock, with their names resolved; a
// process whose files have none (an older recorder) compacts with no rows. The expected rows
// are the fixture's numbers moved by the offsets its anchors give (realtime - local; on one
// host the common clock is realtime), worked out by hand.
TEST(Compaction, StepStatsLandOnTheCommonClock) {
  TempDir tmp;
  const std::string spec =
      "file trace 0 100 0 host=h world=3\n"
      "string 1 forward\nstring 2 MPI_Allreduce\n"
      "anchor 1000000000000 5000\nanchor 1000001000000 1005000\n"
      "stepstat 7 6000 4000 3000 900 600 1024 12 1:3000 2:900\n"
      "stepstat 8 10000 2000 0 0 0 0 1 99:5\n"
      "end\n"
      "file trace 1 101 0 host=h world=3\n"
      "anchor 2000000000000 7000\nanchor 2000001000000 1007000\n"
      "stepstat 7 8000 1000 0 0 0 5 0\n"
      "end\n"
      "file trace 2 102 0 host=h world=3\n"
      "string 1 work\nthread 1 55 main\n"
      "anchor 3000000000000 1\nanchor 3000001000000 1000001\n"
      "events 1\nS 100 7\nX 200 50 1\n"
      "end\n";
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), spec).ok());
  const std::string db = tmp.path() + "/t.tdb";
  ASSERT_EQ(Compact(tmp.path() + "/trace", db), 0);
  auto q = query::OpenQueryDb(db);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto st = (*q)->Prepare(
      "SELECT rank, step, start_ns, end_ns, dur_ns, compute_ns, comm_ns, wait_ns, bytes, events, "
      "top_names FROM step_stats ORDER BY rank, step");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  std::string got;
  for (;;) {
    auto row = st->Step();
    ASSERT_TRUE(row.ok()) << row.status().ToString();
    if (!*row) break;
    for (int i = 0; i < st->ColumnCount(); ++i) {
      got += std::string(st->Text(i)) + (i + 1 < st->ColumnCount() ? "|" : "\n");
    }
  }
  EXPECT_EQ(got,
            "0|7|1000000001000|1000000005000|4000|3000|900|600|1024|12|"
            "[[\"forward\",3000],[\"MPI_Allreduce\",900]]\n"
            "0|8|1000000005000|1000000007000|2000|0|0|0|0|1|[[\"<unknown name 99>\",5]]\n"
            "1|7|2000000001000|2000000002000|1000|0|0|0|5|0|[]\n");
}

}  // namespace
}  // namespace tracedb::testing
