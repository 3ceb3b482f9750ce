// Imports every real trace file in ../shared/fixtures/{horovod,byteps,kineto} (written by the
// real systems; see SOURCES.md there) with `tracedb import`, and checks, per (rank, name, kind),
// the number of rows and their total duration against an independent reading of the same file
// by tests/independent_trace_summary.py (Python's json module, its own framing repair and
// begin/end matching). Skipped when the fixtures directory is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/db/sqlite.h"
#include "tests/db_invariants.h"
#include "tests/db_rows.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;

using Key = std::tuple<int32_t, std::string, std::string>;   // rank, name (hex), kind
using Summary = std::map<Key, std::pair<int64_t, int64_t>>;  // count, total dur ns

std::string Hex(const std::string& s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string FixturesDir() { return SharedFixtures(); }

std::vector<std::string> Files(const std::string& format) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(FixturesDir() + "/" + format, ec)) {
    if (e.is_regular_file()) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

Summary FromDb(const std::string& db, std::map<std::string, std::string>* names) {
  Summary s;
  for (const DbRow& r : ReadDbRows(db)) {
    if (r.kind == "counter") continue;
    auto& [count, total] = s[{r.rank, Hex(r.name), r.kind}];
    ++count;
    total += r.dur;
    (*names)[Hex(r.name)] = r.name;
  }
  return s;
}

Summary FromPython(const std::string& format, const std::string& file) {
  Summary s;
  std::string out;
  const std::string cmd = ShellQuote(Python3Bin()) + " '" + SourceRoot() +
                          "/tests/independent_trace_summary.py' " + format + " '" + file + "'";
  int rc = 0;
  out = RunCommand(cmd + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << cmd << "\n" << out;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) f.push_back(cell);
    if (f.size() != 5) {
      ADD_FAILURE() << "bad line from the Python reader: " << line;
      continue;
    }
    s[{std::stoi(f[0]), f[1], f[2]}] = {std::stoll(f[3]), std::stoll(f[4])};
  }
  return s;
}

int64_t Stat(const std::string& db, const std::string& name) {
  auto d = engine::Db::Open(db, engine::Db::Mode::kReadOnly);
  EXPECT_TRUE(d.ok());
  auto v = (*d)->QueryInt("SELECT sum(value) FROM stats WHERE name = '" + name + "'", -1);
  EXPECT_TRUE(v.ok());
  return *v;
}

class RealFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(RealFixtures, EveryFileMatchesAnIndependentReading) {
  const std::string format = GetParam();
  // Fails instead of skipping under CI=true (tests/test_util.h).
  if (SharedFixturePath(format).empty())
    GTEST_SKIP() << FixturesDir() << "/" << format << " is absent";
  const std::vector<std::string> files = Files(format);
  ASSERT_FALSE(files.empty()) << "no " << format << " fixtures in " << FixturesDir();
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    TempDir tmp;
    const std::string db = tmp.Sub("job.tdb");
    int rc = 0;
    // Auto-detection must name the right format.
    const std::string out =
        RunCommand(TracedbBin() + " import '" + file + "' -o '" + db + "' 2>&1", &rc);
    ASSERT_EQ(rc, 0) << out;
    ExpectDbInvariants(db);  // tests/db_invariants.h, on the real files too
    auto d = engine::Db::Open(db, engine::Db::Mode::kReadOnly);
    ASSERT_TRUE(d.ok());
    auto st = (*d)->Prepare("SELECT format FROM sources");
    ASSERT_TRUE(st.ok());
    ASSERT_TRUE(*st->Step());
    EXPECT_EQ(st->Text(0), format);

    std::map<std::string, std::string> names;
    const Summary ours = FromDb(db, &names);
    const Summary theirs = FromPython(format, file);
    EXPECT_FALSE(theirs.empty());
    for (const auto& [key, v] : theirs) {
      auto it = ours.find(key);
      const std::string name =
          names.count(std::get<1>(key)) ? names[std::get<1>(key)] : "hex " + std::get<1>(key);
      if (it == ours.end()) {
        ADD_FAILURE() << "rank " << std::get<0>(key) << " " << std::get<2>(key) << " '" << name
                      << "': missing from the database";
        continue;
      }
      EXPECT_EQ(it->second.first, v.first) << "count of '" << name << "'";
      EXPECT_EQ(it->second.second, v.second) << "total duration of '" << name << "'";
    }
    EXPECT_EQ(ours.size(), theirs.size());
    // These files are complete and well formed.
    EXPECT_EQ(Stat(db, "import_skipped"), 0);
    EXPECT_EQ(Stat(db, "import_truncated"), 0);
    EXPECT_EQ(Stat(db, "import_unmatched"), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, RealFixtures, ::testing::Values("horovod", "byteps", "kineto"));

TEST(RealFixtures, KinetoRanksMergeIntoOneJob) {
  if (SharedFixturePath("kineto").empty()) GTEST_SKIP() << "no kineto fixtures";
  const std::vector<std::string> files = Files("kineto");
  ASSERT_EQ(files.size(), 2u);
  TempDir tmp;
  const std::string db = tmp.Sub("job.tdb");
  int rc = 0;
  const std::string out = RunCommand(
      TracedbBin() + " import '" + files[0] + "' '" + files[1] + "' -o '" + db + "' 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  ExpectDbInvariants(db);
  auto d = engine::Db::Open(db, engine::Db::Mode::kReadOnly);
  ASSERT_TRUE(d.ok());
  auto st = (*d)->Prepare("SELECT rank, world_size, source FROM ranks ORDER BY rank");
  ASSERT_TRUE(st.ok());
  std::vector<std::string> ranks;
  while (*st->Step()) {
    ranks.push_back(std::to_string(st->Int(0)) + "/" + std::to_string(st->Int(1)) + "/" +
                    std::string(st->Text(2)));
  }
  EXPECT_EQ(ranks, (std::vector<std::string>{"0/128/kineto", "1/128/kineto"}));
  // ProfilerStep#551 and #552 on each rank.
  EXPECT_EQ(*(*d)->QueryInt("SELECT count(*) FROM steps"), 4);
  // NCCL annotations carry bytes derived from their input sizes.
  int64_t with_bytes = 0;
  for (const DbRow& r : ReadDbRows(db)) {
    if (r.name.rfind("nccl:", 0) == 0 && (r.args.mask & engine::EventArgs::kBytes)) ++with_bytes;
  }
  EXPECT_GT(with_bytes, 0);
}

}  // namespace
}  // namespace tracedb::testing
