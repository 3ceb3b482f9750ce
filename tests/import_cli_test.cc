// `tracedb import` as a user runs it: exit codes (0 done, 1 unreadable input, 2 usage), messages
// that name the file and byte offset, several inputs into one job with one transaction per file,
// directories, re-imports, --rank.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "query/import/importer.h"
#include "tests/db_rows.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

int Import(const std::string& args, std::string* out) {
  int rc = 0;
  *out = RunCommand(TracedbBin() + " import " + args + " 2>&1", &rc);
  return rc;
}

int64_t Query(const std::string& db, const std::string& sql) {
  auto d = engine::Db::Open(db, engine::Db::Mode::kReadOnly);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  if (!d.ok()) return -1;
  auto v = (*d)->QueryInt(sql, -1);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : -1;
}

const char kChrome[] =
    "[{\"ph\": \"X\", \"name\": \"a\", \"ts\": 1, \"dur\": 2, \"pid\": 1, \"tid\": 1},\n"
    " {\"ph\": \"X\", \"name\": \"b\", \"ts\": 5, \"dur\": 1, \"pid\": 1, \"tid\": 1}]\n";

TEST(ImportCli, UsageErrorsExitWithTwo) {
  TempDir dir;
  WriteFile(dir.Sub("t.json"), kChrome);
  std::string out;
  EXPECT_EQ(Import("", &out), 2) << out;
  EXPECT_EQ(Import(dir.Sub("t.json"), &out), 2) << out;  // no -o
  EXPECT_EQ(Import(dir.Sub("t.json") + " -o " + dir.Sub("j.tdb") + " --input-format nope", &out),
            2);
  EXPECT_NE(out.find("unknown format 'nope'"), std::string::npos) << out;
  // A format of the list that this build has no importer for (mpitrace and mpiP come
  // separately): still a usage error, said as such.
  for (const char* f : {"mpitrace", "mpip"}) {
    if (query::FindImporter(f) != nullptr) continue;
    EXPECT_EQ(Import(dir.Sub("t.json") + " -o " + dir.Sub("j.tdb") + " --input-format " + f, &out),
              2);
    EXPECT_NE(out.find("no importer for the format '" + std::string(f) + "'"), std::string::npos)
        << out;
  }
  EXPECT_EQ(
      Import(dir.Sub("t.json") + " " + dir.Sub("t.json") + " -o " + dir.Sub("j.tdb") + " --rank 3",
             &out),
      2);
  EXPECT_EQ(Import(dir.Sub("t.json") + " -o " + dir.Sub("j.tdb") + " --rank -1", &out), 2);
}

TEST(ImportCli, UnreadableInputsExitWithOneAndNameFileAndOffset) {
  TempDir dir;
  std::string out;
  EXPECT_EQ(Import(dir.Sub("missing.json") + " -o " + dir.Sub("j.tdb"), &out), 1);
  EXPECT_NE(out.find(dir.Sub("missing.json") + ": No such file or directory"), std::string::npos)
      << out;

  WriteFile(dir.Sub("notes.json"), "  hello, this is not JSON\n");
  EXPECT_EQ(
      Import(dir.Sub("notes.json") + " -o " + dir.Sub("j.tdb") + " --input-format chrome", &out),
      1);
  EXPECT_NE(out.find(dir.Sub("notes.json") + ": byte offset 2: not a JSON trace"),
            std::string::npos)
      << out;
  // Without --input-format there is nothing to recognise either.
  EXPECT_EQ(Import(dir.Sub("notes.json") + " -o " + dir.Sub("j.tdb"), &out), 1);
  EXPECT_NE(out.find("notes.json: not a trace format tracedb can import"), std::string::npos)
      << out;

  // A gzip file damaged in the middle.
  std::string plain = "[";
  for (int i = 0; i < 5000; ++i) {
    plain += "{\"ph\": \"X\", \"name\": \"op" + std::to_string(i % 13) +
             "\", \"ts\": " + std::to_string(i) + ", \"dur\": 1, \"pid\": 1, \"tid\": 1},\n";
  }
  uLongf len = compressBound(plain.size()) + 64;
  std::string gz(len, '\0');
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(plain.data());
  z.avail_in = static_cast<uInt>(plain.size());
  z.next_out = reinterpret_cast<Bytef*>(gz.data());
  z.avail_out = static_cast<uInt>(gz.size());
  ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  gz.resize(z.total_out);
  deflateEnd(&z);
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 64; ++i) gz[i] = static_cast<char>(~gz[i]);
  WriteFile(dir.Sub("bad.json.gz"), gz);
  EXPECT_EQ(Import(dir.Sub("bad.json.gz") + " -o " + dir.Sub("g.tdb"), &out), 1);
  EXPECT_NE(out.find(dir.Sub("bad.json.gz") + " (as chrome): " + dir.Sub("bad.json.gz") +
                     ": gzip data damaged at compressed byte offset "),
            std::string::npos)
      << out;
  // Nothing of the damaged file is kept: the database this import created is removed.
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("g.tdb"))) << out;
  EXPECT_NE(out.find("nothing imported; " + dir.Sub("g.tdb") + " not created"), std::string::npos)
      << out;
}

// Junk, an empty file, or a file whose every record is skipped (a wrong --input-format) fails: exit
// 1, a message naming the file and the count, and no database left behind (or the previous one
// unchanged).
TEST(ImportCli, AnImportOfNothingFailsAndLeavesNoFile) {
  TempDir dir;
  std::string out;
  WriteFile(dir.Sub("empty.json"), "");
  EXPECT_EQ(Import(dir.Sub("empty.json") + " -o " + dir.Sub("e.tdb"), &out), 1) << out;
  EXPECT_NE(out.find("empty.json: no events, nothing to import"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("e.tdb"))) << out;

  std::string junk;
  std::mt19937 rng(7);
  for (int i = 0; i < 4096; ++i) junk += static_cast<char>(rng());
  WriteFile(dir.Sub("junk.bin"), junk);
  EXPECT_EQ(Import(dir.Sub("junk.bin") + " -o " + dir.Sub("j.tdb"), &out), 1) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("j.tdb"))) << out;

  // A BytePS trace forced through the Horovod importer: no record is Horovod's.
  const std::string byteps =
      SourceRoot() + "/fixtures/import/byteps/trace_dir/input/trace/0/comm.json";
  EXPECT_EQ(Import("'" + byteps + "' --input-format horovod -o " + dir.Sub("w.tdb"), &out), 1)
      << out;
  EXPECT_NE(out.find("comm.json (as horovod): all "), std::string::npos) << out;
  EXPECT_NE(out.find("records skipped, none imported (is --input-format horovod right?)"),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("w.tdb"))) << out;

  // Into an existing database: it keeps exactly what it had.
  WriteFile(dir.Sub("t.json"), kChrome);
  ASSERT_EQ(Import(dir.Sub("t.json") + " -o " + dir.Sub("k.tdb"), &out), 0) << out;
  const std::string before = RowsCsv(ReadDbRows(dir.Sub("k.tdb"))) + TablesCsv(dir.Sub("k.tdb"));
  EXPECT_EQ(Import(dir.Sub("junk.bin") + " -o " + dir.Sub("k.tdb"), &out), 1) << out;
  EXPECT_EQ(Import("'" + byteps + "' --input-format horovod -o " + dir.Sub("k.tdb"), &out), 1)
      << out;
  EXPECT_EQ(RowsCsv(ReadDbRows(dir.Sub("k.tdb"))) + TablesCsv(dir.Sub("k.tdb")), before);
}

// Some records skipped: the import succeeds, and stderr names the file and the count.
TEST(ImportCli, SkippedRecordsAreWarnedAbout) {
  TempDir dir;
  WriteFile(dir.Sub("t.json"),
            "[{\"ph\": \"X\", \"name\": \"a\", \"ts\": 1, \"dur\": 2, \"pid\": 1, \"tid\": 1},\n"
            " {\"ph\": \"X\", \"ts\": oops},\n"
            " {\"ph\": \"X\", \"name\": \"b\", \"ts\": 5, \"dur\": 1, \"pid\": 1, \"tid\": 1}]\n");
  std::string out;
  ASSERT_EQ(Import(dir.Sub("t.json") + " -o " + dir.Sub("j.tdb"), &out), 0) << out;
  EXPECT_NE(out.find("warning: " + dir.Sub("t.json") + " (as chrome): 1 records skipped"),
            std::string::npos)
      << out;
}

TEST(ImportCli, HostileArgsAreSkippedWithFileAndOffsetOrKeptExactly) {
  // Compact args (the fast path of the args re-writer): nesting past the reader's depth limit is
  // a skipped record named by file and byte offset; huge numbers are kept as written; a trailing
  // comma and NaN are compacted; a record cut at the end of the file is counted as truncated.
  TempDir dir;
  std::string deep;
  for (int i = 0; i < 600; ++i) deep += "[";
  for (int i = 0; i < 600; ++i) deep += "]";
  const std::string first =
      "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":2,\"pid\":1,\"tid\":1,"
      "\"args\":{\"n\":1e999999,\"m\":-123456789012345678901234567890,\"t\":[1,],\"x\":NaN}},\n";
  const std::string second =
      "{\"ph\":\"X\",\"name\":\"deep\",\"ts\":3,\"dur\":1,\"pid\":1,\"tid\":1,\"args\":{\"d\":" +
      deep + "}},\n";
  const std::string data = first + second +
                           "{\"ph\":\"X\",\"name\":\"b\",\"ts\":5,\"dur\":1,\"pid\":1,\"tid\":1},\n"
                           "{\"ph\":\"X\",\"name\":\"cut\",\"ts\":7,\"args\":{\"k\":[1,2";
  WriteFile(dir.Sub("h.json"), data);
  std::string out;
  const std::string db = dir.Sub("h.tdb");
  ASSERT_EQ(Import("--input-format chrome " + dir.Sub("h.json") + " -o " + db, &out), 0) << out;
  // The offset of the bad value, in the file.
  const size_t at = first.size() + second.find("{\"d\"");
  EXPECT_NE(out.find(dir.Sub("h.json") + ": byte offset " + std::to_string(at) + ": bad \"args\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(dir.Sub("h.json") + ": the last 46 bytes hold an incomplete record"),
            std::string::npos)
      << out;
  const std::vector<DbRow> rows = ReadDbRows(db);
  ASSERT_EQ(rows.size(), 2u) << out;
  EXPECT_EQ(rows[0].name, "a");
  EXPECT_EQ(rows[0].json, R"({"n":1e999999,"m":-123456789012345678901234567890,"t":[1],"x":null})");
  EXPECT_EQ(rows[1].name, "b");
}

TEST(ImportCli, AFailedFileKeepsTheOthers) {
  TempDir dir;
  WriteFile(dir.Sub("a0.json"), kChrome);
  WriteFile(dir.Sub("b.json"), "[{\"ph\": \"X\"}");  // detected as Chrome, and fine
  WriteFile(dir.Sub("c.json"), "<html>");            // not a trace
  WriteFile(dir.Sub("d5.json"), kChrome);
  std::string out;
  const std::string db = dir.Sub("job.tdb");
  EXPECT_EQ(
      Import(dir.Sub("a0.json") + " " + dir.Sub("c.json") + " " + dir.Sub("d5.json") + " -o " + db,
             &out),
      1)
      << out;
  EXPECT_NE(out.find("c.json: not a trace format"), std::string::npos) << out;
  // Ranks from the file names' numbers.
  EXPECT_EQ(Query(db, "SELECT count(*) FROM ranks WHERE rank IN (0, 5)"), 2);
  EXPECT_EQ(ReadDbRows(db).size(), 4u);
  EXPECT_NE(out.find("imported 4 events from 2 files"), std::string::npos) << out;
}

TEST(ImportCli, RanksFromContentThenNameThenOrder) {
  TempDir dir;
  WriteFile(dir.Sub("x.json"), kChrome);
  WriteFile(dir.Sub("y.json"), kChrome);
  WriteFile(dir.Sub("z.json"),
            std::string("{\"distributedInfo\": {\"rank\": 9}, \"traceEvents\": ") + kChrome + "}");
  std::string out;
  const std::string db = dir.Sub("job.tdb");
  ASSERT_EQ(
      Import(dir.Sub("x.json") + " " + dir.Sub("y.json") + " " + dir.Sub("z.json") + " -o " + db,
             &out),
      0)
      << out;
  EXPECT_EQ(Query(db, "SELECT count(*) FROM ranks WHERE rank IN (0, 1, 9)"), 3);
  ASSERT_EQ(Import(dir.Sub("y.json") + " -o " + dir.Sub("r.tdb") + " --rank 4", &out), 0) << out;
  EXPECT_EQ(Query(dir.Sub("r.tdb"), "SELECT rank FROM ranks"), 4);
}

TEST(ImportCli, ReimportingAFileIsSkipped) {
  TempDir dir;
  WriteFile(dir.Sub("t.json"), kChrome);
  std::string out;
  const std::string db = dir.Sub("job.tdb");
  ASSERT_EQ(Import(dir.Sub("t.json") + " -o " + db, &out), 0) << out;
  ASSERT_EQ(Import(dir.Sub("t.json") + " -o " + db, &out), 0) << out;
  EXPECT_NE(out.find("already in"), std::string::npos) << out;
  EXPECT_EQ(ReadDbRows(db).size(), 2u);
}

TEST(ImportCli, DirectoriesExpand) {
  TempDir dir;
  // A BytePS trace directory: one rank per <n>/comm.json.
  const std::string src = SourceRoot() + "/fixtures/import/byteps/trace_dir/input/trace";
  std::string out;
  const std::string db = dir.Sub("byteps.tdb");
  ASSERT_EQ(Import("'" + src + "' -o " + db, &out), 0) << out;
  EXPECT_EQ(Query(db, "SELECT count(*) FROM ranks WHERE source = 'byteps'"), 2);
  EXPECT_NE(out.find("byteps"), std::string::npos) << out;
  // Any other directory: every regular file in it, in name order.
  const std::string bf = SourceRoot() + "/fixtures/import/bluefog/ranks/input";
  ASSERT_EQ(Import("'" + bf + "' -o " + dir.Sub("bf.tdb"), &out), 0) << out;
  EXPECT_EQ(Query(dir.Sub("bf.tdb"), "SELECT count(*) FROM sources WHERE format = 'bluefog'"), 2);
  EXPECT_LT(out.find("timeline0.json"), out.find("timeline1.json")) << out;
}

TEST(ImportCli, SummaryNamesFormatRankEventsSkippedTruncated) {
  TempDir dir;
  WriteFile(dir.Sub("t.json"),
            "[{\"ph\": \"X\", \"name\": \"a\", \"ts\": 1, \"dur\": 2, \"pid\": 1, \"tid\": 1},\n"
            " {\"ph\": \"X\", \"ts\": oops},\n"
            " {\"ph\": \"X\", \"name\": \"b\", \"ts\": 5, \"dur\": 1, \"pid\": 1, \"tid\": 1},\n"
            " {\"ph\": \"X\", \"na");
  std::string out;
  ASSERT_EQ(Import(dir.Sub("t.json") + " -o " + dir.Sub("j.tdb"), &out), 0) << out;
  EXPECT_NE(out.find(" chrome       0            2        1       15 B"), std::string::npos) << out;
  EXPECT_NE(out.find("byte offset"), std::string::npos) << out;
}

// Two Horovod timelines are two runs (only rank 0 writes one): refused, kept apart with
// --separate (each database equal to the run imported alone), merged with --merge.
TEST(ImportCli, UnrelatedRunsAreRefusedSeparatedOrMerged) {
  TempDir dir;
  const std::string a = SourceRoot() + "/fixtures/import/horovod/new_framing/input/timeline.json";
  const std::string b = SourceRoot() + "/fixtures/import/horovod/old_framing/input/timeline.json";
  std::string out;
  ASSERT_EQ(Import("'" + a + "' -o " + dir.Sub("a.tdb"), &out), 0) << out;
  ASSERT_EQ(Import("'" + b + "' -o " + dir.Sub("b.tdb"), &out), 0) << out;
  const std::string rows_a = RowsCsv(ReadDbRows(dir.Sub("a.tdb")));
  const std::string rows_b = RowsCsv(ReadDbRows(dir.Sub("b.tdb")));

  EXPECT_EQ(Import("'" + a + "' '" + b + "' -o " + dir.Sub("j.tdb"), &out), 1) << out;
  EXPECT_NE(
      out.find(b + ": not of the job already in the database: rank 0 is already imported (from " +
               a + "); --separate keeps it in a database of its own, --merge adds it"),
      std::string::npos)
      << out;
  EXPECT_EQ(RowsCsv(ReadDbRows(dir.Sub("j.tdb"))), rows_a);  // the second run is rolled back

  ASSERT_EQ(Import("'" + a + "' '" + b + "' --separate -o " + dir.Sub("s.tdb"), &out), 0) << out;
  EXPECT_NE(out.find("into " + dir.Sub("s-2.tdb")), std::string::npos) << out;
  EXPECT_EQ(RowsCsv(ReadDbRows(dir.Sub("s.tdb"))), rows_a);
  EXPECT_EQ(RowsCsv(ReadDbRows(dir.Sub("s-2.tdb"))), rows_b);

  ASSERT_EQ(Import("'" + a + "' '" + b + "' --merge -o " + dir.Sub("m.tdb"), &out), 0) << out;
  EXPECT_EQ(ReadDbRows(dir.Sub("m.tdb")).size(),
            ReadDbRows(dir.Sub("a.tdb")).size() + ReadDbRows(dir.Sub("b.tdb")).size());
  EXPECT_EQ(Import("'" + a + "' -o x.tdb --merge --separate", &out), 2) << out;
}

// Two Kineto traces (epoch clocks) of different ranks and no world size in common, 200 days
// apart: another job, by their start times.
TEST(ImportCli, KinetoTracesFarApartInTimeAreRefused) {
  TempDir dir;
  const std::string a =
      SourceRoot() + "/fixtures/import/kineto/distributed_gz/input/node_worker.pt.trace.json.gz";
  const std::string b = SourceRoot() + "/fixtures/import/kineto/older_profiler/input/rank-1.json";
  std::string out;
  EXPECT_EQ(Import("'" + a + "' '" + b + "' -o " + dir.Sub("k.tdb"), &out), 1) << out;
  EXPECT_NE(out.find("rank-1.json: not of the job already in the database: its events are "
                     "17274101 s apart from the kineto events already imported (from " +
                     a + ")"),
            std::string::npos)
      << out;
  EXPECT_EQ(Query(dir.Sub("k.tdb"), "SELECT count(*) FROM ranks"), 1);
  ASSERT_EQ(Import("'" + a + "' '" + b + "' --separate -o " + dir.Sub("s.tdb"), &out), 0) << out;
  EXPECT_EQ(Query(dir.Sub("s-2.tdb"), "SELECT rank FROM ranks"), 1);
}

TEST(ImportCli, LargeShuffledChromeFileNestsExactly) {
  // Enough events for the two-thread path, written in random order: the per-track sort must
  // restore exact nesting (each parent encloses its two children; zero-length leaves nest too).
  TempDir dir;
  std::vector<std::string> records;
  for (int t = 1; t <= 3; ++t) {
    for (int i = 0; i < 4000; ++i) {
      const int64_t base = i * 1000;
      auto x = [&](const char* name, int64_t ts, int64_t dur) {
        records.push_back("{\"ph\": \"X\", \"name\": \"" + std::string(name) +
                          "\", \"pid\": 7, \"tid\": " + std::to_string(t) + ", \"ts\": " +
                          std::to_string(base + ts) + ".5, \"dur\": " + std::to_string(dur) + "}");
      };
      x("parent", 0, 500);
      x("child", 0, 200);  // starts with its parent: the longer one encloses it
      x("child", 300, 100);
      x("leaf", 300, 0);
    }
  }
  std::mt19937 rng(9);
  std::shuffle(records.begin(), records.end(), rng);
  std::string data = "{\"traceEvents\": [\n";
  for (size_t i = 0; i < records.size(); ++i) data += (i ? ",\n" : "") + records[i];
  data += "\n]}";
  WriteFile(dir.Sub("big.json"), data);
  std::string out;
  const std::string db = dir.Sub("job.tdb");
  ASSERT_EQ(Import(dir.Sub("big.json") + " -o " + db, &out), 0) << out;
  const std::vector<DbRow> rows = ReadDbRows(db);
  ASSERT_EQ(rows.size(), records.size());
  std::map<std::string, int> by_shape;
  for (const DbRow& r : rows) {
    by_shape[r.name + "/" + std::to_string(r.depth) + "/" + r.parent]++;
    EXPECT_EQ(r.ts % 1000, 500);  // the fractional µs survived
  }
  EXPECT_EQ(by_shape["parent/0/"], 12000);
  EXPECT_EQ(by_shape["child/1/parent"], 24000);
  EXPECT_EQ(by_shape["leaf/2/child"], 12000);
  EXPECT_EQ(Query(db, "SELECT count(*) FROM stats WHERE name = 'improper_nesting'"), 0);
}

}  // namespace
}  // namespace tracedb::testing
