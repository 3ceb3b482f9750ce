// Commands that race or reach too far (issue "Trust under attack"): two compactions on one
// output, a compaction behind a reader, `record` beside the user's files and beside a deleting
// compaction, the launcher probe without a shell, --delete-compacted and symbolic links. Each
// test injects the hazard (a second writer, a reader holding a read transaction, a quote in a
// path, a link to a directory outside) and checks the outcome against an independent reading
// (the workload's own row count, the files on disk).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "engine/compact/compactor.h"
#include "engine/compact/output_lock.h"
#include "engine/compact/segment_gc.h"
#include "engine/compact/shard_merge.h"
#include "engine/db/trace_writer.h"
#include "engine/segment/segment_dir.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;

// Runs the workload into `dir` as rank `rank`; returns the rows it says the database must hold.
// `env`: more variables for the recorder ("TRACEDB_ON_FULL=wait ").
int64_t Workload(const std::string& dir, int spans, int rank, const std::string& env = "") {
  int rc = 0;
  const std::string out = RunCommand(
      env + "WORKLOAD_PAUSE_MS=0 " + std::string(TRACEDB_WORKLOAD_PATH) + " " + ShellQuote(dir) +
          " 1 " + std::to_string(spans) + " " + std::to_string(rank) + " 2>/dev/null",
      &rc);
  EXPECT_EQ(rc, 0) << out;
  const size_t at = out.find("rows ");
  EXPECT_NE(at, std::string::npos) << out;
  return at == std::string::npos ? -1 : std::stoll(out.substr(at + 5));
}

// count(*) of `table` read with plain SQLite (no tracedb code); -1 when the file is no database.
int64_t PlainCount(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  int64_t n = -1;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      n = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close_v2(h);
  return n;
}

// The rows compacted: the sum of the blocks' counts, as the format defines it.
int64_t Rows(const std::string& db) { return PlainCount(db, "SELECT sum(count) FROM blocks"); }

struct Bg {
  std::thread t;
  std::string out;
  int rc = -1;
  void Start(const std::string& cmd) {
    t = std::thread([this, cmd] { out = RunCommand(cmd + " 2>&1", &rc); });
  }
  void Join() {
    if (t.joinable()) t.join();
  }
  ~Bg() { Join(); }
};

// Starts args[0] with `args` (no shell), stdout and stderr into `log`; returns its pid.
pid_t SpawnTo(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// The exit code, or 128 + the signal that ended it (as a shell says).
int Reap(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

// Two compactions of one directory into one new output, ten times: both succeed (the second
// waits for the first and finds nothing new), and the file is always there and complete.
TEST(CompactLock, TwoCompactionsOnOneOutputBothSucceed) {
  TempDir tmp;
  const int64_t rows = Workload(tmp.Sub("trace"), 3000, 0);
  ASSERT_GT(rows, 0);
  for (int i = 0; i < 10; ++i) {
    const std::string db = tmp.Sub("out" + std::to_string(i) + ".tdb");
    const std::string cmd =
        TracedbBin() + " compact " + ShellQuote(tmp.Sub("trace")) + " -o " + ShellQuote(db);
    Bg a, b;
    a.Start(cmd);
    b.Start(cmd);
    a.Join();
    b.Join();
    EXPECT_EQ(a.rc, 0) << a.out;
    EXPECT_EQ(b.rc, 0) << b.out;
    ASSERT_TRUE(fs::exists(db)) << "run " << i << ": " << a.out << "\n" << b.out;
    EXPECT_EQ(Rows(db), rows) << "run " << i;
    // At rest: one rollback-journal file (header byte 18 is 1, not WAL's 2), nothing beside.
    EXPECT_EQ(PlainCount(db, "PRAGMA journal_mode") == -1, false);
    EXPECT_FALSE(fs::exists(db + "-wal"));
    EXPECT_FALSE(fs::exists(db + "-journal"));
    std::ifstream f(db, std::ios::binary);
    char header[20] = {};
    f.read(header, sizeof(header));
    EXPECT_EQ(header[18], 1) << "run " << i << ": left in WAL mode";
  }
}

// With --no-wait a compaction of an output another process holds fails at once with a clear
// message and touches nothing; without it, it says it waits, and succeeds once the lock goes.
TEST(CompactLock, NoWaitFailsClearlyAndTheDefaultWaits) {
  TempDir tmp;
  const int64_t rows = Workload(tmp.Sub("trace"), 500, 0);
  const std::string db = tmp.Sub("job.tdb");
  const std::string cmd =
      TracedbBin() + " compact " + ShellQuote(tmp.Sub("trace")) + " -o " + ShellQuote(db);
  auto held = engine::OutputLock::Acquire(db);  // another writer, injected
  ASSERT_TRUE(held.ok()) << held.status().message();
  int rc = 0;
  const std::string out = RunCommand(cmd + " --no-wait 2>&1", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("tracedb compact: " + db + ": another tracedb process is writing it"),
            std::string::npos)
      << out;
  EXPECT_TRUE(fs::exists(db));  // the holder's (empty) file was left alone
  Bg waiter;
  waiter.Start(cmd);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(fs::exists(db));
  held->reset();
  waiter.Join();
  EXPECT_EQ(waiter.rc, 0) << waiter.out;
  EXPECT_NE(waiter.out.find("is being written by another tracedb process; waiting"),
            std::string::npos)
      << waiter.out;
  EXPECT_EQ(Rows(db), rows);
}

// A reader inside a read transaction when the compaction starts (a long query): the compaction
// says it waits for it and succeeds once it ends (it failed with "database is locked" after
// 10 s).
// A reader that starts once the compaction runs (WAL) holds nothing up: a --watch takes new
// files while a reader keeps a read transaction open, and the database is one rollback-journal
// file again once the reader is gone and the next writer opened it.
TEST(CompactLock, ReadersDoNotMakeACompactionFail) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  const std::string db = tmp.Sub("job.tdb");
  int64_t rows = Workload(trace, 500, 0);
  int rc = 0;
  std::string out = RunCommand(
      TracedbBin() + " compact -q " + ShellQuote(trace) + " -o " + ShellQuote(db) + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  rows += Workload(trace, 400, 1);
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &reader, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM blocks;", nullptr, nullptr, nullptr),
            SQLITE_OK);  // a read transaction held open: SHARED on the rollback-journal file
  sqlite3_busy_timeout(reader, 10000);  // as tracedb's own connections
  const pid_t compact = SpawnTo({TracedbBin(), "compact", trace, "-o", db}, tmp.Sub("c.log"));
  // Before, it failed after the 10 s busy timeout; now it says that it waits for the reader.
  const std::string waiting = "waiting for a reader of " + db;
  for (int i = 0; i < 400 && ReadFile(tmp.Sub("c.log")).find(waiting) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_NE(ReadFile(tmp.Sub("c.log")).find(waiting), std::string::npos);
  sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
  EXPECT_EQ(Reap(compact), 0) << ReadFile(tmp.Sub("c.log"));
  EXPECT_EQ(Rows(db), rows);

  // A watch in WAL mode; a reader holds a read transaction while a new rank's files arrive.
  Bg watch;
  watch.Start(TracedbBin() + " compact " + ShellQuote(trace) + " -o " + ShellQuote(db) +
              " --watch --interval 0.1");
  for (int i = 0; i < 200 && PlainCount(db, "PRAGMA journal_mode") >= 0; ++i) {
    std::ifstream f(db, std::ios::binary);
    char header[20] = {};
    f.read(header, sizeof(header));
    if (header[18] == 2) break;  // the watch switched it to WAL
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM blocks;", nullptr, nullptr, nullptr),
            SQLITE_OK);
  rows += Workload(trace, 300, 2);
  watch.Join();  // ends by itself: every file closed and taken
  EXPECT_EQ(watch.rc, 0) << watch.out;
  EXPECT_EQ(watch.out.find("locked"), std::string::npos) << watch.out;
  EXPECT_EQ(Rows(db), rows);
  sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close_v2(reader);
  // The next writer (a compaction with nothing new) brings it back to one file.
  out = RunCommand(
      TracedbBin() + " compact -q " + ShellQuote(trace) + " -o " + ShellQuote(db) + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  std::ifstream f(db, std::ios::binary);
  char header[20] = {};
  f.read(header, sizeof(header));
  EXPECT_EQ(header[18], 1);
  EXPECT_FALSE(fs::exists(db + "-wal"));
  EXPECT_FALSE(fs::exists(db + "-shm"));
}

// `compact` of a directory that does not exist is a file missing: exit 1, the documented prefix.
TEST(CompactLock, MissingDirectoryIsAnErrorOfTheWork) {
  TempDir tmp;
  int rc = 0;
  const std::string out = RunCommand(TracedbBin() + " compact " + ShellQuote(tmp.Sub("nope")) +
                                         " -o " + ShellQuote(tmp.Sub("x.tdb")) + " 2>&1",
                                     &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(out, "tracedb compact: " + tmp.Sub("nope") + ": no such directory\n");
  EXPECT_FALSE(fs::exists(tmp.Sub("x.tdb")));
}

// `compact --watch` follows a quiet job to its end: a live file with nothing new since the last
// pass waits like one whose tail waits for an anchor. (It counted as neither, so a watch whose
// passes came faster than the recorder's flushes found every file "closed and taken" after two
// passes and ended beside the live job, with none of its events.) Known answer: the job writes
// its segment file's header at start and everything else only at its end, some 2 s later.
TEST(CompactWatch, FollowsAQuietJobToItsEnd) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace"), db = tmp.Sub("job.tdb");
  Bg job;
  job.Start("TRACEDB_FLUSH_MS=600000 WORKLOAD_PAUSE_MS=700 " + std::string(TRACEDB_WORKLOAD_PATH) +
            " " + ShellQuote(trace) + " 1 3000 0");
  bool started = false;
  for (int i = 0; i < 2000 && !started; ++i) {
    auto files = engine::ListSegmentFiles(trace);
    started = files.ok() && !files->empty();
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(started);
  int rc = 0;
  const std::string out =
      RunCommand("timeout 60 " + TracedbBin() + " compact --watch --interval 0.1 " +
                     ShellQuote(trace) + " -o " + ShellQuote(db) + " 2>&1",
                 &rc);
  job.Join();
  ASSERT_EQ(job.rc, 0) << job.out;
  const size_t at = job.out.find("rows ");
  ASSERT_NE(at, std::string::npos) << job.out;
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(Rows(db), std::stoll(job.out.substr(at + 5))) << out;
}

// A first compaction builds its database aside (engine/compact/output_lock.h, FreshBuild). A run
// killed mid-build leaves the empty output and OUTPUT.partial (made here by hand, with a stale
// journal beside it): a reader is told the database is being built, not that it is missing; the
// next compaction removes the leftovers and writes every row, and a second one extends the
// database in place (WAL) with nothing built aside.
TEST(BuildAside, ALeftoverBuildIsNamedToReadersAndReplaced) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  const std::string db = tmp.Sub("job.tdb");
  int64_t rows = Workload(trace, 2000, 0);
  ASSERT_GT(rows, 0);
  WriteFile(db, "");
  WriteFile(db + ".partial", "half of a database");
  WriteFile(db + ".partial-journal", "a journal nobody may play back");
  int rc = 0;
  std::string out = RunCommand(TracedbBin() + " query " + ShellQuote(db) + " 'SELECT 1' 2>&1", &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find(db + ": no database yet (" + db +
                     ".partial is a compaction's unfinished build of it)"),
            std::string::npos)
      << out;
  out = RunCommand(
      TracedbBin() + " compact -v " + ShellQuote(trace) + " -o " + ShellQuote(db) + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("building " + db + " aside as " + db + ".partial"), std::string::npos) << out;
  EXPECT_EQ(Rows(db), rows);  // read with plain SQLite
  for (const char* side : {".partial", ".partial-journal", "-journal", "-wal", "-shm"}) {
    EXPECT_FALSE(fs::exists(db + side)) << side;
  }
  // A leftover beside a database that exists is removed by the writer that extends it.
  WriteFile(db + ".partial", "half of a database");
  rows += Workload(trace, 500, 1);
  out = RunCommand(
      TracedbBin() + " compact -v " + ShellQuote(trace) + " -o " + ShellQuote(db) + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find("aside"), std::string::npos) << out;
  EXPECT_EQ(Rows(db), rows);
  EXPECT_FALSE(fs::exists(db + ".partial"));
}

// An output that is a symbolic link to an empty file is written in place through the link, not
// built aside: the rename would replace the user's link with the database.
TEST(BuildAside, ASymlinkedOutputIsWrittenThroughTheLink) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  const int64_t rows = Workload(trace, 1000, 0);
  ASSERT_GT(rows, 0);
  WriteFile(tmp.Sub("real.tdb"), "");
  fs::create_symlink(tmp.Sub("real.tdb"), tmp.Sub("job.tdb"));
  int rc = 0;
  const std::string out = RunCommand(TracedbBin() + " compact -v " + ShellQuote(trace) + " -o " +
                                         ShellQuote(tmp.Sub("job.tdb")) + " 2>&1",
                                     &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find("aside"), std::string::npos) << out;
  EXPECT_TRUE(fs::is_symlink(tmp.Sub("job.tdb")));
  EXPECT_EQ(Rows(tmp.Sub("real.tdb")), rows);
}

// Ctrl-C (or a scheduler's SIGTERM) in the middle of a first compaction: the build and the empty
// output it created are removed, each named, and the process ends by the signal; the next run
// writes every row. Known moment: the signal is sent once the build holds pages.
TEST(BuildAside, AnInterruptedFirstCompactionLeavesNothing) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  // (Waiting rather than dropping when its buffers fill on a busy machine: the workload must
  // drop nothing.)
  const int64_t rows =
      Workload(trace, 400000, 0, "TRACEDB_ON_FULL=wait TRACEDB_ON_FULL_WAIT_MS=60000 ");
  ASSERT_GT(rows, 0);
  for (const int sig : {SIGINT, SIGTERM}) {
    const std::string db = tmp.Sub(std::string("job-") + std::to_string(sig) + ".tdb");
    const std::string log = tmp.Sub("compact.log");
    const pid_t pid = SpawnTo({TracedbBin(), "compact", trace, "-o", db}, log);
    bool building = false;
    for (int i = 0; i < 20000 && !building; ++i) {
      std::error_code ec;
      const uintmax_t size = fs::file_size(db + ".partial", ec);
      building = !ec && size > 100000;
      if (!building) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ASSERT_TRUE(building) << ReadFile(log);
    ::kill(pid, sig);
    const int status = Reap(pid);
    const std::string text = ReadFile(log);
    if (status == 0) GTEST_SKIP() << "the compaction finished before the signal arrived";
    EXPECT_EQ(status, 128 + sig) << text;
    const std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    EXPECT_NE(text.find("tracedb compact: interrupted (" + name + "); removed the unfinished " +
                        db + ".partial"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("removed the unfinished " + db + "\n"), std::string::npos) << text;
    for (const char* side : {"", ".partial", ".partial-journal", "-journal", "-wal"}) {
      EXPECT_FALSE(fs::exists(db + side)) << side;
    }
    int rc = 0;
    const std::string out = RunCommand(
        TracedbBin() + " compact -q " + ShellQuote(trace) + " -o " + ShellQuote(db) + " 2>&1", &rc);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_EQ(Rows(db), rows);
  }
}

// `--shard-by node` holds the manifest's writer lock for its run, like a plain compact: with
// another writer injected, --no-wait fails at once naming the output, the default says it waits
// and then succeeds; two runs side by side both succeed and the shards hold every row once.
TEST(CompactLock, ShardByNodeTakesTheLockToo) {
  TempDir tmp;
  const int64_t rows = Workload(tmp.Sub("trace"), 2000, 0) + Workload(tmp.Sub("trace"), 1000, 1);
  ASSERT_GT(rows, 0);
  const std::string manifest = tmp.Sub("nodes.tdb");
  const std::string cmd = TracedbBin() + " compact --shard-by node " +
                          ShellQuote(tmp.Sub("trace")) + " -o " + ShellQuote(manifest);
  auto shard_rows = [&]() {
    int64_t n = 0;
    for (const auto& e : fs::directory_iterator(manifest + ".shards")) {
      if (e.path().extension() == ".tdb") n += Rows(e.path().string());
    }
    return n;
  };
  {
    auto held = engine::OutputLock::Acquire(manifest);  // another writer, injected
    ASSERT_TRUE(held.ok()) << held.status().message();
    int rc = 0;
    const std::string out = RunCommand(cmd + " --no-wait 2>&1", &rc);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("tracedb compact: " + manifest + ": another tracedb process is writing it"),
              std::string::npos)
        << out;
    EXPECT_FALSE(fs::exists(manifest + ".shards")) << "it wrote while another held the output";
    Bg waiter;
    waiter.Start(cmd);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_FALSE(fs::exists(manifest + ".shards"));
    held->reset();
    waiter.Join();
    EXPECT_EQ(waiter.rc, 0) << waiter.out;
    EXPECT_NE(waiter.out.find("is being written by another tracedb process; waiting"),
              std::string::npos)
        << waiter.out;
  }
  EXPECT_EQ(PlainCount(manifest, "SELECT count(*) FROM shards"), 1);
  EXPECT_EQ(shard_rows(), rows);
  // Two more side by side over the same output: each waits its turn, nothing is taken twice.
  Bg a, b;
  a.Start(cmd);
  b.Start(cmd);
  a.Join();
  b.Join();
  EXPECT_EQ(a.rc, 0) << a.out;
  EXPECT_EQ(b.rc, 0) << b.out;
  EXPECT_EQ(shard_rows(), rows);
  EXPECT_EQ(PlainCount(manifest, "SELECT count(*) FROM shards"), 1);
}

// --delete-compacted syncs the database before it deletes what the database now holds. It did so
// through a descriptor of its own, opened and closed: closing any descriptor of a file drops every
// POSIX lock the process holds on it, SQLite's included, so a `compact --watch` lost its WAL
// lock at every pass that deleted files, and a `tracedb archive` beside it (which tries to switch
// the file back to one rollback journal when it opens it) switched it under the watch, whose next
// commits then went to a WAL nobody reads: a corrupt file (archive_soak_short, 1 run in 3). Here
// the other process is plain sqlite3: the switch must still be refused after the deletion.
TEST(DeleteCompacted, KeepsTheWritersLocksOnTheDatabase) {
  TempDir tmp;
  ASSERT_GT(Workload(tmp.Sub("trace"), 500, 0), 0);
  const std::string db = tmp.Sub("job.tdb");
  auto w = engine::TraceWriter::Open(db);
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE(engine::EnterWalForWriting((*w)->db(), {}).ok());
  engine::CompactOptions co;
  co.inputs = {tmp.Sub("trace")};
  co.finish = true;
  auto stats = engine::Compact(w->get(), co);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  auto switch_mode = [&]() {
    int rc = 0;
    std::string out =
        RunCommand("sqlite3 " + ShellQuote(db) + " 'PRAGMA journal_mode=DELETE' 2>&1", &rc);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  };
  // Refused (busy: "database is locked"), or answered "wal" when SQLite gives up quietly;
  // "delete" when it switched.
  auto held = [](const std::string& out) {
    return out == "wal" || out.find("database is locked") != std::string::npos;
  };
  const std::string before = switch_mode();
  ASSERT_TRUE(held(before)) << "the writer's connection does not hold the file: " << before;
  engine::DeleteCompactedOptions d;
  d.inputs = co.inputs;
  d.finish = true;
  auto del = engine::DeleteCompactedSegments((*w)->db(), d);
  ASSERT_TRUE(del.ok()) << del.status().message();
  ASSERT_GT(del->files, 0u) << "nothing deleted: the sync before deleting was not exercised";
  const std::string after = switch_mode();
  EXPECT_TRUE(held(after)) << "another process switched the journal under the writer: " << after;
  // The writer goes on, and the file is whole.
  ASSERT_TRUE(
      (*w)->db()->Exec("CREATE TABLE after_delete(x); INSERT INTO after_delete VALUES(1)").ok());
  w->reset();
  EXPECT_EQ(PlainCount(db, "SELECT count(*) FROM after_delete"), 1);
  int rc = 0;
  EXPECT_EQ(RunCommand("sqlite3 " + ShellQuote(db) + " 'PRAGMA integrity_check'", &rc), "ok\n");
}

// The shard merge reads a shard's fingerprint under the read transaction that locks the shard
// against writers; read through a descriptor of its own, opened and closed, it dropped that lock
// (closing any descriptor of a file drops the process's POSIX locks on it), so a compaction of
// the shard could commit in the middle of the merge's read. Read through SQLite's handle, the
// lock stays: another process cannot take the shard for writing. The reading by path keeps it too.
TEST(ShardMerge, FingerprintKeepsTheReadLock) {
  TempDir tmp;
  const std::string shard = tmp.Sub("shard.tdb");
  {
    auto w = engine::TraceWriter::Open(shard);
    ASSERT_TRUE(w.ok()) << w.status().message();
  }
  auto dst = engine::Db::Open(tmp.Sub("dst.tdb"), engine::Db::Mode::kCreate);
  ASSERT_TRUE(dst.ok()) << dst.status().message();
  ASSERT_TRUE((*dst)->Exec("ATTACH DATABASE '" + shard + "' AS shard").ok());
  ASSERT_TRUE((*dst)->Exec("BEGIN").ok());
  ASSERT_TRUE((*dst)->QueryInt("SELECT count(*) FROM shard.meta").ok());
  const std::string fp = engine::ShardFingerprint(dst->get(), "shard", shard);
  EXPECT_FALSE(fp.empty());
  auto locked = [&]() {
    int rc = 0;
    const std::string out = RunCommand(
        "sqlite3 " + ShellQuote(shard) + " 'PRAGMA busy_timeout=0; BEGIN EXCLUSIVE; COMMIT;' 2>&1",
        &rc);
    return out.find("database is locked") != std::string::npos;
  };
  EXPECT_TRUE(locked()) << "another process took the shard for writing under the merge's read";
  // The reading by path (the catalog's up-to-date check, from a process such as the view server
  // whose other connections may be reading the shard) gives the same text and keeps their locks
  // too: it had opened and closed a descriptor of its own.
  EXPECT_EQ(engine::ShardFingerprint(shard), fp);
  EXPECT_TRUE(locked()) << "the reading by path dropped the read lock of another connection";
  EXPECT_EQ(engine::ShardFingerprint(tmp.Sub("missing.tdb")), "");
  ASSERT_TRUE((*dst)->Exec("COMMIT").ok());
}

// --delete-compacted removes only files inside the trace directory: a rank directory that is a
// symbolic link to another place is read, but nothing is deleted through it.
TEST(DeleteCompacted, DoesNotFollowASymlinkedRankDirectory) {
  TempDir tmp;
  const int64_t rows = Workload(tmp.Sub("elsewhere"), 300, 0);
  fs::create_directories(tmp.Sub("trace"));
  fs::create_directory_symlink(tmp.Sub("elsewhere/rank-0"), tmp.Sub("trace/rank-0"));
  auto files_in = [](const std::string& dir) {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
  };
  const size_t before = files_in(tmp.Sub("elsewhere/rank-0"));
  ASSERT_GT(before, 0u);
  int rc = 0;
  const std::string out =
      RunCommand(TracedbBin() + " compact " + ShellQuote(tmp.Sub("trace")) + " -o " +
                     ShellQuote(tmp.Sub("job.tdb")) + " --delete-compacted 2>&1",
                 &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(Rows(tmp.Sub("job.tdb")), rows);
  EXPECT_EQ(files_in(tmp.Sub("elsewhere/rank-0")), before) << out;
  EXPECT_NE(out.find("is a symbolic link"), std::string::npos) << out;
}

// `record -o job.tdb` never deletes a job.segments/ holding the user's files.
TEST(Record, KeepsTheUsersFilesInTheSegmentDirectory) {
  TempDir tmp;
  fs::create_directories(tmp.Sub("job.segments/rank-0"));
  WriteFile(tmp.Sub("job.segments/notes.txt"), "mine\n");
  WriteFile(tmp.Sub("job.segments/rank-0/keep.me"), "mine too\n");
  int rc = 0;
  std::string out = RunCommand("cd " + ShellQuote(tmp.path()) + " && " + TracedbBin() +
                                   " record -o job.tdb --force -- /bin/true 2>&1",
                               &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("holds files that are not segments"), std::string::npos) << out;
  EXPECT_EQ(ReadFile(tmp.Sub("job.segments/notes.txt")), "mine\n");
  EXPECT_EQ(ReadFile(tmp.Sub("job.segments/rank-0/keep.me")), "mine too\n");
  EXPECT_FALSE(fs::exists(tmp.Sub("job.tdb")));
}

// `record` beside `compact --watch --delete-compacted` on the same directory is refused with a
// message naming the other command, both ways round, instead of losing events silently.
TEST(Record, RefusesBesideADeletingCompaction) {
  TempDir tmp;
  const std::string dir = tmp.Sub("segs");
  fs::create_directories(dir);
  const pid_t watch = SpawnTo({TracedbBin(), "compact", dir, "-o", tmp.Sub("w.tdb"), "--watch",
                               "--interval", "0.1", "--delete-compacted"},
                              tmp.Sub("watch.log"));
  const std::string owner = dir + "/" + engine::SegmentDirLock::kFileName;
  for (int i = 0; i < 200 && !fs::exists(owner); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_TRUE(fs::exists(owner));
  int rc = 0;
  std::string out = RunCommand(TracedbBin() + " record -o " + ShellQuote(tmp.Sub("r.tdb")) +
                                   " --dir " + ShellQuote(dir) + " -- /bin/true 2>&1",
                               &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(
      out.find("belong to tracedb compact --delete-compacted (pid " + std::to_string(watch) + ")"),
      std::string::npos)
      << out;
  // The watch never saw a file: stop it (Ctrl-C) and let it end.
  ::kill(watch, SIGINT);
  EXPECT_EQ(Reap(watch), 0) << ReadFile(tmp.Sub("watch.log"));
  EXPECT_FALSE(fs::exists(owner));

  // The other way round: a recording in progress keeps a deleting compaction out.
  Bg record;
  record.Start(TracedbBin() + " record -q -o " + ShellQuote(tmp.Sub("r2.tdb")) + " --dir " +
               ShellQuote(dir) + " -- /bin/sleep 2");
  for (int i = 0; i < 200 && !fs::exists(owner); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  out = RunCommand(TracedbBin() + " compact " + ShellQuote(dir) + " -o " +
                       ShellQuote(tmp.Sub("w2.tdb")) + " --delete-compacted 2>&1",
                   &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("--delete-compacted refused: " + dir +
                     ": its segment files belong to "
                     "tracedb record (pid"),
            std::string::npos)
      << out;
  record.Join();
  EXPECT_FALSE(fs::exists(owner));  // released on the recording's way out
}

// The launcher probe runs `LAUNCHER --version` without a shell: a quote in the launcher's path
// is part of the path, never a command. The fake `mpirun` answers as Open MPI and records the
// arguments it was run with (the probe's answer shows as `-x` flags).
TEST(Record, ProbesTheLauncherWithoutAShell) {
  TempDir tmp;
  const std::string bad = tmp.Sub("a'; touch PWNED; echo '");
  fs::create_directories(bad);
  const std::string launcher = bad + "/mpirun";
  WriteFile(launcher,
            "#!/bin/sh\n"
            "if [ \"$1\" = --version ]; then echo 'mpirun (Open MPI) 4.1.0'; exit 0; fi\n"
            "echo \"$@\" > \"$(dirname \"$0\")/args\"\n"
            "while [ \"$1\" = -x ]; do shift 2; done\n"
            "exec \"$@\"\n");
  fs::permissions(launcher, fs::perms::owner_all);
  int rc = 0;
  const std::string out =
      RunCommand("cd " + ShellQuote(tmp.path()) + " && " + TracedbBin() +
                     " record -q --no-mpi -o r.tdb -- " + ShellQuote(launcher) + " /bin/true 2>&1",
                 &rc);
  EXPECT_FALSE(fs::exists(tmp.Sub("PWNED"))) << out;
  EXPECT_NE(ReadFile(bad + "/args").find("-x TRACEDB_DIR="), std::string::npos) << out;
}

// Ctrl-C in the middle of a large export: the temporary file is removed, the command says so,
// and it ends by SIGINT (exit status 130 in a shell). Known moment: the signal is sent once the
// temporary file holds bytes, i.e. mid-write (a gzip -9 export of 90,000 rows takes ~1 s).
TEST(Interrupt, CtrlCDuringExportRemovesWhatItWrote) {
  TempDir tmp;
  ASSERT_GT(Workload(tmp.Sub("trace"), 15000, 0), 0);
  const std::string db = tmp.Sub("job.tdb");
  int rc = 0;
  std::string out = RunCommand(TracedbBin() + " compact -q " + ShellQuote(tmp.Sub("trace")) +
                                   " -o " + ShellQuote(db) + " 2>&1",
                               &rc);
  ASSERT_EQ(rc, 0) << out;
  fs::create_directories(tmp.Sub("out"));
  const pid_t pid = SpawnTo({TracedbBin(), "export", "--chrome", db, "-o",
                             tmp.Sub("out/job.json.gz"), "--gzip-level", "9"},
                            tmp.Sub("export.log"));
  std::string partial;
  for (int i = 0; i < 4000 && partial.empty(); ++i) {
    for (const auto& e : fs::directory_iterator(tmp.Sub("out"))) {
      if (e.path().string().find(".partial-") != std::string::npos && fs::file_size(e.path()) > 0) {
        partial = e.path().string();
      }
    }
    if (partial.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_FALSE(partial.empty()) << ReadFile(tmp.Sub("export.log"));
  ::kill(pid, SIGINT);
  const int status = Reap(pid);
  const std::string log = ReadFile(tmp.Sub("export.log"));
  if (status == 0) GTEST_SKIP() << "the export finished before the signal arrived";
  EXPECT_EQ(status, 128 + SIGINT) << log;
  EXPECT_NE(log.find("tracedb export: interrupted (SIGINT); removed the unfinished " + partial),
            std::string::npos)
      << log;
  EXPECT_TRUE(fs::is_empty(tmp.Sub("out"))) << log;
}

// A database for the CLI checks below (the workload, compacted).
std::string SmallDb(TempDir& tmp) {
  EXPECT_GT(Workload(tmp.Sub("trace"), 50, 0), 0);
  int rc = 0;
  const std::string out = RunCommand(TracedbBin() + " compact -q " + ShellQuote(tmp.Sub("trace")) +
                                         " -o " + ShellQuote(tmp.Sub("s.tdb")) + " 2>&1",
                                     &rc);
  EXPECT_EQ(rc, 0) << out;
  return tmp.Sub("s.tdb");
}

// CSV and table output print a value whole, NUL bytes included (they stopped at the first).
TEST(Cli, OutputKeepsValuesWithNulBytesWhole) {
  TempDir tmp;
  const std::string db = SmallDb(tmp);
  int rc = 0;
  const std::string sql = " \"SELECT 'a' || char(0) || 'b' AS n\"";
  std::string out = RunCommand(TracedbBin() + " query " + ShellQuote(db) + sql + " -f csv", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, std::string("n\na\0b\n", 6));
  out = RunCommand(TracedbBin() + " query " + ShellQuote(db) + sql, &rc);
  EXPECT_NE(out.find(std::string("a\0b", 3)), std::string::npos) << out;
}

// Exit codes and prefixes as docs/cli.md "Exit codes" says: a file that is no database is the
// work failing (1), with the subcommand's prefix and no status-code word.
TEST(Cli, ErrorsOfTheWorkExitOneWithTheSubcommandPrefix) {
  TempDir tmp;
  const std::string db = SmallDb(tmp);
  WriteFile(tmp.Sub("not.tdb"), "hello\n");
  int rc = 0;
  std::string out = RunCommand(TracedbBin() + " export --chrome " + ShellQuote(tmp.Sub("not.tdb")) +
                                   " -o " + ShellQuote(tmp.Sub("x.json")) + " 2>&1",
                               &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(out.rfind("tracedb export: " + tmp.Sub("not.tdb") + ": ", 0), 0u) << out;
  out = RunCommand(
      TracedbBin() + " view " + ShellQuote(tmp.Sub("not.tdb")) + " --exit-after 0.1 2>&1", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(out.rfind("tracedb view: " + tmp.Sub("not.tdb") + ": ", 0), 0u) << out;
  EXPECT_EQ(out.find("Invalid argument"), std::string::npos) << out;
  // The shell: its errors carry its prefix too.
  out = RunCommand(
      "printf 'SELEKT 1;\\n' | " + TracedbBin() + " shell " + ShellQuote(db) + " 2>&1 >/dev/null",
      &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(out.rfind("tracedb shell: ", 0), 0u) << out;
}

// `.schema` prints each statement as it is (sqlite3's own form), not as a quoted CSV field:
// compared with the schema table read by plain SQLite.
TEST(Cli, SchemaCanBePastedIntoSqlite3) {
  TempDir tmp;
  const std::string db = SmallDb(tmp);
  int rc = 0;
  const std::string out =
      RunCommand("printf '.schema strings\\n' | " + TracedbBin() + " shell " + ShellQuote(db), &rc);
  EXPECT_EQ(rc, 0) << out;
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(h, "SELECT sql FROM sqlite_master WHERE name = 'strings'", -1, &st,
                               nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  const std::string want =
      std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) + ";\n";
  sqlite3_finalize(st);
  sqlite3_close_v2(h);
  EXPECT_EQ(out, want);
}

// The mpitrace import says where its rows went (the MPI profile tables), not "imported N
// events" over an empty `events`; the count agrees with the tables read by plain SQLite.
TEST(Cli, ProfileImportSaysWhatWentWhere) {
  const std::string fixture = SharedFixturePath("mpitrace/alcf_cpu_mpi_profile.176073.0");
  if (fixture.empty()) GTEST_SKIP() << "no shared mpitrace fixture";
  TempDir tmp;
  const std::string db = tmp.Sub("mp.tdb");
  int rc = 0;
  const std::string out =
      RunCommand(TracedbBin() + " import " + ShellQuote(fixture) + " -o " + ShellQuote(db), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(PlainCount(db, "SELECT coalesce(sum(count), 0) FROM blocks"), 0);  // no events
  std::string held;
  for (const char* t : {"rank_times", "mpi_profile", "mpi_msgsize"}) {
    held += std::string(held.empty() ? "" : ", ") + t + " " +
            std::to_string(PlainCount(db, std::string("SELECT count(*) FROM ") + t));
  }
  EXPECT_NE(out.find("imported an MPI profile from 1 file into " + db +
                     ": no timeline events; its tables hold " + held + " rows"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find(" events from 1 file"), std::string::npos) << out;
}

}  // namespace
}  // namespace tracedb::testing
