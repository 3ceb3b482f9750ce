// Round trip: import(export(DB)) keeps every event's rank, track (name and kind), name, ts and
// dur to the nanosecond, its category and typed arguments; counters keep their values. And for
// every imported format: import -> export --chrome -> import gives the same rows, decoded from
// the blocks (tests/db_rows.h), tracks with their ids, flows as flows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "query/open/query_db.h"
#include "tests/db_invariants.h"
#include "tests/db_rows.h"
#include "tests/segment_fixture.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

std::string Rows(const std::string& db, const std::string& sql) {
  auto q = query::OpenQueryDb(db);
  if (!q.ok()) return q.status().ToString();
  auto st = (*q)->Prepare(sql);
  if (!st.ok()) return st.status().ToString();
  std::string out;
  uint64_t n = 0;
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) return row.status().ToString();
    if (!*row) break;
    ++n;
    for (int i = 0; i < st->ColumnCount(); ++i) {
      out += st->IsNull(i) ? "NULL" : std::string(st->Text(i));
      out += i + 1 < st->ColumnCount() ? "|" : "\n";
    }
  }
  return std::to_string(n) + " rows\n" + out;
}

void ExpectRoundTrip(const std::string& db, TempDir& tmp, const std::string& export_flags) {
  int rc = 0;
  const std::string json = tmp.Sub("export.json" + std::string(export_flags.empty() ? "" : ".gz"));
  std::string out = RunCommand(TracedbBin() + " export --chrome " + ShellQuote(db) + " -o " +
                                   ShellQuote(json) + " " + export_flags + " 2>&1",
                               &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string back = tmp.Sub("back.tdb");
  out = RunCommand(
      TracedbBin() + " import " + ShellQuote(json) + " -o " + ShellQuote(back) + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  const char* spans =
      "SELECT rank, track_name, lane IS NOT NULL, name, cat, kind, ts, dur, bytes, peer "
      "FROM events WHERE kind IN ('span', 'instant') "
      "ORDER BY rank, track_name, ts, dur DESC, name";
  // (Depths are not compared: a recorded complete event that started before the span open at
  // its arrival is nested by arrival there and by containment after import.)
  const std::string a = Rows(db, spans), b = Rows(back, spans);
  EXPECT_GT(a.size(), 20u);
  if (a != b) {
    // Report the first differing line, not megabytes of rows.
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    const size_t start = a.rfind('\n', i) == std::string::npos ? 0 : a.rfind('\n', i) + 1;
    ADD_FAILURE() << "first difference:\n  exported: " << a.substr(start, a.find('\n', i) - start)
                  << "\n  imported: " << b.substr(start, b.find('\n', i) - start);
  }
  const char* counters =
      "SELECT rank, name, ts, value FROM events WHERE kind = 'counter' ORDER BY rank, name, ts";
  EXPECT_TRUE(Rows(db, counters) == Rows(back, counters)) << "counters differ";
  ExpectDbInvariants(db);
  ExpectDbInvariants(back);
}

TEST(RoundTrip, RecordedWorkloadSurvivesExportAndImport) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  for (int rank = 0; rank < 2; ++rank) {
    int rc = 0;
    const std::string out =
        RunCommand(std::string(TRACEDB_WORKLOAD_PATH) + " " + ShellQuote(trace) + " 2 400 " +
                       std::to_string(rank) + " 2>&1",
                   &rc);
    ASSERT_EQ(rc, 0) << out;
  }
  const std::string db = tmp.Sub("job.tdb");
  int rc = 0;
  const std::string out = RunCommand(
      TracedbBin() + " compact " + ShellQuote(trace) + " -o " + ShellQuote(db) + " -q 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  ExpectRoundTrip(db, tmp, "");
}

TEST(RoundTrip, NestedSpecSurvivesGzipExportAndImport) {
  TempDir tmp;
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(),
                                    ReadFile(SourceRoot() + "/fixtures/diff/nesting/input.spec"))
                  .ok());
  const std::string db = tmp.Sub("job.tdb");
  int rc = 0;
  const std::string out = RunCommand(TracedbBin() + " compact " + ShellQuote(tmp.Sub("trace")) +
                                         " -o " + ShellQuote(db) + " -q 2>&1",
                                     &rc);
  ASSERT_EQ(rc, 0) << out;
  ExpectRoundTrip(db, tmp, "--absolute");
}

// Every row of a database, order-free and without nesting: a complete event's nesting is
// rebuilt by containment after the round trip, so an instant exactly at its parent's end (a
// Horovod RANK_READY tick closing a negotiation) nests there before and not after. Everything
// else is compared: rank, track kind, name and tid, kind, name, category, ts and dur to the ns,
// typed arguments, counter values and the JSON args.
std::vector<std::string> FlatRows(const std::string& db) {
  std::vector<DbRow> rows = ReadDbRows(db);
  for (DbRow& r : rows) {
    r.depth = 0;
    r.parent.clear();
  }
  const std::string csv = RowsCsv(rows);
  std::vector<std::string> lines;
  size_t at = csv.find('\n') + 1;  // past the header
  while (at < csv.size()) {
    const size_t end = csv.find('\n', at);
    lines.push_back(csv.substr(at, end - at));
    at = end + 1;
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::string TracksOf(const std::string& db) {
  return Rows(db,
              "SELECT rank, kind, name, tid, pid, local_id FROM main.tracks "
              "ORDER BY rank, kind, name, tid, pid, local_id");
}

// import(inputs) -> export --chrome -> import: the same rows and tracks.
void ExpectImportRoundTrip(const std::vector<std::string>& inputs, const std::string& label) {
  SCOPED_TRACE(label);
  TempDir tmp;
  const std::string first = tmp.Sub("first.tdb"), json = tmp.Sub("export.json"),
                    back = tmp.Sub("back.tdb");
  std::string cmd = TracedbBin() + " import";
  for (const std::string& in : inputs) cmd += " " + ShellQuote(in);
  int rc = 0;
  std::string out = RunCommand(cmd + " -o " + ShellQuote(first) + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  out = RunCommand(
      TracedbBin() + " export --chrome " + ShellQuote(first) + " -o " + ShellQuote(json) + " 2>&1",
      &rc);
  ASSERT_EQ(rc, 0) << out;
  out = RunCommand(
      TracedbBin() + " import " + ShellQuote(json) + " -o " + ShellQuote(back) + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::vector<std::string> a = FlatRows(first), b = FlatRows(back);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a.size(), b.size());
  // The first differing row, not thousands of them.
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] != b[i]) {
      ADD_FAILURE() << "row " << i << "\n  imported:   " << a[i] << "\n  round trip: " << b[i];
      break;
    }
  }
  EXPECT_EQ(TracksOf(first), TracksOf(back));
  ExpectDbInvariants(first);
  ExpectDbInvariants(back);
}

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : std::filesystem::directory_iterator(dir)) v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

TEST(RoundTrip, EveryImportedFormatsFixturesSurvive) {
  const std::string root = SourceRoot() + "/fixtures/import/";
  for (const char* c : {"horovod/old_framing", "horovod/new_framing", "horovod/gzip",
                        "bluefog/ranks", "byteps/server", "kineto/distributed_gz",
                        "kineto/older_profiler", "chrome/array_form", "chrome/tracedb_export"}) {
    ExpectImportRoundTrip(FilesIn(root + c + "/input"), c);
  }
  // A BytePS trace directory (one rank per <n>/comm.json) is one input.
  ExpectImportRoundTrip({root + "byteps/trace_dir/input/trace"}, "byteps/trace_dir");
}

// mpitrace and mpiP profiles are tables of totals, not events: the export has no event to
// write, and says why.
TEST(RoundTrip, ProfilesHaveNoEventsAndTheExportSaysSo) {
  const std::string root = SourceRoot() + "/fixtures/import/";
  for (const char* f :
       {"mpitrace/mpitrace_new/mpi_profile.7001.0412093015.0", "mpip/v35/cg.3.27182.1.mpiP"}) {
    SCOPED_TRACE(f);
    TempDir tmp;
    int rc = 0;
    std::string out = RunCommand(TracedbBin() + " import " + ShellQuote(root + f) + " -o " +
                                     ShellQuote(tmp.Sub("p.tdb")) + " 2>&1",
                                 &rc);
    ASSERT_EQ(rc, 0) << out;
    out = RunCommand(TracedbBin() + " export --chrome " + ShellQuote(tmp.Sub("p.tdb")) + " -o " +
                         ShellQuote(tmp.Sub("p.json")) + " 2>&1",
                     &rc);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("holds no events, only MPI profile tables"), std::string::npos) << out;
    EXPECT_TRUE(ReadDbRows(tmp.Sub("p.tdb")).empty());
  }
}

TEST(RoundTrip, RealFilesSurvive) {
  const std::string dir = SharedFixtures();
  if (!std::filesystem::is_directory(dir)) {
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") FAIL() << dir << " is missing and CI=true";
    GTEST_SKIP() << dir << " is absent";
  }
  ExpectImportRoundTrip(FilesIn(dir + "/kineto"), "kineto");
  for (const char* f : {"horovod/andrewor14_horovod_timeline_mpi_allreduce.json",
                        "horovod/alcf_timeline_cpu_n1.json", "byteps/zhtang_comm.json"}) {
    ExpectImportRoundTrip({dir + "/" + f}, f);
  }
}

}  // namespace
}  // namespace tracedb::testing
