// The Chrome exporter end to end: databases compacted by the real `tracedb compact` from known
// segments (or written with TraceWriter for what segments cannot hold), exported by the real
// `tracedb export --chrome`, then parsed by Python's json module and node's JSON.parse
// (tests/chrome_export_check.py) and compared, event by event and to the nanosecond, with what
// `tracedb query` returns for the same selection written in SQL.
#include "query/export/chrome_exporter.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "engine/db/db_schema.h"
#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "tests/segment_fixture.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;
using query::ChromePartPath;

constexpr int kSteps = 400;
constexpr int64_t kEpoch = 1700000000000000000;  // the spec's realtime anchor
constexpr int64_t kStepNs = 1000000;             // one step per ms

// Names with every kind of character a JSON writer must escape or repair.
constexpr const char kQuoteName[] =
    "say \"hi\" \\ back\\slash\ttab\x01"
    "ctl, comma";
constexpr const char kBadUtf8Name[] = "bad \xff\xe2\x82 end \xc3\xa9 \xf0\x9f\x98\x80 \xed\xa0\x80";

// Two ranks of kSteps steps each. Per step on the trainer thread: forward and backward spans,
// an MPI_Isend and its MPI_Wait (one request flow), an instant, a counter, spans named with
// odd characters, an MPI_Issend completed by an MPI_Test on the comm thread; on the comm thread
// a COMMUNICATE span on a lane and an MPI_Irecv, completed by an MPI_Wait on even steps only
// (odd steps leave a flow end without its partner).
std::string JobSpec() {
  std::string s;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    s += "file trace " + r + " " + std::to_string(100 + rank) + " 0 host=node" + r + " world=2\n";
    s += "anchor " + std::to_string(kEpoch) + " 0\n";
    s += "string 1 forward\nstring 2 COMMUNICATE\nstring 3 MPI_Isend\nstring 4 MPI_Wait\n";
    s += "string 5 marker\nstring 6 loss\nstring 7 tensor.0\n";
    s += std::string("string 8 ") + kQuoteName + "\n";
    s += std::string("string 9 ") + kBadUtf8Name + "\n";
    s += "string 10 MPI_Irecv\nstring 11 backward\nstring 12 MPI_Issend\nstring 13 MPI_Test\n";
    s += "thread 1 " + std::to_string(4242 + rank) + " trainer\n";
    s += "thread 2 " + std::to_string(5000 + rank) + " comm worker\n";
    s += "lane 1 7\n";
    s += "events 1\n";
    for (int k = 0; k < kSteps; ++k) {
      const int64_t b = 1000 + k * kStepNs + rank * 3;
      auto at = [&](int64_t off) { return std::to_string(b + off); };
      const std::string peer = std::to_string(1 - rank);
      const std::string flow = std::to_string(2 * k + 1);
      s += "S " + at(0) + " " + std::to_string(k) + "\n";
      s += "B " + at(10) + " 1 cat=1\n";
      s += "X " + at(100) + " " + std::to_string(250 + k) +
           " 3 cat=4 bytes=" + std::to_string(4096 * (k % 5 + 1)) + " peer=" + peer +
           " tag=7 comm=3 flow=" + flow + "\n";
      s += "E " + at(400) + " 1\n";
      s += "B " + at(500) + " 11 cat=1\n";
      s += "X " + at(600) + " 17 4 cat=4 flow=" + flow + "\n";
      s += "E " + at(700 + k % 7) + " 11\n";
      s += "I " + at(800) + " 5\n";
      s += "C " + at(900) + " 6 " + std::to_string(1.0 / (k + 1)) + "\n";
      s += "X " + at(1000) + " 123 8\n";
      s += "X " + at(1200) + " 5 9 cat=0\n";
      s += "X " + at(1300) + " 40 12 cat=4 flow=" + std::to_string(10000 + k) + "\n";
    }
    s += "events 2\n";
    for (int k = 0; k < kSteps; ++k) {
      const int64_t b = 1000 + k * kStepNs + rank * 3;
      const std::string flow = std::to_string(2 * k + 2);
      s +=
          "X " + std::to_string(b + 50) + " 30001 2 cat=2 lane=1 bytes=" + std::to_string(k) + "\n";
      s += "X " + std::to_string(b + 31000) + " 1 10 cat=4 peer=0 flow=" + flow + "\n";
      if (k % 2 == 0) s += "X " + std::to_string(b + 40000) + " 999 4 cat=4 flow=" + flow + "\n";
      s +=
          "X " + std::to_string(b + 45000) + " 3 13 cat=4 flow=" + std::to_string(10000 + k) + "\n";
    }
    const int64_t end = int64_t{10} * 1000000000;
    s += "anchor " + std::to_string(kEpoch + end) + " " + std::to_string(end) + "\n";
    s += "end\n";
  }
  return s;
}

constexpr int64_t kEventsPerRank = kSteps * 12 + kSteps / 2;
constexpr int64_t kEvents = 2 * kEventsPerRank;
constexpr int64_t kRequestFlows = 2 * (kSteps + kSteps / 2 + kSteps);
constexpr int64_t kUnmatchedEnds = 2 * (kSteps / 2);

std::string Checker() { return SourceRoot() + "/tests/chrome_export_check.py"; }

struct Result {
  int rc = 0;
  std::string out;
};

Result Tracedb(const std::string& args) {
  Result r;
  r.out = RunCommand(TracedbBin() + " " + args + " 2>&1", &r.rc);
  return r;
}

// The events `tracedb query` returns for `where`, as CSV in `path`. `with` may name a CTE `w`.
void ExpectCsv(const std::string& db, const std::string& where, const std::string& path,
               const std::string& with = "") {
  std::string sql = with +
                    " SELECT rank, track, name, cat, kind, ts, dur, bytes, peer, tag, "
                    "comm, seq, flow, value, args FROM events" +
                    (with.empty() ? "" : ", w") + (where.empty() ? "" : " WHERE " + where);
  int rc = 0;
  const std::string out = RunCommand(TracedbBin() + " query " + ShellQuote(db) + " " +
                                         ShellQuote(sql) + " --format csv > " + ShellQuote(path),
                                     &rc);
  ASSERT_EQ(rc, 0) << sql << "\n" << out;
}

Result Check(const std::vector<std::string>& files, const std::string& extra) {
  std::string cmd = ShellQuote(Python3Bin()) + " " + ShellQuote(Checker()) + " --node " + extra;
  for (const std::string& f : files) cmd += " " + ShellQuote(f);
  Result r;
  r.out = RunCommand(cmd + " 2>&1", &r.rc);
  return r;
}

int64_t Count(const std::string& out, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("(^|\n)" + key + " ([0-9]+)"))) return -1;
  return std::stoll(m[2]);
}

int64_t CsvRows(const std::string& path) {
  int rc = 0;
  const std::string out =
      RunCommand(ShellQuote(Python3Bin()) +
                     " -c 'import csv,sys; print(sum(1 for _ in csv.DictReader(open(sys.argv[1], "
                     "encoding=\"utf-8\", errors=\"replace\", newline=\"\"))))' " +
                     ShellQuote(path),
                 &rc);
  return rc == 0 ? std::stoll(out) : -1;
}

class ChromeExportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    db_ = tmp_->Sub("job.tdb");
    ASSERT_TRUE(WriteSegmentsFromSpec(tmp_->path(), JobSpec()).ok());
    Result r =
        Tracedb("compact " + ShellQuote(tmp_->Sub("trace")) + " -o " + ShellQuote(db_) + " -q");
    ASSERT_EQ(r.rc, 0) << r.out;
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  std::string Out(const std::string& name) const { return dir_.Sub(name); }

  // Exports with `args`, builds the expected rows with `where`, checks; returns the checker's
  // report.
  Result ExportAndCompare(const std::string& args, const std::string& where,
                          const std::string& with = "") {
    const std::string out = Out("slice.json");
    Result e =
        Tracedb("export --chrome " + ShellQuote(db_) + " -o " + ShellQuote(out) + " " + args);
    EXPECT_EQ(e.rc, 0) << args << "\n" << e.out;
    const std::string csv = Out("expected.csv");
    ExpectCsv(db_, where, csv, with);
    Result c = Check({out}, "--expect " + ShellQuote(csv));
    EXPECT_EQ(c.rc, 0) << args << "\n" << c.out;
    EXPECT_EQ(Count(c.out, "events"), CsvRows(csv)) << args;
    c.out += e.out;  // the export's summary after the report
    return c;
  }

  static TempDir* tmp_;
  static std::string db_;
  TempDir dir_;
};

TempDir* ChromeExportTest::tmp_ = nullptr;
std::string ChromeExportTest::db_;

TEST_F(ChromeExportTest, EveryEventOnceToTheNanosecondWithMetadataAndFlows) {
  Result r = ExportAndCompare("", "");
  EXPECT_EQ(Count(r.out, "events"), kEvents);
  // Per file: 2 ranks x (process_name, process_sort_index) + 3 tracks per rank x 2.
  EXPECT_EQ(Count(r.out, "metadata"), 2 * 2 + 2 * 3 * 2);
  EXPECT_EQ(Count(r.out, "flows"), kRequestFlows);
  // Each request flow runs from the Isend (or Irecv) to its Wait, on the same rank.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m,
                                std::regex("flow flow MPI_Isend s=0,([0-9]+),([0-9]+) "
                                           "f=0,([0-9]+),([0-9]+)")))
      << r.out.substr(0, 2000);
  EXPECT_EQ(m[1], m[3]);                                // both on the trainer thread
  EXPECT_EQ(std::stoll(m[4]) - std::stoll(m[2]), 500);  // Isend at +100, Wait at +600
  EXPECT_NE(r.out.find("flow flow MPI_Irecv s=1,"), std::string::npos);
  // A request completed on another thread: the arrow crosses threads.
  ASSERT_TRUE(std::regex_search(r.out, m,
                                std::regex("flow flow MPI_Issend s=1,([0-9]+),([0-9]+) "
                                           "f=1,([0-9]+),([0-9]+)")));
  EXPECT_NE(m[1], m[3]);
  EXPECT_EQ(std::stoll(m[4]) - std::stoll(m[2]), 45000 - 1300);
  EXPECT_NE(r.out.find("exported " + std::to_string(kEvents / 1000) + ",000 of " +
                       std::to_string(kEvents / 1000) + ",000 events"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("400 ends without a partner"), std::string::npos) << r.out;
  static_assert(kUnmatchedEnds == 400);
  // The process names carry the host; the file opens with the traceEvents array.
  const std::string json = ReadFile(Out("slice.json"));
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u);
  EXPECT_NE(json.find("\"args\":{\"name\":\"rank 1 (node1)\"}"), std::string::npos);
  // Thread names, then the track's ids in the database (tracedb_tid…: `tracedb import` finds
  // the same tracks again).
  EXPECT_NE(json.find("\"args\":{\"name\":\"comm worker\",\"tracedb_tid\":"), std::string::npos);
  // Strings are escaped, and ill-formed UTF-8 becomes U+FFFD per maximal subpart.
  EXPECT_NE(json.find(R"("name":"say \"hi\" \\ back\\slash\ttab\u0001ctl, comma")"),
            std::string::npos);
  EXPECT_NE(json.find("\"name\":\"bad \xef\xbf\xbd\xef\xbf\xbd end \xc3\xa9 \xf0\x9f\x98\x80 "
                      "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""),
            std::string::npos);
  // Exact times: µs with the ns digits, from the job's first event (rank 0's forward at +1010).
  EXPECT_NE(json.find("\"ts\":0.09,\"dur\":0.25,\"name\":\"MPI_Isend\""), std::string::npos);
  EXPECT_NE(json.find("\"ts_origin_ns\":" + std::to_string(kEpoch + 1010)), std::string::npos);
  // otherData carries the job's metadata.
  EXPECT_NE(json.find("\"meta\":{\"format\":\"tracedb\""), std::string::npos);
  EXPECT_NE(json.find("\"source_db\":"), std::string::npos);
}

TEST_F(ChromeExportTest, FiltersGiveExactlyTheExpectedSubsets) {
  const std::string step_lo =
      "(SELECT min(s.ts) FROM steps s WHERE s.rank = events.rank AND s.step >= ";
  const std::string step_hi =
      "(SELECT min(s.ts) FROM steps s WHERE s.rank = events.rank AND s.step > ";
  auto overlap = [](const std::string& lo, const std::string& hi) {
    return "ts < " + hi + " AND (ts + dur > " + lo + " OR ts >= " + lo + ")";
  };
  const int64_t lo = kEpoch + 100 * kStepNs + 1450, hi = kEpoch + 200 * kStepNs + 1105;
  struct Case {
    std::string args, where, with;
  } cases[] = {
      {"--ranks 1", "rank = 1", ""},
      {"--ranks 1,0", "", ""},
      {"--ranks 0-0", "rank = 0", ""},
      // Absolute ns; spans cut by the window's edges are kept.
      {"--from " + std::to_string(lo) + " --to " + std::to_string(hi),
       overlap(std::to_string(lo), std::to_string(hi)), ""},
      // Relative to the job start, then +DURATION after --from.
      {"--from 100.00045ms --to +100000655ns", overlap("w.lo", "w.lo + 100000655"),
       "WITH w AS (SELECT min(ts) + 100000450 AS lo FROM events)"},
      {"--to 2.5ms", overlap("-1", "w.t"), "WITH w AS (SELECT min(ts) + 2500000 AS t FROM events)"},
      // Steps, rank by rank.
      {"--from step:100 --to step:119", overlap(step_lo + "100)", step_hi + "119)"), ""},
      {"--from step:390", overlap(step_lo + "390)", "9223372036854775807"), ""},
      {"--to step:5", "ts < " + step_hi + "5)", ""},
      {"--from step:10 --to +1ms", overlap(step_lo + "10)", step_lo + "10) + 1000000"), ""},
      // Names (fnmatch globs) and categories.
      {"--names 'MPI_*'", "name GLOB 'MPI_*'", ""},
      {"--names 'forward,COMM*'", "(name GLOB 'forward' OR name GLOB 'COMM*')", ""},
      {"--names 'say*' --names '*_[IW]*'", "(name GLOB 'say*' OR name GLOB '*_[IW]*')", ""},
      {"--cat mpi", "cat = 'mpi'", ""},
      {"--cat comm,compute", "cat IN ('comm', 'compute')", ""},
      {"--cat nosuchcat", "0", ""},
      {"--ranks 0 --names 'MPI_W*' --cat mpi --from step:10 --to step:20",
       "rank = 0 AND name GLOB 'MPI_W*' AND cat = 'mpi' AND " +
           overlap(step_lo + "10)", step_hi + "20)"),
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    Result r = ExportAndCompare(c.args, c.where, c.with);
    const int64_t n = Count(r.out, "events");
    if (c.where == "0") {
      EXPECT_EQ(n, 0);
    } else if (!c.where.empty()) {
      EXPECT_GT(n, 0);
      EXPECT_LT(n, kEvents);
    } else {
      EXPECT_EQ(n, kEvents);
    }
  }
}

TEST_F(ChromeExportTest, SplitsIntoCompleteFilesUnderTheLimit) {
  const std::string out = Out("split.json");
  // Parts of an earlier, larger export to the same name must not survive.
  for (int k = 1; k <= 50; ++k) WriteFile(ChromePartPath(out, k), "stale");
  Result e =
      Tracedb("export --chrome " + ShellQuote(db_) + " -o " + ShellQuote(out) + " --max-mb 0.2");
  ASSERT_EQ(e.rc, 0) << e.out;
  std::vector<std::string> files;
  for (uint64_t k = 0; fs::exists(ChromePartPath(out, k)); ++k) {
    files.push_back(ChromePartPath(out, k));
    EXPECT_LE(fs::file_size(files.back()), 200000u) << files.back();
  }
  ASSERT_GE(files.size(), 4u) << e.out;
  EXPECT_EQ(files[1], Out("split.1.json"));
  EXPECT_FALSE(fs::exists(ChromePartPath(out, 50)));
  EXPECT_LT(files.size(), 20u);
  const std::string csv = Out("all.csv");
  ExpectCsv(db_, "", csv);
  Result c = Check(files, "--max-bytes 200000 --expect " + ShellQuote(csv));
  ASSERT_EQ(c.rc, 0) << c.out;
  EXPECT_EQ(Count(c.out, "events"), kEvents);
  // Every file names its own processes and threads.
  EXPECT_GE(Count(c.out, "metadata"), static_cast<int64_t>(files.size()) * 4);
  // Request flows whose ends landed in two files are not drawn, and are counted.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      e.out, m,
      std::regex("flows: ([0-9,]+) request flows \\([0-9,]+ ends without a partner, "
                 "([0-9,]+) cut by splits\\)")))
      << e.out;
  auto num = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ','), s.end());
    return std::stoll(s);
  };
  EXPECT_EQ(num(m[1]), Count(c.out, "flows"));
  EXPECT_EQ(num(m[1]) + num(m[2]), kRequestFlows);
}

TEST_F(ChromeExportTest, GzipHoldsTheSameBytes) {
  const std::string plain = Out("t.json"), gz = Out("t.json.gz");
  ASSERT_EQ(Tracedb("export --chrome -q " + ShellQuote(db_) + " -o " + ShellQuote(plain)).rc, 0);
  Result e = Tracedb("export --chrome -q " + ShellQuote(db_) + " -o " + ShellQuote(gz));
  ASSERT_EQ(e.rc, 0) << e.out;
  int rc = 0;
  const std::string unzipped = RunCommand("gzip -dc " + ShellQuote(gz), &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_TRUE(unzipped == ReadFile(plain));
  EXPECT_LT(fs::file_size(gz) * 4, fs::file_size(plain));
  // Split and compressed: every part is gzip, parses and holds its share.
  const std::string sgz = Out("s.json.gz");
  ASSERT_EQ(
      Tracedb("export --chrome -q --max-mb 0.3 " + ShellQuote(db_) + " -o " + ShellQuote(sgz)).rc,
      0);
  std::vector<std::string> files;
  for (uint64_t k = 0; fs::exists(ChromePartPath(sgz, k)); ++k) {
    files.push_back(ChromePartPath(sgz, k));
  }
  ASSERT_GE(files.size(), 3u);
  EXPECT_EQ(files[2], Out("s.2.json.gz"));
  const std::string csv = Out("all.csv");
  ExpectCsv(db_, "", csv);
  Result c = Check(files, "--max-bytes 300000 --expect " + ShellQuote(csv));
  EXPECT_EQ(c.rc, 0) << c.out;
}

TEST_F(ChromeExportTest, TimestampsCountFromTheJobStartOrTheEpoch) {
  const std::string csv = Out("all.csv");
  ExpectCsv(db_, "", csv);
  const int64_t start = kEpoch + 1010;  // rank 0's first forward span
  const std::string rel = Out("rel.json"), abs = Out("abs.json");
  ASSERT_EQ(Tracedb("export --chrome -q " + ShellQuote(db_) + " -o " + ShellQuote(rel)).rc, 0);
  ASSERT_EQ(
      Tracedb("export --chrome -q --absolute " + ShellQuote(db_) + " -o " + ShellQuote(abs)).rc, 0);
  std::string json = ReadFile(rel);
  EXPECT_NE(json.find("\"ts_origin_ns\":" + std::to_string(start)), std::string::npos);
  EXPECT_NE(json.find("{\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":0,"), std::string::npos);
  json = ReadFile(abs);
  EXPECT_NE(json.find("\"ts_origin_ns\":0"), std::string::npos);
  EXPECT_NE(json.find("{\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":1700000000000001.01,"),
            std::string::npos);
  // Both read back to the same ns (the checker adds otherData.ts_origin_ns).
  for (const std::string& f : {rel, abs}) {
    Result c = Check({f}, "--expect " + ShellQuote(csv));
    EXPECT_EQ(c.rc, 0) << f << "\n" << c.out;
  }
}

TEST_F(ChromeExportTest, ExtraFlowPairsAreDrawn) {
  // Pairs of event ids picked by SQL: rank 0's first COMMUNICATE -> rank 1's first, and
  // rank 1's first MPI_Irecv -> rank 0's last forward; one pair names an id that does not
  // exist, one an event the rank filter leaves out.
  auto id = [&](const std::string& sql) {
    int rc = 0;
    const std::string out = RunCommand(
        TracedbBin() + " query " + ShellQuote(db_) + " " + ShellQuote(sql) + " --format csv", &rc);
    EXPECT_EQ(rc, 0);
    return std::stoll(out.substr(out.find('\n') + 1));
  };
  const int64_t c0 = id("SELECT min(id) AS id FROM events WHERE rank = 0 AND name = 'COMMUNICATE'");
  const int64_t c1 = id("SELECT min(id) AS id FROM events WHERE rank = 1 AND name = 'COMMUNICATE'");
  const int64_t r1 = id("SELECT min(id) AS id FROM events WHERE rank = 1 AND name = 'MPI_Irecv'");
  const int64_t f0 = id("SELECT max(id) AS id FROM events WHERE rank = 0 AND name = 'forward'");
  auto db = engine::OpenTraceDb(db_, false, true);
  ASSERT_TRUE(db.ok());
  query::ChromeExportOptions o;
  o.output = Out("extra.json");
  o.extra_flows = {{c0, c1}, {r1, f0}, {c0, (int64_t{999} << 32) | 5}};
  query::ChromeExportStats stats;
  ASSERT_TRUE(query::ExportChrome(db->get(), o, &stats).ok());
  EXPECT_EQ(stats.extra_flows_written, 2u);
  EXPECT_EQ(stats.extra_flows_missing, 1u);
  EXPECT_EQ(stats.flows_written, static_cast<uint64_t>(kRequestFlows));
  EXPECT_EQ(stats.events_written, static_cast<uint64_t>(kEvents));
  Result c = Check({o.output}, "");
  ASSERT_EQ(c.rc, 0) << c.out;
  EXPECT_EQ(Count(c.out, "flows"), kRequestFlows + 2);
  // COMMUNICATE starts at +50 on the lane of each rank (rank 1's clock is 3 ns later).
  const std::string t0 = std::to_string(kEpoch + 1050), t1 = std::to_string(kEpoch + 1053);
  EXPECT_TRUE(std::regex_search(
      c.out, std::regex("flow flow message s=0,[0-9]+," + t0 + " f=1,[0-9]+," + t1)))
      << c.out.substr(0, 3000);
  const std::string irecv = std::to_string(kEpoch + 1003 + 31000);
  const std::string fwd = std::to_string(kEpoch + 1010 + (kSteps - 1) * kStepNs);
  EXPECT_TRUE(std::regex_search(
      c.out, std::regex("flow flow message s=1,[0-9]+," + irecv + " f=0,1," + fwd)))
      << c.out.substr(0, 3000);
  // Ends left out by a filter: not drawn, counted.
  o.ranks = {{0, 0}};
  ASSERT_TRUE(query::ExportChrome(db->get(), o, &stats).ok());
  EXPECT_EQ(stats.extra_flows_written, 0u);
  EXPECT_EQ(stats.extra_flows_missing, 3u);
}

TEST_F(ChromeExportTest, OpenRequestFlowsAreBounded) {
  auto db = engine::OpenTraceDb(db_, false, true);
  ASSERT_TRUE(db.ok());
  query::ChromeExportOptions o;
  o.output = Out("bounded.json");
  query::ChromeExportStats all;
  ASSERT_TRUE(query::ExportChrome(db->get(), o, &all).ok());
  EXPECT_EQ(all.flows_written, static_cast<uint64_t>(kRequestFlows));
  EXPECT_EQ(all.flows_unmatched, static_cast<uint64_t>(kUnmatchedEnds));
  // Rows are read track by track within a block, so the MPI_Issend ends of one rank's block
  // (400) wait together for their MPI_Test on the other thread: room for 1000 is enough.
  o.max_open_flows = 1000;
  query::ChromeExportStats enough;
  ASSERT_TRUE(query::ExportChrome(db->get(), o, &enough).ok());
  EXPECT_EQ(enough.flows_written, static_cast<uint64_t>(kRequestFlows));
  // With room for 8, the oldest open ends are dropped: those pairs are lost, and every end is
  // still counted once, drawn or unmatched.
  o.max_open_flows = 8;
  query::ChromeExportStats few;
  ASSERT_TRUE(query::ExportChrome(db->get(), o, &few).ok());
  EXPECT_LT(few.flows_written, static_cast<uint64_t>(kRequestFlows - kSteps));
  EXPECT_GE(few.flows_written, static_cast<uint64_t>(2 * (kSteps + kSteps / 2)));
  EXPECT_EQ(2 * few.flows_written + few.flows_unmatched,
            static_cast<uint64_t>(2 * kRequestFlows + kUnmatchedEnds));
  EXPECT_EQ(few.events_written, static_cast<uint64_t>(kEvents));
  Result c = Check({o.output}, "");
  EXPECT_EQ(c.rc, 0) << c.out;
  EXPECT_EQ(Count(c.out, "flows"), static_cast<int64_t>(few.flows_written));
}

TEST_F(ChromeExportTest, CorruptBlockIsSkippedAndCounted) {
  const std::string db = Out("damaged.tdb");
  fs::copy_file(db_, db);
  // Flip bytes in the middle of rank 1's first block.
  int rc = 0;
  const std::string sql =
      "UPDATE blocks SET data = substr(data, 1, 40) || zeroblob(8) || substr(data, 49) "
      "WHERE block = (SELECT min(block) FROM blocks WHERE rank = 1)";
  RunCommand("sqlite3 " + ShellQuote(db) + " " + ShellQuote(sql), &rc);
  ASSERT_EQ(rc, 0);
  const std::string out = Out("damaged.json");
  Result e = Tracedb("export --chrome " + ShellQuote(db) + " -o " + ShellQuote(out));
  ASSERT_EQ(e.rc, 0) << e.out;
  EXPECT_NE(e.out.find("warning: 1 blocks failed to decode"), std::string::npos) << e.out;
  // Rank 0 is whole.
  const std::string csv = Out("rank0.csv");
  ExpectCsv(db_, "rank = 0", csv);
  const std::string r0 = Out("r0.json");
  ASSERT_EQ(Tracedb("export --chrome -q --ranks 0 " + ShellQuote(db) + " -o " + ShellQuote(r0)).rc,
            0);
  Result c = Check({r0}, "--expect " + ShellQuote(csv));
  EXPECT_EQ(c.rc, 0) << c.out;
  Result all = Check({out}, "");
  EXPECT_EQ(all.rc, 0) << all.out;
  EXPECT_GE(Count(all.out, "events"), kEventsPerRank);
  EXPECT_LT(Count(all.out, "events"), kEvents);
}

TEST_F(ChromeExportTest, ClearErrorsAndExitCodes) {
  auto run = [&](const std::string& args) { return Tracedb("export " + args); };
  const std::string db = ShellQuote(db_);
  const std::string out = ShellQuote(Out("e.json"));
  struct Case {
    std::string args;
    int rc;
    std::string says;
  } cases[] = {
      {db + " -o " + out, 2, "choose the output format: --chrome"},
      // A missing or unreadable input is the work failing (exit 1, docs/cli.md "Exit codes").
      {"--chrome " + ShellQuote(Out("missing.tdb")) + " -o " + out, 1, "no such database"},
      {"--chrome " + ShellQuote(SourceRoot() + "/README.md") + " -o " + out, 1, "README.md"},
      {"--chrome " + db + " -o " + out + " --ranks 1-x", 2, "bad rank list '1-x'"},
      {"--chrome " + db + " -o " + out + " --ranks 3-1", 2, "ends before it starts"},
      {"--chrome " + db + " -o " + out + " --from 2.5parsecs", 2, "unknown unit 'parsecs'"},
      {"--chrome " + db + " -o " + out + " --to step:x", 2, "expected step:N"},
      {"--chrome " + db + " -o " + out + " --from +2s", 0, ""},
      {"--chrome " + db + " -o " + out + " --from 5ms --to 2ms", 2, "empty time window"},
      {"--chrome " + db + " -o " + out + " --max-mb 0.001", 2, "at least 4096 bytes"},
      {"--chrome " + db + " -o " + out + " --max-mb nan", 2, "--max-mb must be positive"},
      // Past uint64 bytes: one file, no limit (the size's conversion was undefined).
      {"--chrome -q " + db + " -o " + out + " --max-mb 1e30", 0, ""},
      {"--chrome " + db + " -o " + db, 2, "is the database itself"},
      {"--chrome " + db + " -o " + ShellQuote(Out("no/such/dir/e.json")), 1,
       "cannot create " + Out("no/such/dir/e.json") + ": No such file or directory"},
  };
  for (const Case& c : cases) {
    Result r = run(c.args);
    EXPECT_EQ(r.rc, c.rc) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << "\n" << r.out;
  }
  // The database is untouched by the attempt to overwrite it.
  EXPECT_EQ(Tracedb("query " + db + " 'SELECT count(*) FROM events' --format csv").out,
            "count(*)\n" + std::to_string(kEvents) + "\n");
  // An output that cannot be written leaves nothing behind.
  EXPECT_FALSE(fs::exists(Out("no/such/dir")));
  // A read-only directory (root can write anywhere: checked only for other users).
  if (::geteuid() != 0) {
    fs::create_directory(Out("ro"));
    fs::permissions(Out("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    Result r = run("--chrome " + db + " -o " + ShellQuote(Out("ro/e.json")));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("Permission denied"), std::string::npos) << r.out;
  }
  // A step bound on a database without step markers.
  const std::string nosteps = Out("nosteps.tdb");
  {
    auto w = engine::TraceWriter::Open(nosteps);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->BeginBatch().ok());
    engine::TrackSpec t;
    const uint32_t track = (*w)->Track(t);
    engine::TraceBuilder b(w->get());
    ASSERT_TRUE(b.Complete(track, kEpoch, 10, (*w)->Intern("x"), 0, nullptr).ok());
    ASSERT_TRUE((*w)->CommitBatch().ok());
  }
  Result r = run("--chrome " + ShellQuote(nosteps) + " -o " + out + " --from step:3");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("no step markers"), std::string::npos) << r.out;
}

// What segments cannot hold: JSON args (valid, nested, broken, with bad UTF-8), a global track,
// names with newlines, events without a category, NaN counters, a thread without a name.
TEST(ChromeExportStrings, ArgsAndNamesStayValidJson) {
  TempDir tmp;
  const std::string db = tmp.Sub("odd.tdb");
  {
    auto w = engine::TraceWriter::Open(db);
    ASSERT_TRUE(w.ok());
    engine::TraceWriter& tw = **w;
    ASSERT_TRUE(tw.BeginBatch().ok());
    engine::TrackSpec thread;
    thread.rank = 3;
    thread.name = "main\n\"thread\"";
    thread.tid = 77;
    thread.local_id = 1;
    const uint32_t t = tw.Track(thread);
    engine::TrackSpec unnamed;
    unnamed.rank = 3;
    unnamed.tid = 78;
    unnamed.local_id = 2;
    const uint32_t u = tw.Track(unnamed);
    engine::TrackSpec global;
    global.rank = 3;
    global.kind = "global";
    global.name = "job markers";
    const uint32_t g = tw.Track(global);
    engine::RankRecord rr;
    rr.rank = 3;
    rr.host = "host \"a\"\\b";
    ASSERT_TRUE(tw.SetRank(rr).ok());
    ASSERT_TRUE(tw.SetMeta("note", "line1\nline2 \x01 \xff").ok());
    engine::TraceBuilder b(&tw);
    const uint32_t cat = tw.Intern("cat \"q\"");
    engine::EventArgs a;
    a.mask = engine::EventArgs::kBytes | engine::EventArgs::kSeq;
    a.bytes = UINT64_MAX;
    a.seq = 42;
    int64_t ts = kEpoch;
    auto x = [&](const std::string& name, const std::string& json, uint32_t c = 0,
                 const engine::EventArgs* args = nullptr) {
      ASSERT_TRUE(b.Complete(t, ts, 1001, tw.Intern(name), c, args, json).ok());
      ts += 2000;
    };
    x("json nested",
      R"({"shape": [1, 2, {"k": null}], "dtype": "f\u00e9\n", "ok": true, )"
      R"("big": -1.5e+300})",
      cat, &a);
    x("json broken", "{\"a\": 1,", cat);
    x("json array", "[1, 2]");
    x("json bad utf8", "{\"s\": \"\xc3\x28 \xe2\x82\", \"\xff\": 1}");
    x("json ctl", std::string("{\"c\": \"a\x01\tb\"}"));
    x("name\nwith newline\r and \x7f", "");
    x("", "");
    ASSERT_TRUE(b.Complete(u, ts, 5, tw.Intern("on unnamed thread"), 0, nullptr).ok());
    ASSERT_TRUE(b.Instant(g, ts + 10, tw.Intern("job started"), cat, nullptr).ok());
    ASSERT_TRUE(b.Instant(t, ts + 20, tw.Intern("thread tick"), 0, nullptr).ok());
    ASSERT_TRUE(b.Counter(t, ts + 30, tw.Intern("loss"), 0, std::nan("")).ok());
    ASSERT_TRUE(b.Counter(t, ts + 40, tw.Intern("loss"), 0, 1e-7).ok());
    ASSERT_TRUE(b.Counter(t, ts + 50, tw.Intern("loss"), 0, INFINITY).ok());
    ASSERT_TRUE(b.Counter(t, ts + 60, tw.Intern("loss"), 0, -2.5).ok());
    ASSERT_TRUE(tw.CommitBatch().ok());
  }
  const std::string out = tmp.Sub("odd.json");
  Result e = Tracedb("export --chrome " + ShellQuote(db) + " -o " + ShellQuote(out));
  ASSERT_EQ(e.rc, 0) << e.out;
  EXPECT_NE(e.out.find("2 NaN/inf counters"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("warning: 2 events had JSON args that are not an object"), std::string::npos)
      << e.out;
  const std::string csv = tmp.Sub("odd.csv");
  // NaN reads back as NULL, infinity as inf: neither has a JSON form.
  ExpectCsv(db, "kind != 'counter' OR abs(value) < 1e300", csv);
  Result c = Check({out}, "--expect " + ShellQuote(csv));
  EXPECT_EQ(c.rc, 0) << c.out << "\n" << ReadFile(out);
  EXPECT_EQ(Count(c.out, "events"), 12);
  EXPECT_EQ(Count(c.out, "global_instants"), 1);
  const std::string json = ReadFile(out);
  EXPECT_NE(json.find("\"args\":{\"name\":\"rank 3 (host \\\"a\\\"\\\\b)\"}"), std::string::npos);
  EXPECT_NE(json.find("\"args\":{\"name\":\"thread 78\""), std::string::npos);
  EXPECT_NE(json.find(R"("args":{"bytes":18446744073709551615,"seq":42,"shape":[1,2,{"k":null}])"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("args":{"args_text":"{\"a\": 1,"})"), std::string::npos);
  EXPECT_NE(json.find(R"("args":{"loss":1e-07})"), std::string::npos);
  EXPECT_NE(json.find("\"note\":\"line1\\nline2 \\u0001 \xef\xbf\xbd\""), std::string::npos);
}

// Memory stays flat: a 5x larger trace exports within 4 MB of the smaller one's peak.
TEST(ChromeExportMemory, PeakRssDoesNotGrowWithTheTrace) {
  if (access("/usr/bin/time", X_OK) != 0) GTEST_SKIP() << "/usr/bin/time is not installed";
  TempDir tmp;
  auto make = [&](const std::string& path, int rows) {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok());
    engine::TraceWriter& tw = **w;
    ASSERT_TRUE(tw.BeginBatch().ok());
    engine::TraceBuilder b(&tw);
    uint32_t tracks[4];
    for (int i = 0; i < 4; ++i) {
      engine::TrackSpec s;
      s.rank = i % 2;
      s.local_id = i;
      s.name = "t" + std::to_string(i);
      tracks[i] = tw.Track(s);
    }
    const uint32_t names[3] = {tw.Intern("forward"), tw.Intern("backward"), tw.Intern("ALLREDUCE")};
    for (int i = 0; i < rows; ++i) {
      ASSERT_TRUE(
          b.Complete(tracks[i % 4], kEpoch + int64_t{1000} * (i / 4), 777, names[i % 3], 0, nullptr)
              .ok());
      if (i % 200000 == 199999) {
        ASSERT_TRUE(tw.CommitBatch().ok());
        ASSERT_TRUE(tw.BeginBatch().ok());
      }
    }
    ASSERT_TRUE(tw.CommitBatch().ok());
  };
  auto peak_kb = [&](const std::string& db) {
    int rc = 0;
    const std::string out =
        RunCommand("/usr/bin/time -f '%M' " + TracedbBin() + " export --chrome -q " +
                       ShellQuote(db) + " -o " + ShellQuote(tmp.Sub("m.json")) + " 2>&1",
                   &rc);
    EXPECT_EQ(rc, 0) << out;
    return std::stoll(out.substr(out.find_last_of('\n', out.size() - 2) + 1));
  };
  make(tmp.Sub("small.tdb"), 200000);
  make(tmp.Sub("large.tdb"), 1000000);
  const int64_t small = peak_kb(tmp.Sub("small.tdb"));
  const int64_t large = peak_kb(tmp.Sub("large.tdb"));
  EXPECT_GT(fs::file_size(tmp.Sub("m.json")), 60u << 20);  // the large export: ~70 MB of JSON
  RecordProperty("peak_rss_kb_200k", std::to_string(small));
  RecordProperty("peak_rss_kb_1m", std::to_string(large));
  // Relative only: the absolute peak depends on the build (ASan adds shadow memory and
  // redzones, ~50 MB here) and the machine; bench/run_export_bench.sh reports it.
  EXPECT_LT(large, small + 4096) << "peak RSS " << small << " KB -> " << large << " KB";
}

}  // namespace
}  // namespace tracedb::testing
