// Compaction in shards, end to end through the tracedb program:
//  - `mpirun -np K tracedb compact --mpi` (real mpirun) gives the same rows, in every table, as a
//    single-process `tracedb compact` of the same job, also when it runs incrementally (a span
//    left open by the first run is closed by the second), and refuses a database made another
//    way;
//  - `tracedb compact --shard-by node` writes a database per node and a manifest that
//    `tracedb query` opens as one database: the same rows as the single database for a set of
//    queries over `events` and the views.
// The reference is always the single-process compaction (an independent code path: no shard,
// no merge), compared by content: string and track ids may differ, names and identities not.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "query/open/query_db.h"
#include "tests/db_rows.h"
#include "tests/segment_fixture.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

constexpr int64_t kT0 = 1700000000000000000;  // ns

std::string Mpirun(int np) {
  std::string cmd = ShellQuote(TRACEDB_MPIEXEC) + " --oversubscribe";
  if (::geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd + " -np " + std::to_string(np) + " ";
}

int Sh(const std::string& cmd, std::string* out = nullptr) {
  int code = -1;
  std::string o = RunCommand(cmd + " 2>&1", &code);
  if (out) *out = o;
  if (code != 0) std::fprintf(stderr, "%s\n-> exit %d\n%s\n", cmd.c_str(), code, o.c_str());
  return code;
}

// A job of 5 ranks on two hosts (hostB's realtime is 3 ms off, corrected by sync points), two
// threads and a lane per rank, nested spans, instants, counters, steps, drops and rank-specific
// names (so that string ids differ between shards). File `seq` of each rank covers 10 s; the
// span "outer" opened at the end of file 0 ends in file 1.
std::string JobSpec(int seq) {
  std::string spec;
  for (int rank = 0; rank < 5; ++rank) {
    const bool host_b = rank >= 3;
    const int64_t realtime_off = host_b ? 3000000 : 0;
    const int64_t local_off = 1000000000LL * (rank + 1);  // local = t - T0 + local_off
    auto local = [&](int64_t t) { return std::to_string(t - kT0 + local_off); };
    spec += "file trace " + std::to_string(rank) + " " + std::to_string(100 + rank) + " " +
            std::to_string(seq) + " host=" + (host_b ? "hostB" : "hostA") + " world=5\n";
    spec += "string 1 work\nstring 2 outer\nstring 3 r" + std::to_string(rank) +
            ".op\nstring 4 queue\nstring 5 loss\nstring 6 send\n"
            "string 7 tracedb.trigger:test\n";
    spec += "thread 1 " + std::to_string(1000 + rank) + " main\n";
    spec += "thread 2 " + std::to_string(2000 + rank) + " comm\n";
    spec += "lane 1 4\n";
    spec += "comm 1 5 " + std::to_string(rank) + " 0,1,2,3,4\n";
    const int64_t base = kT0 + int64_t{seq} * 10000000000;
    for (int s = 0; s <= 10; ++s) {
      const int64_t t = base + int64_t{s} * 1000000000;
      spec += "anchor " + std::to_string(t + realtime_off) + " " + local(t) + " unc=40\n";
    }
    if (host_b) {
      const int64_t t = base + 500000000;
      // rank 0's local clock at the same instant minus this rank's.
      const int64_t off = (t - kT0 + 1000000000) - (t - kT0 + local_off);
      spec += "sync 0 " + local(t) + " " + std::to_string(off) + " 1500\n";
    }
    spec += "events 1\n";
    if (seq == 1) spec += "E " + local(base + 100000000) + " 2\n";  // closes file 0's "outer"
    spec += "I " + local(base + 150000000) + " 7\n";  // a flight-recorder trigger: `triggers`
    for (int i = 0; i < 30; ++i) {
      const int64_t t = base + 200000000 + int64_t{i} * 300000000;
      spec += "B " + local(t) + " 1 cat=1\n";
      spec += "X " + local(t + 1000) + " " + std::to_string(5000 + 37 * i * (rank + 1)) +
              " 3 cat=2 bytes=" + std::to_string(1024 * i) + "\n";
      spec += "I " + local(t + 9000) + " 6 peer=" + std::to_string((rank + 1) % 5) + " tag=7\n";
      spec += "E " + local(t + 200000 + 1000 * rank) + " 1\n";
      spec += "C " + local(t + 300000) + " 5 " + std::to_string(0.5 * i + rank) + "\n";
      if (i % 10 == 0) spec += "S " + local(t) + " " + std::to_string(seq * 3 + i / 10) + "\n";
    }
    if (seq == 0) spec += "B " + local(base + 9900000000) + " 2\n";  // open across the files
    spec += "events 2\n";
    for (int i = 0; i < 20; ++i) {
      const int64_t t = base + 250000000 + int64_t{i} * 400000000;
      spec += "X " + local(t) + " " + std::to_string(20000 + 11 * i) +
              " 6 lane=1 seq=" + std::to_string(i) + " comm=1\n";
    }
    // A step summary (`step_stats`), whose time maps through this rank's clock.
    spec += "stepstat " + std::to_string(seq * 3) + " " + local(base + 200000000) +
            " 3000000000 1000 500 200 4096 30 1:1000 3:" + std::to_string(500 + rank) + "\n";
    spec += "drop 2 " + std::to_string(rank + seq) + "\nend\n";
  }
  return spec;
}

// Every table compared by content (ids of strings, tracks and blocks resolved or left out).
void ExpectSameTables(const std::string& want, const std::string& got) {
  const std::vector<DbRow> a = ReadDbRows(want), b = ReadDbRows(got);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(RowsCsv(a), RowsCsv(b));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {  // what RowsCsv leaves out: the ordinals
    EXPECT_EQ(a[i].k, b[i].k) << i;
    EXPECT_EQ(a[i].parent_k, b[i].parent_k) << i;
  }
  // The one difference: the merged database records how many processes made it.
  std::string got_tables = TablesCsv(got);
  const size_t at = got_tables.find("mpi_processes,");
  ASSERT_NE(at, std::string::npos);
  got_tables.erase(at, got_tables.find('\n', at) + 1 - at);
  EXPECT_EQ(TablesCsv(want), got_tables);
  for (const char* sql : {
           "SELECT s FROM strings",
           "SELECT * FROM ranks",
           "SELECT * FROM processes",
           "SELECT * FROM clock_knots",
           "SELECT * FROM sync_points",
           "SELECT * FROM comms",
           "SELECT * FROM steps",
           "SELECT * FROM stats",
           "SELECT path, format, rank, pid, offset, size, finished, events FROM sources",
           "SELECT rank, kind, name, tid, pid, local_id, sort_index, next_k FROM tracks",
           "SELECT rank, min_ts, max_end, max_dur, count FROM blocks",
           "SELECT b.rank, b.min_ts, n.s, bn.max_dur, c.s, bn.count FROM block_names bn "
           "JOIN blocks b USING(block) JOIN strings n ON n.id = bn.name "
           "LEFT JOIN strings c ON c.id = bn.cat",
           "SELECT ns.rank, n.s, c.s, kind, count, total_dur, min_dur, max_dur, hex(hist) "
           "FROM name_stats ns JOIN strings n ON n.id = ns.name LEFT JOIN strings c "
           "ON c.id = ns.cat",
           "SELECT value FROM meta WHERE key = 'open_spans'",
           "SELECT * FROM step_stats",
           "SELECT * FROM triggers",
       }) {
    EXPECT_EQ(QueryRows(want, sql), QueryRows(got, sql)) << sql;
  }
}

class MpiCompact : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int seq : {0, 1}) {
      const Status s = WriteSegmentsFromSpec(tmp_.path(), JobSpec(seq));
      ASSERT_TRUE(s.ok()) << s.message();
    }
    one_ = tmp_.Sub("one.tdb");
    ASSERT_EQ(Sh(ShellQuote(TracedbBin()) + " compact -q " + ShellQuote(tmp_.Sub("trace")) +
                 " -o " + ShellQuote(one_)),
              0);
  }
  std::string MpiCompactCmd(int np, const std::string& trace, const std::string& out) {
    return Mpirun(np) + ShellQuote(TracedbBin()) + " compact --mpi " + ShellQuote(trace) + " -o " +
           ShellQuote(out);
  }
  TempDir tmp_;
  std::string one_;
};

TEST_F(MpiCompact, SameRowsAsOneProcess) {
  for (int np : {1, 2, 3}) {
    SCOPED_TRACE("np " + std::to_string(np));
    const std::string db = tmp_.Sub("mpi" + std::to_string(np) + ".tdb");
    std::string out;
    ASSERT_EQ(Sh(MpiCompactCmd(np, tmp_.Sub("trace"), db), &out), 0);
    EXPECT_NE(out.find("in " + std::to_string(np) + " processes"), std::string::npos) << out;
    ExpectSameTables(one_, db);
    // The flight recorder's tables are among them: a trigger and a step per rank and file.
    EXPECT_EQ(QueryRows(db, "SELECT count(*) FROM step_stats"), QueryRows(one_, "SELECT 10"));
    EXPECT_EQ(QueryRows(db, "SELECT count(*) FROM triggers"), QueryRows(one_, "SELECT 10"));
    // Nothing new: a second run changes no row.
    ASSERT_EQ(Sh(MpiCompactCmd(np, tmp_.Sub("trace"), db)), 0);
    ExpectSameTables(one_, db);
  }
}

TEST_F(MpiCompact, IncrementalAcrossRuns) {
  // The first run sees file 0 of every rank only ("outer" stays open), the second the rest.
  TempDir part;
  ASSERT_TRUE(WriteSegmentsFromSpec(part.path(), JobSpec(0)).ok());
  // The writers are alive during the first run: each file 0 locked as a recorder holds it (a
  // file nobody holds is a dead writer's, whose open spans are then written open, "Open spans").
  std::vector<int> held;
  for (const auto& e : std::filesystem::recursive_directory_iterator(part.Sub("trace"))) {
    if (e.path().extension() != ".tds") continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << e.path();
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0) << e.path();
    held.push_back(fd);
  }
  ASSERT_EQ(held.size(), 5u);
  const std::string db = tmp_.Sub("inc.tdb");
  const int first = Sh(MpiCompactCmd(2, part.Sub("trace"), db));
  for (int fd : held) ::close(fd);
  ASSERT_EQ(first, 0);
  EXPECT_EQ(QueryRows(db, "SELECT value FROM meta WHERE key = 'open_spans'"), "5\n");
  ASSERT_TRUE(WriteSegmentsFromSpec(part.path(), JobSpec(1)).ok());
  ASSERT_EQ(Sh(MpiCompactCmd(2, part.Sub("trace"), db)), 0);
  // The sources paths differ (another directory): compare everything else.
  const std::vector<DbRow> a = ReadDbRows(one_), b = ReadDbRows(db);
  EXPECT_EQ(RowsCsv(a), RowsCsv(b));
  for (const char* sql :
       {"SELECT rank, name, value FROM stats", "SELECT * FROM steps", "SELECT * FROM ranks",
        "SELECT rank, kind, name, tid, pid, local_id, next_k FROM tracks",
        "SELECT value FROM meta WHERE key = 'open_spans'"}) {
    EXPECT_EQ(QueryRows(one_, sql), QueryRows(db, sql)) << sql;
  }
}

TEST_F(MpiCompact, ShardsMadeAgainAreMergedAgain) {
  // A first run over file 0, then the processes' shards are lost (deleted with the scratch
  // space, say) and a second run compacts everything again into new shards, whose blocks are
  // numbered from 1 like the lost ones: the merge must not take them for the blocks it holds.
  TempDir part;
  ASSERT_TRUE(WriteSegmentsFromSpec(part.path(), JobSpec(0)).ok());
  const std::string db = tmp_.Sub("again.tdb");
  ASSERT_EQ(Sh(MpiCompactCmd(2, part.Sub("trace"), db)), 0);
  const int64_t first = std::stoll(QueryRows(db, "SELECT count(*) FROM events", false));
  ASSERT_GT(first, 0);
  RemoveTree(db + ".shards");
  ASSERT_TRUE(WriteSegmentsFromSpec(part.path(), JobSpec(1)).ok());
  ASSERT_EQ(Sh(MpiCompactCmd(2, part.Sub("trace"), db)), 0);
  const std::vector<DbRow> a = ReadDbRows(one_), b = ReadDbRows(db);
  EXPECT_EQ(RowsCsv(a), RowsCsv(b));
  for (const char* sql :
       {"SELECT rank, min_ts, max_end, max_dur, count FROM blocks ORDER BY rank, min_ts",
        "SELECT b.rank, n.s, bn.max_dur, bn.count FROM block_names bn JOIN blocks b "
        "USING(block) JOIN strings n ON n.id = bn.name ORDER BY 1, 2, 3, 4",
        "SELECT rank, name, value FROM stats", "SELECT * FROM steps",
        "SELECT value FROM meta WHERE key = 'open_spans'"}) {
    EXPECT_EQ(QueryRows(one_, sql), QueryRows(db, sql)) << sql;
  }
  EXPECT_EQ(QueryRows(db,
                      "SELECT count(*) FROM block_names WHERE block NOT IN "
                      "(SELECT block FROM blocks)"),
            "0\n");
}

TEST_F(MpiCompact, RefusesADatabaseMadeAnotherWay) {
  const std::string db = tmp_.Sub("k2.tdb");
  ASSERT_EQ(Sh(MpiCompactCmd(2, tmp_.Sub("trace"), db)), 0);
  std::string out;
  EXPECT_NE(Sh(MpiCompactCmd(3, tmp_.Sub("trace"), db), &out), 0);
  EXPECT_NE(out.find("made by an MPI compaction of 2 processes"), std::string::npos) << out;
  EXPECT_NE(Sh(ShellQuote(TracedbBin()) + " compact " + ShellQuote(tmp_.Sub("trace")) + " -o " +
                   ShellQuote(db),
               &out),
            0);
  EXPECT_NE(out.find("made by `compact --mpi`"), std::string::npos) << out;
  EXPECT_NE(Sh(MpiCompactCmd(2, tmp_.Sub("trace"), one_), &out), 0);
  EXPECT_NE(out.find("single-process compaction"), std::string::npos) << out;
  ExpectSameTables(one_, db);  // untouched by the refused runs
}

// The MPI side's arguments are CLI11's, as `tracedb compact` declares them: a missing directory
// or output is exit 2 with one message (process 0's, not one per process), and nothing written.
TEST_F(MpiCompact, BadArgumentsExitTwoWithOneMessage) {
  const std::string helper =
      (std::filesystem::path(TracedbBin()).parent_path() / "tracedb-mpi-compact").string();
  const std::string db = tmp_.Sub("bad.tdb");
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  std::string out;
  EXPECT_EQ(Sh(Mpirun(2) + ShellQuote(helper) + " --mpi " + ShellQuote(tmp_.Sub("nope")) + " -o " +
                   ShellQuote(db),
               &out),
            2);
  EXPECT_EQ(count(out, "tracedb compact --mpi: "), 1u) << out;
  EXPECT_NE(out.find(tmp_.Sub("nope")), std::string::npos) << out;
  EXPECT_EQ(Sh(Mpirun(2) + ShellQuote(helper) + " --mpi " + ShellQuote(tmp_.Sub("trace")), &out),
            2);
  EXPECT_EQ(count(out, "tracedb compact --mpi: "), 1u) << out;
  EXPECT_NE(out.find("--output"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(db));
}

// The processes descending from `root` (children first found, any depth), from /proc.
std::vector<pid_t> Descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid)
  DIR* d = opendir("/proc");
  if (d == nullptr) return {};
  while (dirent* e = readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream stat(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t close = line.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t ppid;
    if (rest >> state >> ppid) parent_of.emplace_back(pid, ppid);
  }
  closedir(d);
  std::vector<pid_t> out = {root};
  for (size_t i = 0; i < out.size(); ++i) {
    for (const auto& [pid, ppid] : parent_of) {
      if (ppid == out[i]) out.push_back(pid);
    }
  }
  out.erase(out.begin());
  return out;
}

TEST_F(MpiCompact, KilledAtAnyMomentResumes) {
  // SIGKILL the whole job (mpirun and every compaction process) at random moments, in the
  // shard phase or in the merge; the next run must give the rows of the single compaction.
  std::mt19937 rng(12);
  const std::string db = tmp_.Sub("killed.tdb");
  const std::string cmd = MpiCompactCmd(2, tmp_.Sub("trace"), db) + " -q";
  // The kill moments are drawn over the time a whole run takes on this machine (idle, a run can
  // end before any fixed delay; loaded, it can take seconds).
  RemoveTree(db + ".shards");
  ::unlink(db.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(Sh(cmd), 0);
  const auto run_us = std::max<int64_t>(
      20000,
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  int killed = 0;
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    RemoveTree(db + ".shards");
    ::unlink(db.c_str());
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1").c_str(), nullptr);
      ::_exit(127);
    }
    ::usleep(static_cast<useconds_t>(rng() % static_cast<uint64_t>(run_us * 9 / 10)));
    // Freeze the tree, then kill it: nothing gets to clean up.
    std::vector<pid_t> tree = Descendants(pid);
    ::kill(pid, SIGSTOP);
    for (pid_t p : tree) ::kill(p, SIGSTOP);
    for (pid_t p : Descendants(pid)) tree.push_back(p);
    for (pid_t p : tree) ::kill(p, SIGKILL);
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    killed += WIFSIGNALED(status);
    ASSERT_EQ(Sh(MpiCompactCmd(2, tmp_.Sub("trace"), db)), 0);
    ExpectSameTables(one_, db);
  }
  EXPECT_GT(killed, 0);
  // Killed while process 0 created the database, before its schema committed: the file is an
  // SQLite database without tables, as good as none.
  RemoveTree(db + ".shards");
  ::unlink(db.c_str());
  {
    auto empty = engine::Db::Open(db, engine::Db::Mode::kCreate);
    ASSERT_TRUE(empty.ok());
    ASSERT_TRUE((*empty)->Exec("CREATE TABLE t(a); DROP TABLE t;").ok());
  }
  ASSERT_EQ(Sh(MpiCompactCmd(2, tmp_.Sub("trace"), db)), 0);
  ExpectSameTables(one_, db);
}

TEST_F(MpiCompact, ShardsByNodeQueryAsOne) {
  const std::string manifest = tmp_.Sub("nodes.tdb");
  std::string out;
  ASSERT_EQ(Sh(ShellQuote(TracedbBin()) + " compact --shard-by node " +
                   ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(manifest),
               &out),
            0);
  EXPECT_NE(out.find("node hostA"), std::string::npos) << out;
  EXPECT_NE(out.find("node hostB"), std::string::npos) << out;
  EXPECT_EQ(access((manifest + ".shards/node-hostA.tdb").c_str(), F_OK), 0);
  EXPECT_EQ(access((manifest + ".shards/node-hostB.tdb").c_str(), F_OK), 0);
  const std::vector<std::string> queries = {
      "SELECT rank, name, cat, ts, dur, depth, lane, bytes, peer, tag, seq, comm, value "
      "FROM events",
      "SELECT count(*), sum(dur), min(ts), max(ts) FROM events",
      "SELECT name, count(*), sum(dur) FROM events GROUP BY name",
      "SELECT rank, name, ts FROM events WHERE name = 'r3.op'",
      "SELECT rank, ts, dur FROM events WHERE ts BETWEEN 1700000012000000000 AND "
      "1700000013000000000",
      "SELECT rank, name, ts, dur FROM events WHERE dur > 5200 AND name = 'r4.op'",
      "SELECT e.rank, e.name, p.name FROM events e JOIN events p ON p.id = e.parent",
      "SELECT * FROM span_stats",
      "SELECT * FROM name_summary",
      "SELECT * FROM step_times",
      "SELECT * FROM clock_alignment",
      "SELECT rank, name, ts, dur FROM spans",
  };
  for (const std::string& q : queries) {
    const std::string want = QueryRows(one_, q), got = QueryRows(manifest, q);
    EXPECT_FALSE(want.empty()) << q;
    EXPECT_EQ(want, got) << q;
  }
  // The command-line path: the same text from `tracedb query` on the manifest.
  std::string a, b;
  const std::string sql = "SELECT name, count(*), sum(dur) FROM events GROUP BY name ORDER BY name";
  ASSERT_EQ(Sh(ShellQuote(TracedbBin()) + " query " + ShellQuote(one_) + " " + ShellQuote(sql), &a),
            0);
  ASSERT_EQ(
      Sh(ShellQuote(TracedbBin()) + " query " + ShellQuote(manifest) + " " + ShellQuote(sql), &b),
      0);
  EXPECT_EQ(a, b);
  // The other readers take the manifest too.
  for (const std::string sub : {"report stragglers", "info"}) {
    ASSERT_EQ(Sh(ShellQuote(TracedbBin()) + " " + sub + " " + ShellQuote(one_), &a), 0) << sub;
    ASSERT_EQ(Sh(ShellQuote(TracedbBin()) + " " + sub + " " + ShellQuote(manifest), &b), 0) << sub;
    if (sub == "info") {  // the path and file size differ; the per-rank table must not
      const size_t at = a.find("rank  host"), bt = b.find("rank  host");
      ASSERT_NE(at, std::string::npos) << a;
      ASSERT_NE(bt, std::string::npos) << b;
      EXPECT_EQ(a.substr(at), b.substr(bt));
    } else {
      EXPECT_EQ(a, b) << sub;
    }
  }
  // A manifest whose shards share a rank (here: one listed twice under two names) is refused.
  const std::string copy = manifest + ".shards/copy-of-hostB.tdb";
  ASSERT_EQ(Sh("cp " + ShellQuote(manifest + ".shards/node-hostB.tdb") + " " + ShellQuote(copy)),
            0);
  {
    auto m = engine::Db::Open(manifest, engine::Db::Mode::kReadWrite);
    ASSERT_TRUE(m.ok());
    ASSERT_TRUE((*m)->Exec("INSERT INTO shards(path, host) VALUES('nodes.tdb.shards/"
                           "copy-of-hostB.tdb', 'hostB')")
                    .ok());
  }
  EXPECT_NE(
      Sh(ShellQuote(TracedbBin()) + " query " + ShellQuote(manifest) + " " + ShellQuote(sql), &b),
      0);
  EXPECT_NE(b.find("is in two shards"), std::string::npos) << b;
}

}  // namespace
}  // namespace tracedb::testing
