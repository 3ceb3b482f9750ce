// Nothing flushed is lost when a recording process is killed (docs/segment-format.md "Writer
// lock", docs/database-format.md "Compaction"). tests/kill_program records numbered events from
// several threads and logs, after every tracedb_flush() returns, how many each thread had
// emitted before the call. We SIGKILL it at random moments and run a plain `tracedb compact`
// (no --finish): every logged event must be in the database, by content; no event may be
// misread (each row's bytes and dur are functions of its serial); the dead writer and any torn
// tail are counted in the stats that `tracedb info` shows. While the program runs, compaction
// follows its file incrementally and waits for the rest.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "engine/db/sqlite.h"
#include "query/open/query_db.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kThreads = 3;

std::string KillProgram() {
#ifdef TRACEDB_KILL_PROGRAM_PATH
  return TRACEDB_KILL_PROGRAM_PATH;
#else
  return "kill_program";
#endif
}

// The last complete "flush N C0 C1 ..." line of the log: per-thread counts (empty if none).
std::vector<uint64_t> LastFlush(const std::string& log, uint64_t* lines) {
  const std::string text = ReadFile(log);
  std::vector<uint64_t> last;
  *lines = 0;
  size_t begin = 0;
  for (size_t nl; (nl = text.find('\n', begin)) != std::string::npos; begin = nl + 1) {
    std::istringstream in(text.substr(begin, nl - begin));
    std::string word;
    uint64_t n;
    in >> word >> n;
    if (word != "flush") continue;
    std::vector<uint64_t> counts;
    uint64_t c;
    while (in >> c) counts.push_back(c);
    if (counts.size() != kThreads) continue;
    last = counts;
    ++*lines;
  }
  return last;
}

pid_t Start(const std::string& dir, const std::string& log) {
  return SpawnChild({KillProgram(), dir, log, std::to_string(kThreads)}, {});
}

// Waits until the log holds at least `n` flush lines; false when the program exited first.
bool WaitForFlushes(pid_t pid, const std::string& log, uint64_t n) {
  for (int i = 0; i < 1000; ++i) {
    uint64_t lines = 0;
    LastFlush(log, &lines);
    if (lines >= n) return true;
    int st;
    if (::waitpid(pid, &st, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void Kill(pid_t pid) {
  ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
}

// Runs `tracedb compact` without flags; returns its stderr (the summary).
std::string Compact(const std::string& trace, const std::string& db) {
  int rc = 0;
  const std::string out = RunCommand(
      TracedbBin() + " compact " + ShellQuote(trace) + " -o " + ShellQuote(db) + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  return out;
}

int64_t Stat(engine::Db* q, const std::string& name) {
  auto v = q->QueryInt("SELECT coalesce(sum(value), 0) FROM stats WHERE name = '" + name + "'", -1);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : -1;
}

struct Check {
  uint64_t rows = 0;
  uint64_t promised = 0;  // events the log promises
  int64_t dropped = 0;
  int64_t torn_tails = 0;
  int64_t dead_writers = 0;
};

// Compares the "work" rows of `db` with the log's promise `flushed` (per-thread counts).
Check Verify(const std::string& db, const std::vector<uint64_t>& flushed) {
  Check c;
  auto q = query::OpenQueryDb(db);
  if (!q.ok()) {
    ADD_FAILURE() << q.status().ToString();
    return c;
  }
  auto st = (*q)->Prepare("SELECT seq, bytes, dur FROM events WHERE name = 'work'");
  if (!st.ok()) {
    ADD_FAILURE() << st.status().ToString();
    return c;
  }
  std::vector<std::set<uint64_t>> seen(kThreads);
  uint64_t misread = 0, duplicates = 0;
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) {
      ADD_FAILURE() << row.status().ToString();
      return c;
    }
    if (!*row) break;
    ++c.rows;
    const auto seq = static_cast<uint64_t>(st->Int(0));
    const uint64_t thread = seq >> 32, i = seq & 0xffffffffu;
    // dur is mapped through the clock model (a rate within a few ppm of 1).
    const int64_t want_dur = 1000 + static_cast<int64_t>(i % 977);
    if (thread >= kThreads || static_cast<uint64_t>(st->Int(1)) != 7 * i + thread ||
        std::llabs(st->Int(2) - want_dur) > 1) {
      if (++misread <= 5) {
        ADD_FAILURE() << "misread row: seq " << seq << " bytes " << st->Int(1) << " dur "
                      << st->Int(2);
      }
      continue;
    }
    if (!seen[thread].insert(i).second) ++duplicates;
  }
  EXPECT_EQ(misread, 0u);
  EXPECT_EQ(duplicates, 0u);
  c.dropped = Stat(q->get(), "dropped");
  c.torn_tails = Stat(q->get(), "torn_tails");
  c.dead_writers = Stat(q->get(), "dead_writer_files");
  // Every promised event is there; only an event the recorder reports dropped may be missing.
  uint64_t missing = 0;
  for (int t = 0; t < kThreads; ++t) {
    c.promised += flushed[t];
    uint64_t present = 0;
    for (auto it = seen[t].begin(); it != seen[t].end() && *it < flushed[t]; ++it) ++present;
    missing += flushed[t] - present;
  }
  EXPECT_LE(missing, static_cast<uint64_t>(std::max<int64_t>(c.dropped, 0)))
      << missing << " flushed events are missing";
  EXPECT_GE(c.rows, c.promised - missing);
  return c;
}

TEST(KillTest, LiveWriterIsFollowedAndAKilledOneIsTakenWhole) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace"), log = tmp.Sub("flush.log"), db = tmp.Sub("job.tdb");
  const pid_t pid = Start(trace, log);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitForFlushes(pid, log, 5));
  // Alive: the file is followed incrementally, the newest events wait for the next run.
  const std::string live = Compact(trace, db);
  EXPECT_NE(live.find("still being written"), std::string::npos) << live;
  EXPECT_EQ(live.find("writer is gone"), std::string::npos) << live;
  uint64_t lines = 0;
  LastFlush(log, &lines);
  ASSERT_TRUE(WaitForFlushes(pid, log, lines + 5));
  Kill(pid);
  uint64_t ignored;
  const std::vector<uint64_t> flushed = LastFlush(log, &ignored);
  // Dead: a plain compact takes the rest, with no flag.
  const std::string dead = Compact(trace, db);
  EXPECT_NE(dead.find("writer is gone"), std::string::npos) << dead;
  EXPECT_EQ(dead.find("still being written"), std::string::npos) << dead;
  const Check c = Verify(db, flushed);
  EXPECT_EQ(c.dead_writers, 1);
  EXPECT_GT(c.promised, 0u);
  // A later run finds nothing new (the file is finished).
  const std::string again = Compact(trace, db);
  EXPECT_NE(again.find("compacted 0 segment events"), std::string::npos) << again;
  int rc = 0;
  const std::string info = RunCommand(TracedbBin() + " info " + ShellQuote(db) + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << info;
  EXPECT_NE(info.find("dead_writer_files"), std::string::npos) << info;
  // The segment directory's own summary says the same.
  const std::string dir_info =
      RunCommand(TracedbBin() + " info --json " + ShellQuote(trace) + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << dir_info;
  EXPECT_NE(dir_info.find("\"dead_writer_files\": 1"), std::string::npos) << dir_info;
}

// `compact --watch` follows the live writer, takes the killed writer's file whole, and ends by
// itself once nothing is left to wait for (no flag, no Ctrl-C).
TEST(KillTest, WatchTakesAKilledWritersFileAndEnds) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace"), log = tmp.Sub("flush.log"), db = tmp.Sub("job.tdb");
  const pid_t pid = Start(trace, log);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitForFlushes(pid, log, 2));
  int watch_rc = -1;
  std::string watch_out;
  std::thread watch([&] {
    watch_out = RunCommand("timeout 60 " + TracedbBin() + " compact --watch --interval 0.1 " +
                               ShellQuote(trace) + " -o " + ShellQuote(db) + " 2>&1",
                           &watch_rc);
  });
  uint64_t lines = 0;
  LastFlush(log, &lines);
  const bool flushed_more = WaitForFlushes(pid, log, lines + 20);
  Kill(pid);
  uint64_t ignored;
  const std::vector<uint64_t> flushed = LastFlush(log, &ignored);
  watch.join();
  ASSERT_TRUE(flushed_more);
  EXPECT_EQ(watch_rc, 0) << watch_out;  // 124 would be the timeout: the watch never ended
  EXPECT_NE(watch_out.find("watch ended"), std::string::npos) << watch_out;
  const Check c = Verify(db, flushed);
  EXPECT_EQ(c.dead_writers, 1);
  EXPECT_GT(c.promised, 0u);
}

// A file whose META names another host is not judged by its lock (that host's locks may not be
// visible here): after the kill it waits, and --finish takes it.
TEST(KillTest, AnotherHostsFileWaitsForFinish) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace"), log = tmp.Sub("flush.log"), db = tmp.Sub("job.tdb");
  ::setenv("TRACEDB_HOSTNAME", "another-host.example", 1);
  const pid_t pid = Start(trace, log);
  ::unsetenv("TRACEDB_HOSTNAME");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitForFlushes(pid, log, 5));
  Kill(pid);
  uint64_t lines = 0;
  const std::vector<uint64_t> flushed = LastFlush(log, &lines);
  const std::string plain = Compact(trace, db);
  EXPECT_NE(plain.find("still being written"), std::string::npos) << plain;
  int rc = 0;
  const std::string finish = RunCommand(
      TracedbBin() + " compact --finish " + ShellQuote(trace) + " -o " + ShellQuote(db) + " 2>&1",
      &rc);
  EXPECT_EQ(rc, 0) << finish;
  const Check c = Verify(db, flushed);
  EXPECT_EQ(c.dead_writers, 0);
  EXPECT_GT(c.promised, 0u);
}

// The kill campaign: 20 SIGKILLs at random moments (seeded; the seed is printed).
TEST(KillTest, TwentyRandomKillsLoseNothingFlushed) {
  const unsigned seed = static_cast<unsigned>(
      std::chrono::steady_clock::now().time_since_epoch().count() & 0x7fffffff);
  std::mt19937 rng(seed);
  std::printf("kill campaign seed %u\n", seed);
  uint64_t promised = 0, torn = 0;
  for (int trial = 0; trial < 20; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " seed " + std::to_string(seed));
    TempDir tmp;
    const std::string trace = tmp.Sub("trace"), log = tmp.Sub("flush.log"), db = tmp.Sub("job.tdb");
    const pid_t pid = Start(trace, log);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(WaitForFlushes(pid, log, 1));
    // Anywhere in the next 0.6 s: between flushes, or while one is writing.
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 600000));
    Kill(pid);
    uint64_t lines = 0;
    const std::vector<uint64_t> flushed = LastFlush(log, &lines);
    ASSERT_EQ(flushed.size(), static_cast<size_t>(kThreads));
    Compact(trace, db);
    const Check c = Verify(db, flushed);
    EXPECT_EQ(c.dead_writers, 1);
    promised += c.promised;
    torn += static_cast<uint64_t>(c.torn_tails);
    if (::testing::Test::HasFailure()) break;
  }
  std::printf("kill campaign: %llu flushed events checked, %llu torn tails skipped\n",
              static_cast<unsigned long long>(promised), static_cast<unsigned long long>(torn));
}

}  // namespace
}  // namespace tracedb::testing
