// Diff tests: for each case in fixtures/diff/<case>/, segment files are written from
// input.spec, compacted with the real `tracedb compact`, and every <name>.sql is run with
// `tracedb query --format csv`; the output must equal <name>.csv byte for byte.
// TRACEDB_REWRITE_EXPECTED=1 rewrites the .csv files instead (tests/db_rows.h RewriteExpected;
// review the diff before committing).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "tests/db_rows.h"
#include "tests/segment_fixture.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;

class DiffTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DiffTest, MatchesGolden) {
  const std::string dir = GetParam();
  const std::string bin = TracedbBin();
  TempDir tmp;
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), ReadFile(dir + "/input.spec")).ok());
  const std::string db = tmp.Sub("job.tdb");
  int status = 0;
  const std::string log = RunCommand(bin + " compact " + ShellQuote(tmp.Sub("trace")) + " -o " +
                                         ShellQuote(db) + " --finish -q 2>&1",
                                     &status);
  ASSERT_EQ(status, 0) << log;
  std::vector<fs::path> queries;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".sql") queries.push_back(e.path());
  }
  std::sort(queries.begin(), queries.end());
  ASSERT_FALSE(queries.empty());
  for (const fs::path& q : queries) {
    const std::string got = RunCommand(
        bin + " query " + ShellQuote(db) + " " + ShellQuote(ReadFile(q)) + " --format csv 2>&1",
        &status);
    EXPECT_EQ(status, 0) << q << ": " << got;
    fs::path golden = q;
    golden.replace_extension(".csv");
    if (RewriteExpected(golden.string(), got)) continue;
    ASSERT_TRUE(fs::exists(golden)) << golden << " missing; run with TRACEDB_REWRITE_EXPECTED=1";
    EXPECT_EQ(got, ReadFile(golden)) << q;
  }
  // The stock integrity check passes on what compaction wrote.
  const std::string check =
      RunCommand("sqlite3 " + ShellQuote(db) + " 'PRAGMA integrity_check' 2>&1", &status);
  EXPECT_EQ(check, "ok\n");
}

std::vector<std::string> Cases() {
  std::vector<std::string> cases;
  const fs::path root = fs::path(SourceRoot()) / "fixtures" / "diff";
  if (!fs::exists(root)) return cases;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory()) cases.push_back(e.path().string());
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DiffTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return fs::path(i.param).filename().string();
                         });

}  // namespace
}  // namespace tracedb::testing
