// Round trip: import(export(DB)) keeps every event's rank, track (name and kind), name, ts and
// dur to the nanosecond, its category and typed arguments; counters keep their values.
#include <gtest/gtest.h>

#include "query/query_db.h"
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

}  // namespace
}  // namespace tracedb::testing
