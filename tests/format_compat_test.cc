// Old on-disk versions keep reading. fixtures/formats/vN/ holds segment files and a trace DB
// written by the code of format version N (see fixtures/formats/README.md). For each version:
//   spec/   segments written from input.spec, the DB compacted from them (job.tdb) and its rows
//           (rows.csv, RowsCsv of the DB as version N read it);
//   bench/  segments and events.csv from bench/db_bench_gen (its own record of every event it
//           wrote: an independent reference) and the DB compacted from them.
// Today's code must read the old DB and compact the old segments to the same rows.
// TRACEDB_WRITE_FORMAT_FIXTURE=DIR writes spec/'s files for the current version into DIR
// instead (only when a format version is bumped: old fixtures are never rewritten).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include "engine/db/sqlite.h"
#include "engine/util/coding.h"
#include "engine/util/lz4_codec.h"
#include "tests/db_rows.h"
#include "tests/segment_fixture.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;

std::string Compact(const std::string& trace, const std::string& db) {
  int status = 0;
  const std::string log = RunCommand(TracedbBin() + " compact " + ShellQuote(trace) + " -o " +
                                         ShellQuote(db) + " --finish -q 2>&1",
                                     &status);
  return status == 0 ? "" : "compact failed: " + log;
}

// A copy of a fixture's trace directory (compaction may write beside the segments).
std::string CopyTrace(const std::string& from, TempDir* tmp) {
  const std::string to = tmp->Sub("trace");
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

std::vector<std::string> Versions() {
  std::vector<std::string> v;
  const fs::path root = fs::path(SourceRoot()) / "fixtures" / "formats";
  if (!fs::exists(root)) return v;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory()) v.push_back(e.path().string());
  }
  std::sort(v.begin(), v.end());
  return v;
}

// The block formats of a DB's blocks, read from the bytes themselves (docs/database-format.md
// "Event blocks": codec byte, raw size, CRC, then the payload whose first byte is the format),
// not through the decoder under test.
std::set<int> BlockFormats(const std::string& path) {
  std::set<int> formats;
  auto db = engine::Db::Open(path, engine::Db::Mode::kReadOnly);
  EXPECT_TRUE(db.ok()) << path;
  if (!db.ok()) return formats;
  auto st = (*db)->Prepare("SELECT data FROM blocks");
  EXPECT_TRUE(st.ok()) << path;
  if (!st.ok()) return formats;
  while (*st->Step()) {
    engine::Reader r(st->Blob(0));
    uint8_t codec = 0;
    uint64_t raw_size = 0;
    uint32_t crc = 0;
    std::string raw;
    if (!r.GetU8(&codec) || !r.GetVarint64(&raw_size) || !r.GetFixed32(&crc)) {
      formats.insert(-1);
      continue;
    }
    uint64_t at = 0, len = 0;  // codec 2: a section kept out of LZ4, after the LZ4 bytes
    if (codec == 2 && (!r.GetVarint64(&at) || !r.GetVarint64(&len) || len > r.remaining() ||
                       at > raw_size || len > raw_size - at)) {
      formats.insert(-1);
      continue;
    }
    const std::string_view payload(r.data(), r.remaining());
    if (codec == 1) {
      if (!engine::Lz4Decompress(payload, raw_size, &raw).ok()) raw.clear();
    } else if (codec == 2) {
      std::string lz;
      if (engine::Lz4Decompress(payload.substr(0, payload.size() - len), raw_size - len, &lz)
              .ok()) {
        raw = lz.substr(0, at) + std::string(payload.substr(payload.size() - len)) + lz.substr(at);
      }
    } else {
      raw.assign(payload);
    }
    formats.insert(raw.empty() ? -1 : static_cast<uint8_t>(raw[0]));
  }
  return formats;
}

// "vN" -> N.
int VersionOf(const std::string& dir) { return std::atoi(fs::path(dir).filename().c_str() + 1); }

// Every released on-disk version has its fixtures (a lost directory would silently stop
// testing that version).
TEST(FormatCompat, EveryReleasedVersionHasFixtures) {
  std::set<int> have;
  for (const std::string& v : Versions()) have.insert(VersionOf(v));
  for (int v = 1; v <= 4; ++v) EXPECT_TRUE(have.count(v)) << "fixtures/formats/v" << v;
}

class FormatCompatTest : public ::testing::TestWithParam<std::string> {};

// The fixture of version N holds blocks of block format N, only: what it claims to test.
TEST_P(FormatCompatTest, FixtureDbsHoldTheirBlockFormat) {
  const int v = VersionOf(GetParam());
  for (const char* sub : {"/spec/job.tdb", "/bench/job.tdb"}) {
    EXPECT_EQ(BlockFormats(GetParam() + sub), std::set<int>{v}) << GetParam() << sub;
  }
}

TEST_P(FormatCompatTest, SpecDbReads) {
  const std::string dir = GetParam() + "/spec";
  const std::string expected = ReadFile(dir + "/rows.csv");
  ASSERT_FALSE(expected.empty());
  TempDir tmp;
  // Copied: opening a DB may take a lock or a journal beside it; the fixture stays untouched.
  const std::string db = tmp.Sub("job.tdb");
  fs::copy_file(dir + "/job.tdb", db);
  EXPECT_EQ(RowsCsv(ReadDbRows(db)), expected);
  int status = 0;
  const std::string q = RunCommand(TracedbBin() + " query " + ShellQuote(db) +
                                       " 'SELECT count(*), sum(dur) FROM events' --format csv 2>&1",
                                   &status);
  EXPECT_EQ(status, 0) << q;
}

TEST_P(FormatCompatTest, SpecSegmentsCompact) {
  const std::string dir = GetParam() + "/spec";
  TempDir tmp;
  const std::string db = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(CopyTrace(dir + "/trace", &tmp), db), "");
  EXPECT_EQ(RowsCsv(ReadDbRows(db)), ReadFile(dir + "/rows.csv"));
}

// The rows of a DB as db_bench_gen's CSV writes them (rank,tid,name,ts,dur,depth), sorted.
std::vector<std::string> BenchLines(const std::vector<DbRow>& rows) {
  std::vector<std::string> out;
  out.reserve(rows.size());
  for (const DbRow& r : rows) {
    out.push_back(std::to_string(r.rank) + "," + std::to_string(r.tid) + "," + r.name + "," +
                  std::to_string(r.ts) + "," + std::to_string(r.dur) + "," +
                  std::to_string(r.depth));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> CsvLines(const std::string& path) {
  std::istringstream in(ReadFile(path));
  std::vector<std::string> out;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) out.push_back(line);
  std::sort(out.begin(), out.end());
  return out;
}

TEST_P(FormatCompatTest, BenchDbAndSegmentsMatchGenerator) {
  const std::string dir = GetParam() + "/bench";
  const std::vector<std::string> truth = CsvLines(dir + "/events.csv");
  ASSERT_GT(truth.size(), 1000u);
  TempDir tmp;
  const std::string old_db = tmp.Sub("old.tdb");
  fs::copy_file(dir + "/job.tdb", old_db);
  EXPECT_EQ(BenchLines(ReadDbRows(old_db)), truth);
  const std::string db = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(CopyTrace(dir + "/trace", &tmp), db), "");
  EXPECT_EQ(BenchLines(ReadDbRows(db)), truth);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FormatCompatTest, ::testing::ValuesIn(Versions()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return fs::path(i.param).filename().string();
                         });

// Not a test: writes a new version's spec/ fixture (see the header).
TEST(FormatFixture, WriteWhenAsked) {
  const char* out = std::getenv("TRACEDB_WRITE_FORMAT_FIXTURE");
  if (out == nullptr) GTEST_SKIP() << "TRACEDB_WRITE_FORMAT_FIXTURE not set";
  const std::string dir = out;
  const std::string spec = ReadFile(dir + "/input.spec");
  ASSERT_FALSE(spec.empty()) << dir << "/input.spec";
  ASSERT_FALSE(fs::exists(dir + "/trace")) << "fixtures of a released version are never rewritten";
  ASSERT_TRUE(WriteSegmentsFromSpec(dir, spec).ok());
  ASSERT_EQ(Compact(dir + "/trace", dir + "/job.tdb"), "");
  WriteFile(dir + "/rows.csv", RowsCsv(ReadDbRows(dir + "/job.tdb")));
}

}  // namespace
}  // namespace tracedb::testing
