// Hostile databases (docs/security.md): a real database damaged on purpose, in the ways a review
// reproduced (counts of -1, 2^62 and lies, string ids of 30M and 4e12, a recursive `meta` view)
// and in others, is opened through every reader (query/fuzz/db_fuzz.h): each must end with a
// result or a described error. Known answers are injected: what each damage must produce (an
// error that names it, a `verify` problem that names it), checked against the damage itself.
// Then seeded random mutations (the libFuzzer target's entry point, as an ordinary test).
// And a top-n search that must stop before a damaged block it does not need.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "engine/verify/verify.h"
#include "query/fuzz/db_fuzz.h"
#include "query/open/query_db.h"
#include "tests/hand_trace.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

using query::fuzz::DbResult;
using query::fuzz::HostileCases;
using query::fuzz::MakeHostileCopy;
using query::fuzz::ReadEverything;

std::vector<std::string> Statements(const std::string& name) {
  for (const auto& [n, st] : HostileCases()) {
    if (n == name) return st;
  }
  ADD_FAILURE() << "no case " << name;
  return {};
}

bool AnyMessageHas(const DbResult& r, const std::string& reader, const std::string& text) {
  for (const std::string& m : r.messages) {
    if (m.rfind(reader, 0) == 0 && m.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string Messages(const DbResult& r) {
  std::string s;
  for (const std::string& m : r.messages) s += "  " + m + "\n";
  return s;
}

// The answer of one integer query through the events table, or the error's message.
std::string QueryOne(const std::string& db, const std::string& sql) {
  auto q = query::OpenQueryDb(db);
  if (!q.ok()) return "error: " + q.status().message();
  auto v = (*q)->QueryInt(sql, -1);
  return v.ok() ? std::to_string(*v) : "error: " + v.status().message();
}

// The plain copy's answer: sqlite3 itself, no tracedb code (a count of rows of a real table).
int64_t PlainInt(const std::string& db, const std::string& sql) {
  sqlite3* d = nullptr;
  int64_t v = -1;
  if (sqlite3_open_v2(db.c_str(), &d, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(d, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close_v2(d);
  return v;
}

TEST(HostileDb, TheUndamagedBaseReadsEverywhereAndVerifies) {
  TempDir tmp;
  const std::string db = tmp.Sub("base.tdb");
  MakeHostileCopy(db, {});
  const DbResult r = ReadEverything(db, tmp.Sub("scratch"));
  EXPECT_TRUE(r.clean) << r.detail;
  EXPECT_EQ(r.errors, 0) << Messages(r);
  auto v = engine::VerifyDb(db);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->ok()) << (v->listed.empty() ? "" : v->listed.front());
  EXPECT_EQ(static_cast<int64_t>(v->events), PlainInt(db, "SELECT sum(count) FROM blocks"));
  EXPECT_EQ(QueryOne(db, "SELECT count(*) FROM events"),
            std::to_string(PlainInt(db, "SELECT sum(count) FROM blocks")));
}

TEST(HostileDb, EveryNamedCaseEndsWithAResultOrADescribedError) {
  TempDir tmp;
  for (const auto& [name, statements] : HostileCases()) {
    SCOPED_TRACE(name);
    const std::string db = tmp.Sub(name + ".tdb");
    MakeHostileCopy(db, statements);
    const DbResult r = ReadEverything(db, tmp.Sub("scratch-" + name));
    EXPECT_TRUE(r.clean) << r.detail;
  }
}

TEST(HostileDb, CountsFromDiskAreCheckedBeforeTheyAreUsed) {
  TempDir tmp;
  for (const char* name : {"negative_and_lying_counts", "count_minus_one", "count_2_62"}) {
    SCOPED_TRACE(name);
    const std::string db = tmp.Sub(std::string(name) + ".tdb");
    MakeHostileCopy(db, Statements(name));
    const DbResult r = ReadEverything(db, tmp.Sub("s"));
    EXPECT_TRUE(r.clean) << r.detail;
    // count(*) and the Python reader: an error naming the block, never 2^62 rows or a write
    // past a buffer.
    EXPECT_TRUE(AnyMessageHas(r, "query SELECT count(*) FROM events", "block 1: its zone map"))
        << Messages(r);
    EXPECT_TRUE(AnyMessageHas(r, "python events()", "zone map")) << Messages(r);
    // export skips the block and counts it: the rest exports.
    EXPECT_FALSE(AnyMessageHas(r, "export", "")) << Messages(r);
  }
  // A count that lies within 1..65536: every reader that decodes the block says so.
  const std::string db = tmp.Sub("lie.tdb");
  MakeHostileCopy(db, Statements("count_lies_within_range"));
  const DbResult r = ReadEverything(db, tmp.Sub("s2"));
  EXPECT_TRUE(AnyMessageHas(r, "python events()", "its zone map says")) << Messages(r);
  EXPECT_TRUE(AnyMessageHas(r, "query SELECT * FROM events LIMIT 300", "its zone map says"))
      << Messages(r);
}

// The top-n search walks a name's blocks longest first and stops once no later block can
// enter: a damaged block (count -1) holding the name's shortest durations is never reached by
// `ORDER BY dur DESC LIMIT 2`, which answers the two longest (written by the test), while a
// query that must read every block of the name reports the damage, naming the block.
TEST(HostileDb, TheTopNStopsBeforeADamagedBlockItDoesNotNeed) {
  TempDir tmp;
  const std::string db = tmp.Sub("topn.tdb");
  {
    // One rank, 4 batches, a block each, every row named "phase": block b's longest is
    // 40,000 - 10,000 b ns, so the walk longest first meets blocks 1, 2, 3, 4 in that order.
    auto w = engine::TraceWriter::Open(db);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    int64_t ts = 1000;
    for (int batch = 0; batch < 4; ++batch) {
      ASSERT_TRUE((*w)->BeginBatch().ok());
      engine::TrackSpec spec;
      spec.rank = 0;
      spec.tid = 1;
      spec.pid = 1;
      const uint32_t track = (*w)->Track(spec);
      for (int i = 0; i < 20; ++i) {
        engine::Row r;
        r.track = track;
        r.k = (*w)->TakeK(track);
        r.ts = ts;
        r.dur = (4 - batch) * 10000 - i * 7;
        ts += r.dur + 10;
        r.name = (*w)->Intern("phase");
        r.cat = (*w)->Intern("cpu");
        ASSERT_TRUE((*w)->AddRow(0, std::move(r)).ok());
      }
      ASSERT_TRUE((*w)->CommitBatch().ok());
    }
  }
  ASSERT_EQ(PlainInt(db, "SELECT count(*) FROM blocks"), 4);
  const int64_t victim = PlainInt(db, "SELECT block FROM blocks ORDER BY max_dur LIMIT 1");
  const int64_t longest = PlainInt(db, "SELECT max(max_dur) FROM blocks");
  ASSERT_EQ(longest, 40000);
  sqlite3* d = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &d), SQLITE_OK);
  const std::string damage = "UPDATE blocks SET count = -1 WHERE block = " + std::to_string(victim);
  EXPECT_EQ(sqlite3_exec(d, damage.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close_v2(d);
  // The top-2 decodes the first block (it holds both) and stops at the second's zone map.
  EXPECT_EQ(QueryOne(db,
                     "SELECT sum(dur) FROM (SELECT dur FROM events WHERE name = 'phase' "
                     "ORDER BY dur DESC LIMIT 2)"),
            std::to_string(40000 + 39993));
  const std::string all = QueryOne(db, "SELECT max(dur + 0) FROM events WHERE name = 'phase'");
  EXPECT_NE(all.find("block " + std::to_string(victim)), std::string::npos) << all;
}

TEST(HostileDb, HugeIdsDoNotSizeAllocations) {
  TempDir tmp;
  for (const char* name :
       {"string_id_30M", "string_id_4e12", "track_id_4e12", "mpi_category_at_4e9"}) {
    SCOPED_TRACE(name);
    const std::string db = tmp.Sub(std::string(name) + ".tdb");
    MakeHostileCopy(db, Statements(name));
    const DbResult r = ReadEverything(db, tmp.Sub("s"));
    EXPECT_TRUE(r.clean) << r.detail;
    // The events are all there; only the out-of-range row is left out.
    EXPECT_EQ(QueryOne(db, "SELECT count(*) FROM events"),
              std::to_string(PlainInt(db, "SELECT sum(count) FROM blocks")));
  }
}

// Peak RSS (KiB) of `tracedb query DB SQL` in a child.
long PeakRssKb(const std::string& db, const std::string& sql) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string bin = TracedbBin();
    if (!freopen("/dev/null", "w", stdout)) _exit(126);
    execl(bin.c_str(), bin.c_str(), "query", "-q", db.c_str(), sql.c_str(), (char*)nullptr);
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  if (wait4(pid, &status, 0, &ru) != pid) return -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? ru.ru_maxrss : -1;
}

TEST(HostileDb, OneStringRowAtId30MillionCostsNoMemory) {
  // Before: 987 MB for count(*) (a dictionary of 30M entries). Compared with the same query
  // on the undamaged file, not with an absolute figure.
  TempDir tmp;
  const std::string base = tmp.Sub("base.tdb"), bad = tmp.Sub("bad.tdb");
  MakeHostileCopy(base, {});
  MakeHostileCopy(bad, Statements("string_id_30M"));
  const std::string sql = "SELECT count(*), count(name) FROM events";
  const long a = PeakRssKb(base, sql), b = PeakRssKb(bad, sql);
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  EXPECT_LT(b, a + 64 * 1024) << "undamaged " << a << " KiB, with id 30000000 " << b << " KiB";
}

TEST(HostileDb, AUsersViewStoredInTheFileStillWorksUnderTrustedSchemaOff) {
  // trusted_schema is off on every connection: tracedb's virtual tables and functions are
  // innocuous (read-only, pure), so a view a user saved in the file keeps working.
  TempDir tmp;
  const std::string db = tmp.Sub("views.tdb");
  MakeHostileCopy(db, {"CREATE VIEW spans_only AS SELECT name, dur FROM events WHERE kind = 'span'",
                       "CREATE VIEW med AS SELECT median(dur) AS m, count(*) AS n FROM events",
                       "CREATE VIEW steps_seen AS SELECT count(*) AS n FROM tracedb_step_times"});
  EXPECT_EQ(QueryOne(db, "SELECT n FROM med"),
            std::to_string(PlainInt(db, "SELECT sum(count) FROM blocks")));
  EXPECT_EQ(QueryOne(db, "SELECT count(*) FROM spans_only"),
            std::to_string(PlainInt(db, "SELECT sum(count) FROM name_stats WHERE kind = 0")));
  EXPECT_EQ(QueryOne(db, "SELECT n > 0 FROM steps_seen"), "1");
}

TEST(HostileDb, ATableReplacedByARecursiveViewIsRefusedAtOpen) {
  TempDir tmp;
  for (const char* name :
       {"recursive_meta_view", "recursive_strings_view", "recursive_placeholder_view"}) {
    SCOPED_TRACE(name);
    const std::string db = tmp.Sub(std::string(name) + ".tdb");
    MakeHostileCopy(db, Statements(name));
    const DbResult r = ReadEverything(db, tmp.Sub("s"));
    EXPECT_TRUE(r.clean) << r.detail;
    EXPECT_TRUE(AnyMessageHas(r, "open", "is a view, not a table")) << Messages(r);
    EXPECT_TRUE(AnyMessageHas(r, "python events()", "is a view, not a table")) << Messages(r);
    int rc = 0;
    const std::string out = RunCommand(TracedbBin() + " export --chrome " + ShellQuote(db) +
                                           " -o " + ShellQuote(tmp.Sub("x.json")) + " 2>&1",
                                       &rc);
    EXPECT_NE(rc, 0) << out;  // (which non-zero code: docs/cli.md "Exit codes")
    EXPECT_NE(out.find("is a view, not a table"), std::string::npos) << out;
  }
}

TEST(HostileDb, VerifyNamesWhatLies) {
  TempDir tmp;
  struct Expect {
    const char* name;
    const char* problem;
  };
  for (const Expect& e : {Expect{"count_lies_within_range", "block 2: zone map count"},
                          Expect{"count_minus_one", "block 1: zone map count -1 is not"},
                          Expect{"zone_map_ts_lies", "block 1: zone map min_ts"},
                          Expect{"zone_map_ts_lies", "block 1: zone map max_dur 0"},
                          Expect{"block_names_missing", "block 1: block_names has no row"},
                          Expect{"name_stats_lie", "name_stats (rank 0"},
                          Expect{"string_id_30M", "strings: id 30000000 is out of range"},
                          Expect{"track_on_other_rank", "events on tracks of another rank"},
                          Expect{"payload_zeroed", "block 1: event block 1"}}) {
    SCOPED_TRACE(e.name);
    const std::string db = tmp.Sub(std::string(e.name) + ".tdb");
    MakeHostileCopy(db, Statements(e.name));
    auto v = engine::VerifyDb(db);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_FALSE(v->ok());
    bool found = false;
    std::string all;
    for (const std::string& l : v->listed) {
      found |= l.find(e.problem) != std::string::npos;
      all += "  " + l + "\n";
    }
    EXPECT_TRUE(found) << "expected \"" << e.problem << "\" among:\n" << all;
  }
}

TEST(HostileDb, VerifyCommandExitsOneAndListsTheProblems) {
  TempDir tmp;
  const std::string good = tmp.Sub("good.tdb"), bad = tmp.Sub("bad.tdb");
  MakeHostileCopy(good, {});
  MakeHostileCopy(bad, Statements("zone_map_ts_lies"));
  int rc = -1;
  std::string out = RunCommand(TracedbBin() + " verify " + ShellQuote(good) + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(": ok ("), std::string::npos) << out;
  out = RunCommand(TracedbBin() + " verify " + ShellQuote(bad) + " 2>&1", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("bad.tdb: block 1: zone map min_ts"), std::string::npos) << out;
  EXPECT_NE(out.find("problems in"), std::string::npos) << out;
  out = RunCommand(TracedbBin() + " verify " + ShellQuote(tmp.Sub("none.tdb")) + " 2>&1", &rc);
  EXPECT_NE(rc, 0) << out;
}

TEST(HostileDb, AHotJournalIsNotRolledBackByAReadOnlyOpen) {
  // A writer that died mid-transaction: its journal holds the pages before the change.
  TempDir tmp;
  const std::string db = tmp.Sub("job.tdb");
  MakeHostileCopy(db, {});
  const std::string before = ReadFile(db);
  // What a read-write open makes of the file as it was: `shell --writable` also makes the
  // tables created when first written tables (docs/database-format.md).
  const std::string pristine = tmp.Sub("pristine.tdb");
  {
    std::ofstream(pristine, std::ios::binary) << before;
    int rc = 0;
    const std::string out = RunCommand(
        TracedbBin() + " shell --writable " + ShellQuote(pristine) + " </dev/null 2>&1", &rc);
    ASSERT_EQ(rc, 0) << out;
  }
  const std::string opened = ReadFile(pristine);
  ASSERT_NE(opened, before);
  const pid_t pid = fork();
  if (pid == 0) {
    sqlite3* d = nullptr;
    sqlite3_open_v2(db.c_str(), &d, SQLITE_OPEN_READWRITE, nullptr);
    sqlite3_exec(d, "PRAGMA cache_size=1; BEGIN; UPDATE blocks SET data = zeroblob(50000);",
                 nullptr, nullptr, nullptr);
    _exit(0);  // no commit, no rollback: the journal stays hot
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(std::filesystem::exists(db + "-journal"));
  const std::string journal = ReadFile(db + "-journal");
  const std::string torn = ReadFile(db);
  ASSERT_NE(torn, before);
  auto q = query::OpenQueryDb(db);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("read-only open never writes"), std::string::npos)
      << q.status().message();
  // Nothing was written: the file and its journal are as the writer left them.
  EXPECT_EQ(ReadFile(db), torn);
  EXPECT_EQ(ReadFile(db + "-journal"), journal);
  // The documented way out: one read-write open rolls it back, and the file reads again.
  int rc = 0;
  const std::string out =
      RunCommand(TracedbBin() + " shell --writable " + ShellQuote(db) + " </dev/null 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(ReadFile(db), opened);
  EXPECT_EQ(QueryOne(db, "SELECT count(*) FROM events"),
            std::to_string(PlainInt(db, "SELECT sum(count) FROM blocks")));
}

// A trace whose events lie `lo` and `hi` apart on `ranks` ranks (a DB made elsewhere; a recorder
// never writes such times): steps 1 and 2 at lo and hi; collective 1 with every rank but the last
// arriving at lo and the last at hi; collective 2 near hi; a message from rank 0 to the last rank,
// received at hi + 60; a span "forward" on every rank but the last. With `extremes`, the early
// ranks' calls of collective 1 last 10 ns and are followed by the message's send and a "forward"
// of the largest duration, and the first and last ranks hold instants at the int64 extremes;
// without, those calls last until the last rank arrives (each rank waits hi - lo there), and the
// send and "forward" come after them.
void WriteFarApart(const std::string& path, int64_t lo, int64_t hi, int ranks, bool extremes) {
  auto w = engine::TraceWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().message();
  engine::TraceWriter* tw = w->get();
  engine::TraceBuilder b(tw);
  ASSERT_TRUE(tw->BeginBatch().ok());
  const uint32_t allreduce = tw->Intern("MPI_Allreduce"), send = tw->Intern("MPI_Send"),
                 recv = tw->Intern("MPI_Recv"), fwd = tw->Intern("forward"),
                 mark = tw->Intern("mark"), mpi = tw->Intern("mpi"), py = tw->Intern("python");
  auto coll = [](uint64_t seq) {
    engine::EventArgs a;
    a.mask = engine::EventArgs::kComm | engine::EventArgs::kSeq | engine::EventArgs::kBytes;
    a.comm = 1;
    a.seq = seq;
    a.bytes = 4096;
    return a;
  };
  auto p2p = [](int32_t peer) {
    engine::EventArgs a;
    a.mask = engine::EventArgs::kPeer | engine::EventArgs::kTag | engine::EventArgs::kBytes |
             engine::EventArgs::kComm;
    a.peer = peer;
    a.tag = 5;
    a.bytes = 100;
    a.comm = 1;
    return a;
  };
  const int32_t last = ranks - 1;
  const engine::EventArgs c1 = coll(1), c2 = coll(2), to_last = p2p(last), from0 = p2p(0);
  for (int32_t r = 0; r < ranks; ++r) {
    const uint32_t t = AddRankTrack(tw, r, ranks, "hostile-db-test");
    ASSERT_NE(t, 0u);
    tw->AddStep(r, lo, 1);
    tw->AddStep(r, hi, 2);
    if (r == 0 && extremes) {
      ASSERT_TRUE(b.Instant(t, INT64_MIN, mark, py, nullptr).ok());
    }
    if (r != last) {
      ASSERT_TRUE(b.Complete(t, lo, extremes ? 10 : hi - lo + 10, allreduce, mpi, &c1).ok());
      const int64_t after = extremes ? lo : hi;
      if (r == 0) {
        ASSERT_TRUE(b.Complete(t, after + 20, 5, send, mpi, &to_last).ok());
      }
      ASSERT_TRUE(b.Complete(t, after + 40, extremes ? INT64_MAX : 20, fwd, py, nullptr).ok());
      ASSERT_TRUE(b.Complete(t, hi + 100, 10, allreduce, mpi, &c2).ok());
    } else {
      ASSERT_TRUE(b.Complete(t, lo + 30, 20, fwd, py, nullptr).ok());
      ASSERT_TRUE(b.Complete(t, hi, 10, allreduce, mpi, &c1).ok());
      ASSERT_TRUE(b.Complete(t, hi + 40, 10, allreduce, mpi, &c2).ok());
      ASSERT_TRUE(b.Complete(t, hi + 60, 5, recv, mpi, &from0).ok());
      if (extremes) {
        ASSERT_TRUE(b.Instant(t, INT64_MAX, mark, py, nullptr).ok());
      }
    }
  }
  ASSERT_TRUE(tw->CommitBatch().ok());
}

// Every reader of the harness, every built-in view read whole, and every command that analyses
// a whole trace (each a process of the binary under test) on `db`: each must end with a result
// or a described error (exit 0, or 1 or 2 with a message). Under UBSan (scripts/test.sh) a signed
// overflow anywhere aborts the process, which fails this.
void ReadEverywhereCleanly(const std::string& db, const std::string& scratch) {
  const DbResult r = ReadEverything(db, scratch);
  EXPECT_TRUE(r.clean) << r.detail;  // (SQLite's sum(dur) ends with "integer overflow": described)
  {
    auto qdb = query::OpenQueryDb(db);
    ASSERT_TRUE(qdb.ok()) << qdb.status().message();
    const std::vector<std::string> views =
        SqlRows(qdb->get(), "SELECT name FROM sqlite_temp_master WHERE type = 'view'");
    EXPECT_GE(views.size(), 25u);
    for (const std::string& v : views) {
      auto st = (*qdb)->Prepare("SELECT * FROM " + v);
      ASSERT_TRUE(st.ok()) << v << ": " << st.status().message();
      while (true) {
        auto row = st->Step();
        if (!row.ok() || !*row) break;  // an error is a described end
      }
    }
  }
  const std::string q = ShellQuote(db), out = ShellQuote(scratch + "-out");
  for (const std::string& args :
       {"info " + q, "report mpi " + q, "report stragglers " + q, "report hang " + q,
        "report html -q -o " + out + ".html " + q, "explain " + q, "explain -f json " + q,
        "top --once " + q, "diff " + q + " " + q, "check --baseline " + q + " " + q,
        "export -q --chrome -o " + out + ".json " + q, "verify " + q}) {
    SCOPED_TRACE(args);
    int rc = -1;
    const std::string text = RunCommand(TracedbBin() + " " + args + " 2>&1", &rc);
    // (check exits 2 when there is nothing to compare: no steps to compare here.)
    EXPECT_TRUE(rc >= 0 && rc <= 2) << "exit " << rc << ":\n" << text;
    EXPECT_EQ(text.find("runtime error"), std::string::npos) << text;
  }
}

// Timestamps at both ends of the int64 range: any difference of two of them passes int64, and
// so does any bin or scale computed from the trace's extent. (Overflows this found: the
// report's overview, skew bins and collective sums, the collective views' late and wait times,
// `report mpi`, the Chrome export's origin, the why analyses.) The why analyses refuse a trace
// that spans more than 2^62 ns with a described error.
TEST(HostileDb, TimestampsAtTheInt64ExtremesReadEverywhere) {
  TempDir tmp;
  const std::string db = tmp.Sub("extremes.tdb");
  WriteFarApart(db, -9'000'000'000'000'000'000, 9'000'000'000'000'000'000, 2, true);
  EXPECT_EQ(QueryOne(db, "SELECT count(*) FROM events"), "10");
  ReadEverywhereCleanly(db, tmp.Sub("scratch"));
  int rc = -1;
  const std::string text = RunCommand(TracedbBin() + " explain " + ShellQuote(db) + " 2>&1", &rc);
  EXPECT_EQ(rc, 1) << text;
  EXPECT_NE(text.find("more than 2^62 ns"), std::string::npos) << text;
}

// Within the why analyses' 2^62 ns, but on 5 ranks: the 4 that wait in collective 1 wait 4e18 ns
// each, so the sums of their waits and costs pass int64 (they saturate).
TEST(HostileDb, WaitsWhoseSumPassesInt64ReadEverywhere) {
  TempDir tmp;
  const std::string db = tmp.Sub("far.tdb");
  WriteFarApart(db, 0, 4'000'000'000'000'000'000, 5, false);
  ReadEverywhereCleanly(db, tmp.Sub("scratch"));
  int rc = -1;
  const std::string text =
      RunCommand(TracedbBin() + " explain -f json " + ShellQuote(db) + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << text;
  // The root cause: rank 4, whose lateness cost the 4 others 1.6e19 ns, past int64: the cost
  // clamps to the int64 maximum (it printed INT64_MIN, llround's result out of range).
  EXPECT_NE(text.find("\"rank\":4,\"name\":\"(no span)\",\"cost_ns\":9223372036854775807,"),
            std::string::npos)
      << text;
  EXPECT_EQ(QueryOne(db, "SELECT cost_ns FROM root_causes WHERE rank = 4"), "9223372036854775807");
}

TEST(HostileDb, SeedCorpusEndsCleanly) {
  // The libFuzzer target's seeds (fixtures/fuzz/hostile_db_fuzz/), one mutation of each kind.
  const std::string dir = SourceRoot() + "/fixtures/fuzz/hostile_db_fuzz";
  int seeds = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    SCOPED_TRACE(e.path().filename().string());
    const std::string bytes = ReadFile(e.path().string());
    const DbResult r =
        query::fuzz::HostileDb(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    EXPECT_TRUE(r.clean) << r.detail;
    if (e.path().filename() == "meta-recursive-view") {
      EXPECT_TRUE(AnyMessageHas(r, "open", "is a view, not a table")) << Messages(r);
    }
    ++seeds;
  }
  EXPECT_GE(seeds, 14);
}

TEST(HostileDb, SeededRandomMutationsEndCleanly) {
  // The libFuzzer entry point on random byte strings (seeded: a failure names its seed).
  const unsigned seed = ::testing::UnitTest::GetInstance()->random_seed();
  std::mt19937 rng(seed);
  int results = 0, errors = 0;
  for (int i = 0; i < 60; ++i) {
    std::vector<uint8_t> bytes(1 + rng() % 24);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    const DbResult r = query::fuzz::HostileDb(bytes.data(), bytes.size());
    ASSERT_TRUE(r.clean) << "seed " << seed << ", input " << i << ": " << r.detail;
    results += r.opened;
    errors += r.errors;
  }
  // A campaign that never reaches a result, or never an error, tests nothing.
  EXPECT_GT(results, 0);
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace tracedb::testing
