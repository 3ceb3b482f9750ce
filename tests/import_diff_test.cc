// Diff tests of the importers: every fixtures/import/<format>/<case>/ holds an input/ directory
// of hand-written traces (each exercising the format's quirks), an optional `args` file (extra
// `tracedb import` arguments), and the expected outcome: expected.csv (every row, decoded from
// the blocks) and expected_tables.csv (ranks, sources, stats, steps, meta). The test runs the
// real `tracedb import` on the inputs and compares. A case whose import must fail holds
// `expected_error` instead: the import exits 1, says that text, and leaves no database behind.
// TRACEDB_REWRITE_EXPECTED=1 rewrites the
// expected files (review the diff before committing them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/db_invariants.h"
#include "tests/db_rows.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string format, name, dir;
};

std::vector<Case> FindCases() {
  std::vector<Case> cases;
  std::error_code ec;
  const fs::path root = fs::path(SourceRoot()) / "fixtures" / "import";
  for (const auto& format : fs::directory_iterator(root, ec)) {
    if (!format.is_directory()) continue;
    for (const auto& c : fs::directory_iterator(format.path(), ec)) {
      if (fs::is_directory(c.path() / "input")) {
        cases.push_back(Case{format.path().filename().string(), c.path().filename().string(),
                             c.path().string()});
      }
    }
  }
  std::sort(cases.begin(), cases.end(), [](const Case& a, const Case& b) { return a.dir < b.dir; });
  return cases;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

class ImportDiff : public ::testing::TestWithParam<Case> {};

TEST_P(ImportDiff, MatchesExpected) {
  const Case& c = GetParam();
  TempDir tmp;
  const std::string db = tmp.Sub("job.tdb");
  std::vector<std::string> inputs;
  for (const auto& e : fs::directory_iterator(fs::path(c.dir) / "input")) {
    inputs.push_back(e.path().string());
  }
  std::sort(inputs.begin(), inputs.end());
  std::string cmd = TracedbBin() + " import";
  for (const std::string& in : inputs) cmd += " '" + in + "'";
  if (fs::exists(fs::path(c.dir) / "args")) cmd += " " + Trim(ReadFile(c.dir + "/args"));
  cmd += " -o '" + db + "'";
  std::string output;
  int rc = 0;
  output = RunCommand(cmd + " 2>&1", &rc);
  if (fs::exists(fs::path(c.dir) / "expected_error")) {
    EXPECT_EQ(rc, 1) << cmd << "\n" << output;
    EXPECT_NE(output.find(Trim(ReadFile(c.dir + "/expected_error"))), std::string::npos)
        << cmd << "\n"
        << output;
    EXPECT_FALSE(fs::exists(db)) << cmd << "\n" << output;
    return;
  }
  EXPECT_EQ(rc, 0) << cmd << "\n" << output;

  const std::string rows = RowsCsv(ReadDbRows(db));
  const std::string tables = TablesCsv(db);
  ExpectDbInvariants(db);  // tests/db_invariants.h: every imported DB
  const bool rewritten = RewriteExpected(c.dir + "/expected.csv", rows);
  if (RewriteExpected(c.dir + "/expected_tables.csv", tables) || rewritten) return;
  EXPECT_EQ(rows, ReadFile(c.dir + "/expected.csv")) << cmd << "\n" << output;
  EXPECT_EQ(tables, ReadFile(c.dir + "/expected_tables.csv")) << cmd << "\n" << output;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ImportDiff, ::testing::ValuesIn(FindCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.format + "_" + info.param.name;
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(ImportDiff, EveryFormatHasCases) {
  std::vector<std::string> formats;
  for (const Case& c : FindCases()) formats.push_back(c.format);
  for (const char* f : {"bluefog", "byteps", "chrome", "horovod", "kineto"}) {
    EXPECT_NE(std::find(formats.begin(), formats.end(), f), formats.end()) << f;
  }
}

}  // namespace
}  // namespace tracedb::testing
