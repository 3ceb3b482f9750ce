// Diff tests of the MPI text-profile importers: each case folder under fixtures/import/<format>/
// holds hand-made input files and expected.csv; the inputs are imported in name order into a
// fresh database, and the import outcomes plus the tables they fill (DumpImportTables) must equal
// expected.csv byte for byte. TRACEDB_REWRITE_EXPECTED=1 rewrites expected.csv instead (review the
// diff before committing it).
// Thread safety: test code, one thread.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "query/import/mpip/mpip_importer.h"
#include "query/import/mpitrace/mpitrace_importer.h"
#include "tests/db_rows.h"
#include "tests/mpi_profile_test_util.h"
#include "tests/test_util.h"

namespace tracedb::query {
namespace {

std::string RunCase(const std::string& format, const std::string& dir) {
  std::unique_ptr<Importer> importer =
      format == "mpitrace" ? NewMpitraceImporter() : NewMpipImporter();
  testing::TempDir tmp;
  testing::ProfileDb db(tmp.Sub("case.tdb"));
  const std::string strip = dir + "/";
  std::string out;
  for (const std::string& file : testing::ListFiles(dir)) {
    if (file.ends_with("/expected.csv")) continue;
    const testing::ImportOutcome o = db.Import(importer.get(), file);
    out += "# import " + file.substr(strip.size()) + ": ";
    if (!o.status.ok()) {
      std::string msg = o.status.ToString();
      for (size_t at = msg.find(strip); at != std::string::npos; at = msg.find(strip, at)) {
        msg.erase(at, strip.size());
      }
      out += msg + "\n";
      continue;
    }
    out += "OK rank=" + std::to_string(o.result.rank) +
           " events=" + std::to_string(o.result.events) +
           " skipped=" + std::to_string(o.result.skipped) +
           " truncated_bytes=" + std::to_string(o.result.truncated_bytes) + "\n";
    for (const std::string& w : o.result.warnings) {
      out += "# warning: " + (w.starts_with(strip) ? w.substr(strip.size()) : w) + "\n";
    }
  }
  return out + testing::DumpImportTables(&db, strip);
}

void CheckCase(const std::string& format, const std::string& name) {
  const std::string dir = testing::SourceRoot() + "/fixtures/import/" + format + "/" + name;
  const std::string actual = RunCase(format, dir);
  const std::string expected_path = dir + "/expected.csv";
  if (testing::RewriteExpected(expected_path, actual)) return;
  const std::string expected = testing::ReadFile(expected_path);
  ASSERT_FALSE(expected.empty()) << expected_path << " is missing";
  EXPECT_EQ(expected, actual) << "import of " << dir << " differs from expected.csv";
}

TEST(MpiProfileDiffTest, MpitraceOldHpctwDialect) { CheckCase("mpitrace", "hpctw_old"); }
TEST(MpiProfileDiffTest, MpitraceNewDialect) { CheckCase("mpitrace", "mpitrace_new"); }
TEST(MpiProfileDiffTest, MpitraceMalformedLines) { CheckCase("mpitrace", "malformed"); }
TEST(MpiProfileDiffTest, MpitraceTruncatedFiles) { CheckCase("mpitrace", "truncated"); }
TEST(MpiProfileDiffTest, Mpip34Layout) { CheckCase("mpip", "v34"); }
TEST(MpiProfileDiffTest, Mpip35Layout) { CheckCase("mpip", "v35"); }
TEST(MpiProfileDiffTest, MpipMalformedLines) { CheckCase("mpip", "malformed"); }
TEST(MpiProfileDiffTest, MpipTruncatedReport) { CheckCase("mpip", "truncated"); }

}  // namespace
}  // namespace tracedb::query
