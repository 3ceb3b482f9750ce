// Tests of the IBM mpitrace importer: detection, the message-size bin rule, how rank_times rows
// from several files meet, errors, gzip input, every real profile in ../shared/fixtures/mpitrace
// against an independent (regex) reading, every prefix of every fixture, and random mutants.
// Thread safety: test code, one thread.
#include "query/import/mpitrace/mpitrace_importer.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <map>
#include <regex>
#include <sstream>

#include "tests/mpi_profile_test_util.h"
#include "tests/test_util.h"

namespace tracedb::query {
namespace {

using testing::ImportOutcome;
using testing::ProfileDb;

Status ImportText(std::string_view path, std::string_view text, engine::TraceWriter* w,
                  ImportResult* r) {
  return ImportMpitraceText(path, text, text.size(), -1, w, r);
}

std::string Fixture(const std::string& rel) {
  return testing::SourceRoot() + "/fixtures/import/mpitrace/" + rel;
}

// The hand-made profiles (every case folder) and the real ones, when present.
std::vector<std::string> AllProfiles() {
  std::vector<std::string> files;
  for (const char* c : {"hpctw_old", "mpitrace_new", "malformed", "truncated"}) {
    for (const std::string& f : testing::ListFiles(Fixture(c))) {
      if (!f.ends_with("expected.csv")) files.push_back(f);
    }
  }
  const std::string shared = testing::SharedFixtureDir("mpitrace");
  if (!shared.empty()) {
    for (const std::string& f : testing::ListFiles(shared)) files.push_back(f);
  }
  return files;
}

// A rank-0-of-1 profile whose message-size section is `msgsizes`.
std::string ProfileWith(const std::string& msgsizes) {
  return "Data for MPI rank 0 of 1:\n"
         "Times from MPI_Init() to MPI_Finalize().\n"
         "------------------------------------------------------------------------\n"
         "MPI Routine                        #calls      avg. bytes      time(sec)\n"
         "------------------------------------------------------------------------\n"
         "MPI_Bcast                               1             4.0          0.001\n"
         "-----------------------------------------------------------------------\n"
         "total communication time = 0.001 seconds.\n"
         "total elapsed time       = 1.000 seconds.\n"
         "\n"
         "-----------------------------------------------------------------\n"
         "Message size distributions:\n\n" +
         msgsizes;
}

TEST(MpitraceImporterTest, DetectsByContentAndFileName) {
  auto imp = NewMpitraceImporter();
  EXPECT_STREQ(imp->name(), "mpitrace");
  const std::string head = "Data for MPI rank 3 of 8:\nTimes from MPI_Init() to MPI_Finalize().\n";
  EXPECT_EQ(imp->Detect("/jobs/mpi_profile.1234.3", head), 100);
  EXPECT_EQ(imp->Detect("/jobs/mpi_profile.1234.0412093015.3", head), 100);
  EXPECT_EQ(imp->Detect("/jobs/alcf_cpu_mpi_profile.176073.0.gz", head), 100);
  EXPECT_EQ(imp->Detect("/jobs/profile.txt", head), 80);
  EXPECT_EQ(imp->Detect("/jobs/profile.txt", "\n\nData for MPI rank 0 of 2: (all communicators)\n"),
            80);
  EXPECT_EQ(imp->Detect("/jobs/notes.txt", "copied from the job:\nData for MPI rank 0 of 2:\n"),
            40);
  EXPECT_EQ(imp->Detect("/jobs/mpi_profile.1234.3", "@ mpiP\n@ Command : ./a.out\n"), 0);
  EXPECT_EQ(imp->Detect("/jobs/mpi_profile.1234.3", ""), 0);
  EXPECT_EQ(imp->Detect("/jobs/mpi_profile.1234", head), 80);  // no rank in the name
  EXPECT_EQ(imp->Detect("/jobs/t.json", "[\n{\"name\": \"x\", \"ph\": \"B\"},\n"), 0);
}

// mpitrace bins a call of b bytes: b = 0 -> bin 0; 1..4 -> bin 1; 2^k < b <= 2^(k+1) -> bin k.
// The printed average of a bin determines its bounds.
TEST(MpitraceImporterTest, MessageSizeBinsFollowFromTheAverages) {
  const std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> cases = {
      {"0.0", {0, 0}},
      {"1.0", {1, 4}},
      {"4.0", {1, 4}},
      {"5.0", {5, 8}},
      {"8.0", {5, 8}},
      {"9.0", {9, 16}},
      {"1024.0", {513, 1024}},
      {"1536.5", {1025, 2048}},
      {"67108864.0", {33554433, 67108864}},
      {"4718986.5", {4194305, 8388608}}};
  std::string msgsizes;
  for (size_t i = 0; i < cases.size(); ++i) {
    msgsizes +=
        "MPI_R" + std::to_string(i) + "                    #calls     avg. bytes      time(sec)\n";
    msgsizes += "                               3   " + cases[i].first + "          0.002\n\n";
  }
  // Averages no bin can have: below 1 byte, or between 2^k and 2^k + 1 bytes.
  for (const char* bad : {"0.5", "8.5", "1024.5"}) {
    msgsizes += "MPI_Bad                   #calls     avg. bytes      time(sec)\n";
    msgsizes += "                               3   " + std::string(bad) + "          0.002\n\n";
  }
  ProfileDb db(":memory:");
  const ImportOutcome o = db.ImportText(ImportText, "bins", ProfileWith(msgsizes));
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_EQ(o.result.skipped, 3u);
  EXPECT_EQ(db.Int("SELECT count(*) FROM mpi_msgsize WHERE routine = 'MPI_Bad'"), 0);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string where = " FROM mpi_msgsize WHERE routine = 'MPI_R" + std::to_string(i) + "'";
    EXPECT_EQ(db.Int("SELECT min_bytes" + where), cases[i].second.first) << cases[i].first;
    EXPECT_EQ(db.Int("SELECT max_bytes" + where), cases[i].second.second) << cases[i].first;
    EXPECT_EQ(db.Int("SELECT calls" + where), 3);
    EXPECT_EQ(db.Int("SELECT time_ns" + where), 2000000);
  }
  EXPECT_EQ(db.Int("SELECT count(*) FROM mpi_msgsize WHERE avg_bytes < min_bytes OR "
                   "avg_bytes > max_bytes"),
            0);
}

TEST(MpitraceImporterTest, RankTimesDoNotDependOnTheImportOrder) {
  const std::string r0 = Fixture("hpctw_old/mpi_profile.4242.0");
  const std::string r3 = Fixture("hpctw_old/mpi_profile.4242.3");
  auto imp = NewMpitraceImporter();
  ProfileDb a(":memory:");
  ProfileDb b(":memory:");
  ASSERT_TRUE(a.Import(imp.get(), r0).status.ok());
  ASSERT_TRUE(a.Import(imp.get(), r3).status.ok());
  ASSERT_TRUE(b.Import(imp.get(), r3).status.ok());
  ASSERT_TRUE(b.Import(imp.get(), r0).status.ok());
  const std::string sql = "SELECT * FROM rank_times ORDER BY rank";
  EXPECT_EQ(a.Csv(sql), b.Csv(sql));
  // Rank 3's own file (ms precision) wins over rank 0's table (10 ms); the host comes from it.
  EXPECT_EQ(a.Int("SELECT comm_ns FROM rank_times WHERE rank = 3"), 2483000000);
  EXPECT_EQ(a.Int("SELECT elapsed_ns FROM rank_times WHERE rank = 3"), 12519000000);
  EXPECT_EQ(a.Csv("SELECT host FROM rank_times WHERE rank = 3"), "host\nnode02\n");
  EXPECT_EQ(a.Int("SELECT comm_ns FROM rank_times WHERE rank = 1"), 2010000000);
  EXPECT_EQ(a.Int("SELECT maxrss_bytes FROM rank_times WHERE rank = 1"), 520 * 1048576);
  EXPECT_EQ(a.Int("SELECT count(*) FROM ranks WHERE clock_method = 'none' AND world_size = 4"), 4);
}

TEST(MpitraceImporterTest, ARankFromANameThatDisagreesIsWarnedAbout) {
  auto imp = NewMpitraceImporter();
  ProfileDb db(":memory:");
  const ImportOutcome o = db.Import(imp.get(), Fixture("hpctw_old/mpi_profile.4242.3"), 5);
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_EQ(o.result.rank, 3);
  ASSERT_EQ(o.result.warnings.size(), 1u);
  EXPECT_NE(o.result.warnings[0].find("the file name says rank 5"), std::string::npos);
}

TEST(MpitraceImporterTest, AFileNotInTheFormatIsAnErrorNamingFileAndLine) {
  ProfileDb db(":memory:");
  ImportOutcome o = db.ImportText(ImportText, "dir/notes.txt", "\n\nhello world\n");
  EXPECT_EQ(o.status.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(o.status.message().find("dir/notes.txt: line 3: not an IBM mpitrace profile"),
            std::string::npos)
      << o.status.ToString();
  o = db.ImportText(ImportText, "dir/empty", "");
  EXPECT_NE(o.status.message().find("dir/empty: empty file"), std::string::npos);
  o = db.ImportText(ImportText, "dir/cut", "Data for MPI ra");
  EXPECT_NE(o.status.message().find("dir/cut: line 1: file ends inside its first line"),
            std::string::npos);
  o = db.ImportText(ImportText, "dir/range", "Data for MPI rank 4 of 4:\n");
  EXPECT_EQ(o.status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(db.Int("SELECT count(*) FROM sources"), 0);

  auto imp = NewMpitraceImporter();
  o = db.Import(imp.get(), "/nonexistent/mpi_profile.1.0");
  EXPECT_EQ(o.status.code(), Status::Code::kIOError);
  EXPECT_NE(o.status.message().find("/nonexistent/mpi_profile.1.0"), std::string::npos);

  ImportResult r;
  const Status s = ImportText("x", "Data for MPI rank 0 of 1:\n", db.writer(), &r);
  EXPECT_EQ(s.code(), Status::Code::kInternal);  // no batch open
}

TEST(MpitraceImporterTest, ReadsGzipFiles) {
  testing::TempDir tmp;
  const std::string plain = Fixture("hpctw_old/mpi_profile.4242.0");
  const std::string gz = tmp.Sub("mpi_profile.4242.0.gz");
  const std::string text = testing::ReadFile(plain);
  gzFile f = gzopen(gz.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
  auto imp = NewMpitraceImporter();
  ProfileDb a(":memory:");
  ProfileDb b(":memory:");
  ASSERT_TRUE(a.Import(imp.get(), plain).status.ok());
  ASSERT_TRUE(b.Import(imp.get(), gz).status.ok());
  for (const char* sql : {"SELECT * FROM mpi_profile ORDER BY rank, routine",
                          "SELECT * FROM mpi_msgsize ORDER BY rank, routine, min_bytes",
                          "SELECT * FROM rank_times ORDER BY rank"}) {
    EXPECT_EQ(a.Csv(sql), b.Csv(sql));
  }
  EXPECT_GT(a.Int("SELECT count(*) FROM mpi_msgsize"), 0);
}

// What a plain reading of a profile with regular expressions finds, to compare with the tables.
struct RegexReading {
  int rank = -1;
  int world_size = 0;
  int64_t calls = 0;
  std::map<std::string, int64_t> routine_calls;
  std::map<std::string, int64_t> bin_calls;  // routine -> sum over its bins
  size_t bins = 0;
  double comm_s = -1;
  double elapsed_s = -1;
  double maxrss_mib = -1;
  std::map<int, std::string> table_hosts;  // rank 0's all-ranks table
};

RegexReading ReadWithRegexes(const std::string& text) {
  static const std::regex kHeader(R"(^Data for MPI rank (\d+) of (\d+):)");
  static const std::regex kRow(R"(^(MPI_\w+) +(\d+) +([0-9.]+) +([0-9.]+)$)");
  static const std::regex kBinHeader(R"(^(MPI_\w+) +#calls +avg\. bytes +time\(sec\)$)");
  static const std::regex kBin(R"(^ +(\d+) +([0-9.]+) +([0-9.]+)$)");
  static const std::regex kComm(R"(^total communication time = ([0-9.]+) seconds)");
  static const std::regex kElapsed(R"(^total elapsed time += ([0-9.]+) seconds)");
  static const std::regex kRss(R"(^max resident set size += ([0-9.]+) (MiB|MBytes)\.)");
  static const std::regex kTable(
      R"(^ *(\d+) +(\S+) +(\d+ +)?[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +\d+$)");
  RegexReading r;
  std::istringstream in(text);
  std::string line;
  enum { kNone, kRoutines, kBins, kTableRows } where = kNone;
  std::string bin_routine;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, kHeader)) {
      r.rank = std::stoi(m[1]);
      r.world_size = std::stoi(m[2]);
    } else if (line.starts_with("MPI Routine")) {
      where = kRoutines;
    } else if (where == kRoutines && std::regex_match(line, m, kRow)) {
      r.calls += std::stoll(m[2]);
      r.routine_calls[m[1]] = std::stoll(m[2]);
    } else if (line.starts_with("Message size distributions")) {
      where = kBins;
    } else if (where == kBins && std::regex_match(line, m, kBinHeader)) {
      bin_routine = m[1];
    } else if (where == kBins && std::regex_match(line, m, kBin)) {
      r.bin_calls[bin_routine] += std::stoll(m[1]);
      r.bins++;
    } else if (line.starts_with("MPI timing summary for all ranks")) {
      where = kTableRows;
    } else if (where == kTableRows && std::regex_match(line, m, kTable)) {
      r.table_hosts[std::stoi(m[1])] = m[2];
    } else if (std::regex_search(line, m, kComm)) {
      r.comm_s = std::stod(m[1]);
    } else if (std::regex_search(line, m, kElapsed)) {
      r.elapsed_s = std::stod(m[1]);
    } else if (std::regex_search(line, m, kRss)) {
      r.maxrss_mib = std::stod(m[1]);
    }
  }
  return r;
}

TEST(MpitraceImporterTest, RealProfilesMatchAnIndependentReading) {
  const std::string dir = testing::SharedFixtureDir("mpitrace");
  if (dir.empty()) GTEST_SKIP() << "../shared/fixtures/mpitrace is absent";
  const std::vector<std::string> files = testing::ListFiles(dir);
  ASSERT_FALSE(files.empty());
  auto imp = NewMpitraceImporter();
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const RegexReading want = ReadWithRegexes(testing::ReadFile(file));
    ASSERT_GE(want.rank, 0);
    ASSERT_GT(want.calls, 0);
    EXPECT_GT(imp->Detect(file, testing::ReadFile(file)), 50);
    ProfileDb db(":memory:");
    const ImportOutcome o = db.Import(imp.get(), file);
    ASSERT_TRUE(o.status.ok()) << o.status.ToString();
    EXPECT_EQ(o.result.rank, want.rank);
    EXPECT_EQ(o.result.skipped, 0u);
    EXPECT_EQ(o.result.truncated_bytes, 0u);
    EXPECT_TRUE(o.result.warnings.empty()) << o.result.warnings[0];
    const std::string rank = std::to_string(want.rank);
    EXPECT_EQ(db.Int("SELECT sum(calls) FROM mpi_profile WHERE rank = " + rank), want.calls);
    EXPECT_EQ(db.Int("SELECT count(*) FROM mpi_profile WHERE rank = " + rank),
              static_cast<int64_t>(want.routine_calls.size()));
    EXPECT_EQ(db.Int("SELECT comm_ns FROM rank_times WHERE rank = " + rank),
              std::llround(want.comm_s * 1e9));
    EXPECT_EQ(db.Int("SELECT elapsed_ns FROM rank_times WHERE rank = " + rank),
              std::llround(want.elapsed_s * 1e9));
    EXPECT_EQ(db.Int("SELECT maxrss_bytes FROM rank_times WHERE rank = " + rank),
              std::llround(want.maxrss_mib * 1048576));
    EXPECT_EQ(db.Int("SELECT world_size FROM ranks WHERE rank = " + rank), want.world_size);
    EXPECT_EQ(db.Int("SELECT count(*) FROM mpi_msgsize"), static_cast<int64_t>(want.bins));
    for (const auto& [routine, calls] : want.bin_calls) {
      EXPECT_EQ(db.Int("SELECT sum(calls) FROM mpi_msgsize WHERE routine = '" + routine + "'"),
                calls);
      // mpitrace bins every call of a routine that moved bytes.
      EXPECT_EQ(calls, want.routine_calls.at(routine)) << routine;
    }
    EXPECT_EQ(db.Int("SELECT count(*) FROM mpi_msgsize WHERE avg_bytes < min_bytes OR "
                     "avg_bytes > max_bytes"),
              0);
    // The sum of the routines' times is the total communication time (to the printed ms).
    EXPECT_NEAR(db.Real("SELECT sum(time_ns) FROM mpi_profile") / 1e9, want.comm_s,
                0.0005 * static_cast<double>(want.routine_calls.size() + 1));
    if (!want.table_hosts.empty()) {
      EXPECT_EQ(static_cast<int>(want.table_hosts.size()), want.world_size);
      EXPECT_EQ(db.Int("SELECT count(*) FROM rank_times"), want.world_size);
      EXPECT_EQ(db.Int("SELECT count(*) FROM ranks"), want.world_size);
      for (const auto& [r, host] : want.table_hosts) {
        EXPECT_EQ(db.Csv("SELECT host FROM ranks WHERE rank = " + std::to_string(r)),
                  "host\n" + host + "\n");
      }
    }
  }
}

TEST(MpitraceImporterTest, EveryPrefixImportsOrFailsCleanly) {
  for (const std::string& file : AllProfiles()) {
    SCOPED_TRACE(file);
    const std::string text = testing::ReadFile(file);
    const size_t imported = testing::CheckEveryPrefix(ImportText, file, text);
    // Every prefix past the header line imports (partly).
    EXPECT_EQ(imported, text.size() + 1 - (text.find('\n') + 1));
    if (HasFailure()) return;
  }
}

TEST(MpitraceImporterTest, RandomMutantsNeverBreakTheImporter) {
  std::vector<std::string> seeds;
  for (const std::string& file : AllProfiles()) seeds.push_back(testing::ReadFile(file));
  testing::CheckRandomMutants(ImportText, seeds, 20240601, 3000);
}

}  // namespace
}  // namespace tracedb::query
