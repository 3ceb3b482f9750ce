// Tests of the mpiP importer: detection, errors, the Aggregate sections as the source of a site's
// rank -1 row when the callsite statistics are missing (3.4 and 3.5 layouts), every real report in
// ../shared/fixtures/mpip against an independent (regex) reading, every prefix of every fixture,
// and random mutants.
// Thread safety: test code, one thread.
#include "query/import/mpip/mpip_importer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/mpi_profile_test_util.h"
#include "tests/test_util.h"

namespace tracedb::query {
namespace {

using testing::ImportOutcome;
using testing::ProfileDb;

Status ImportText(std::string_view path, std::string_view text, engine::TraceWriter* w,
                  ImportResult* r) {
  return ImportMpipText(path, text, text.size(), w, r);
}

std::string Fixture(const std::string& rel) {
  return testing::SourceRoot() + "/fixtures/import/mpip/" + rel;
}

std::vector<std::string> AllReports() {
  std::vector<std::string> files;
  for (const char* c : {"v34", "v35", "malformed", "truncated"}) {
    for (const std::string& f : testing::ListFiles(Fixture(c))) {
      if (!f.ends_with("expected.csv")) files.push_back(f);
    }
  }
  const std::string shared = testing::SharedFixtureDir("mpip");
  if (!shared.empty()) {
    for (const std::string& f : testing::ListFiles(shared)) files.push_back(f);
  }
  return files;
}

TEST(MpipImporterTest, DetectsByContentAndFileName) {
  auto imp = NewMpipImporter();
  EXPECT_STREQ(imp->name(), "mpip");
  const std::string head = "@ mpiP\n@ Command : ./a.out \n@ Version                  : 3.5.0\n";
  EXPECT_EQ(imp->Detect("/runs/a.out.8.1234.1.mpiP", head), 100);
  EXPECT_EQ(imp->Detect("/runs/hpc-mpip_driver.8.253.1.mpiP.gz", head), 100);
  EXPECT_EQ(imp->Detect("/runs/report.txt", head), 80);
  EXPECT_EQ(imp->Detect("/runs/report.txt", "mpirun output\n@ mpiP\n@ Command : x\n"), 40);
  EXPECT_EQ(imp->Detect("/runs/a.out.8.1234.1.mpiP", "Data for MPI rank 0 of 8:\n"), 0);
  EXPECT_EQ(imp->Detect("/runs/a.out.8.1234.1.mpiP", ""), 0);
  EXPECT_EQ(imp->Detect("/runs/a.8.mpiP", head), 80);  // not app.nprocs.pid.n
}

TEST(MpipImporterTest, AFileNotInTheFormatIsAnErrorNamingFileAndLine) {
  ProfileDb db(":memory:");
  ImportOutcome o = db.ImportText(ImportText, "runs/x.mpiP", "\n@ mpiP2\n");
  EXPECT_EQ(o.status.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(o.status.message().find("runs/x.mpiP: line 2: not an mpiP report"), std::string::npos)
      << o.status.ToString();
  o = db.ImportText(ImportText, "runs/empty.mpiP", "\n\n");
  EXPECT_NE(o.status.message().find("runs/empty.mpiP: empty file"), std::string::npos);
  o = db.ImportText(ImportText, "runs/cut.mpiP", "@ mp");
  EXPECT_NE(o.status.message().find("runs/cut.mpiP: line 1: file ends inside its first line"),
            std::string::npos);
  EXPECT_EQ(db.Int("SELECT count(*) FROM sources"), 0);
  auto imp = NewMpipImporter();
  o = db.Import(imp.get(), "/nonexistent/a.1.2.3.mpiP");
  EXPECT_EQ(o.status.code(), Status::Code::kIOError);
}

// A report cut before its callsite statistics still yields each site's rank -1 row from the
// Aggregate sections when they give the site's call count: every site in 3.5+ (Aggregate Time
// has a Count column), only the sites that sent data in 3.4 (from Aggregate Sent Message Size).
TEST(MpipImporterTest, AggregateSectionsStandInForMissingCallsiteStatistics) {
  for (const char* rel : {"v35/cg.3.27182.1.mpiP", "v34/ring.4.3141.1.mpiP"}) {
    SCOPED_TRACE(rel);
    const std::string text = testing::ReadFile(Fixture(rel));
    const size_t cut = text.find(
        "---------------------------------------------------------------"
        "------------\n@--- Callsite Time statistics");
    ASSERT_NE(cut, std::string::npos);
    ProfileDb db(":memory:");
    const ImportOutcome o = db.ImportText(ImportText, rel, text.substr(0, cut));
    ASSERT_TRUE(o.status.ok()) << o.status.ToString();
    EXPECT_EQ(o.result.truncated_bytes, 0u);
    EXPECT_EQ(db.Int("SELECT value FROM stats WHERE name = 'import_truncated'"), 1);
    EXPECT_EQ(db.Int("SELECT count(*) FROM mpi_callsites WHERE rank >= 0"), 0);
    EXPECT_EQ(db.Int("SELECT count(*) FROM mpi_profile"), 0);
    if (std::string(rel).starts_with("v35")) {
      EXPECT_EQ(db.Csv("SELECT site, routine, calls, mean_ns, app_pct, mpi_pct, bytes_sum, "
                       "location FROM mpi_callsites ORDER BY site"),
                "site,routine,calls,mean_ns,app_pct,mpi_pct,bytes_sum,location\n"
                "1,MPI_Isend,3600,20472,0.04,0.24,3770000000,halo.c:120 exchange; main.c:40 main\n"
                "2,MPI_Waitall,1800,4833333,4.8,27.82,NULL,halo.c:131 exchange; main.c:40 main\n"
                "3,MPI_Allreduce,1800,12500000,12.4,71.94,14400,solver.c:77 dot; solver.c:150 "
                "cg_solve\n"
                "4,MPI_Bcast,9,51222,0,0,864,0x4007f0 [unknown]\n");
    } else {
      EXPECT_EQ(db.Csv("SELECT site, routine, calls, mean_ns, bytes_sum FROM mpi_callsites "
                       "ORDER BY site"),
                "site,routine,calls,mean_ns,bytes_sum\n"
                "1,MPI_Send,400,12500,1640000\n"
                "3,MPI_Allreduce,200,2000000,1600\n");
    }
    // The MPI Time section still gives every rank's times.
    EXPECT_EQ(db.Int("SELECT count(*) FROM rank_times WHERE elapsed_ns > 0 AND comm_ns > 0"),
              db.Int("SELECT count(*) FROM ranks"));
  }
}

// What a plain reading of a report with regular expressions finds.
struct RegexReading {
  int declared_sites = -1;
  std::set<int> listed_sites;
  std::map<int, std::string> hosts;
  std::map<int, std::pair<double, double>> times;  // rank -> (AppTime, MPITime)
  struct Row {
    std::string name;
    int site;
    std::string rank;
    int64_t count;
    double max, mean, min;
  };
  std::vector<Row> time_rows;
  std::map<std::pair<int, std::string>, double> sent_sums;  // (site, rank) -> Sum
};

RegexReading ReadWithRegexes(const std::string& text) {
  static const std::regex kSites(R"(^@--- Callsites: (\d+) )");
  static const std::regex kSite(R"(^ +(\d+) +0 +\S+)");
  static const std::regex kHost(R"(^@ MPI Task Assignment +: (\d+) (\S+)$)");
  static const std::regex kTime(R"(^ +(\d+) +([0-9.e+]+) +([0-9.e+]+) +[0-9.]+$)");
  static const std::regex kStat(
      R"(^(\w+) +(\d+) +(\d+|\*) +(\d+) +(\S+) +(\S+) +(\S+) +(\S+) +(\S+)$)");
  static const std::regex kSent(R"(^(\w+) +(\d+) +(\d+|\*) +(\d+) +\S+ +\S+ +\S+ +(\S+)$)");
  RegexReading r;
  std::istringstream in(text);
  std::string line;
  std::string section;
  std::smatch m;
  while (std::getline(in, line)) {
    if (line.starts_with("@--- ")) {
      section = line.substr(5, line.find(" -") - 5);
      if (std::regex_search(line, m, kSites)) r.declared_sites = std::stoi(m[1]);
    } else if (std::regex_match(line, m, kHost)) {
      r.hosts[std::stoi(m[1])] = m[2];
    } else if (section == "MPI Time (seconds)" && std::regex_match(line, m, kTime)) {
      r.times[std::stoi(m[1])] = {std::stod(m[2]), std::stod(m[3])};
    } else if (section.starts_with("Callsites") && std::regex_search(line, m, kSite)) {
      r.listed_sites.insert(std::stoi(m[1]));
    } else if (section.starts_with("Callsite Time") && std::regex_match(line, m, kStat)) {
      r.time_rows.push_back({m[1], std::stoi(m[2]), m[3], std::stoll(m[4]), std::stod(m[5]),
                             std::stod(m[6]), std::stod(m[7])});
    } else if (section.starts_with("Callsite Message Sent") && std::regex_match(line, m, kSent)) {
      r.sent_sums[{std::stoi(m[2]), m[3]}] = std::stod(m[5]);
    }
  }
  return r;
}

// Checks the imported tables of one complete report against the regex reading, including that
// each site's `*` row equals the sum over its ranks within mpiP's rounding (3 or 4 digits).
void CheckReport(const std::string& file) {
  SCOPED_TRACE(file);
  const std::string text = testing::ReadFile(file);
  const RegexReading want = ReadWithRegexes(text);
  ASSERT_GT(want.declared_sites, 0);
  auto imp = NewMpipImporter();
  EXPECT_GT(imp->Detect(file, text), 50);
  ProfileDb db(":memory:");
  const ImportOutcome o = db.Import(imp.get(), file);
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_EQ(o.result.rank, -1);
  EXPECT_EQ(o.result.skipped, 0u);
  EXPECT_EQ(o.result.truncated_bytes, 0u);

  EXPECT_EQ(static_cast<int>(want.listed_sites.size()), want.declared_sites);
  EXPECT_EQ(db.Int("SELECT count(DISTINCT site) FROM mpi_callsites"), want.declared_sites);
  EXPECT_EQ(db.Int("SELECT count(*) FROM mpi_callsites WHERE rank = -1"), want.declared_sites);
  EXPECT_EQ(db.Int("SELECT count(*) FROM mpi_callsites WHERE location IS NULL"), 0);
  ASSERT_FALSE(want.times.empty());
  EXPECT_EQ(db.Int("SELECT count(*) FROM rank_times"), static_cast<int64_t>(want.times.size()));
  for (const auto& [rank, t] : want.times) {
    const std::string where = " FROM rank_times WHERE rank = " + std::to_string(rank);
    EXPECT_EQ(db.Int("SELECT elapsed_ns" + where), std::llround(t.first * 1e9)) << rank;
    EXPECT_EQ(db.Int("SELECT comm_ns" + where), std::llround(t.second * 1e9)) << rank;
  }
  for (const auto& [rank, host] : want.hosts) {
    EXPECT_EQ(db.Csv("SELECT host, world_size FROM ranks WHERE rank = " + std::to_string(rank)),
              "host,world_size\n" + host + "," + std::to_string(want.hosts.size()) + "\n");
  }

  // Every row of the time statistics, as read, is in the table.
  std::map<int, int64_t> calls_by_rank;
  for (const auto& row : want.time_rows) {
    const std::string rank = row.rank == "*" ? "-1" : row.rank;
    const std::string where = " FROM mpi_callsites WHERE rank = " + rank +
                              " AND site = " + std::to_string(row.site) + " AND routine = 'MPI_" +
                              row.name + "'";
    EXPECT_EQ(db.Int("SELECT calls" + where), row.count);
    EXPECT_EQ(db.Int("SELECT max_ns" + where), std::llround(row.max * 1e6));
    EXPECT_EQ(db.Int("SELECT mean_ns" + where), std::llround(row.mean * 1e6));
    EXPECT_EQ(db.Int("SELECT min_ns" + where), std::llround(row.min * 1e6));
    if (row.rank != "*") calls_by_rank[std::stoi(row.rank)] += row.count;
    const auto sent = want.sent_sums.find({row.site, row.rank});
    if (sent != want.sent_sums.end()) {
      EXPECT_DOUBLE_EQ(db.Real("SELECT bytes_sum" + where), sent->second);
    }
  }
  for (const auto& [rank, calls] : calls_by_rank) {
    EXPECT_EQ(db.Int("SELECT sum(calls) FROM mpi_profile WHERE rank = " + std::to_string(rank)),
              calls);
  }

  // `*` rows against the sum over the ranks.
  const std::string per_site =
      "SELECT a.site, a.calls, sum(r.calls), a.calls * a.mean_ns, sum(r.calls * r.mean_ns), "
      "a.max_ns, max(r.max_ns), a.min_ns, min(r.min_ns), a.bytes_sum, sum(r.bytes_sum) "
      "FROM mpi_callsites a JOIN mpi_callsites r ON r.site = a.site AND r.routine = a.routine "
      "AND r.rank >= 0 WHERE a.rank = -1 GROUP BY a.site, a.routine";
  auto st = db.db()->Prepare(per_site);
  ASSERT_TRUE(st.ok());
  int sites = 0;
  for (;;) {
    auto row = st->Step();
    ASSERT_TRUE(row.ok());
    if (!*row) break;
    ++sites;
    SCOPED_TRACE("site " + std::to_string(st->Int(0)));
    EXPECT_EQ(st->Int(1), st->Int(2));
    EXPECT_NEAR(st->Double(3), st->Double(4), 0.01 * st->Double(4));  // means have 3 digits
    EXPECT_EQ(st->Int(5), st->Int(6));
    EXPECT_EQ(st->Int(7), st->Int(8));
    if (!st->IsNull(9)) {
      EXPECT_NEAR(st->Double(9), st->Double(10), 0.001 * st->Double(10));
    }
  }
  EXPECT_EQ(sites, want.declared_sites);
  // mpi_profile's time is Σ count × mean over the rank's sites of the routine.
  EXPECT_NEAR(db.Real("SELECT sum(time_ns) FROM mpi_profile"),
              db.Real("SELECT sum(calls * mean_ns) FROM mpi_callsites WHERE rank >= 0"),
              0.001 * db.Real("SELECT sum(time_ns) FROM mpi_profile"));
}

TEST(MpipImporterTest, RealReportsMatchAnIndependentReading) {
  const std::string dir = testing::SharedFixtureDir("mpip");
  if (dir.empty()) GTEST_SKIP() << "../shared/fixtures/mpip is absent";
  const std::vector<std::string> files = testing::ListFiles(dir);
  ASSERT_FALSE(files.empty());
  for (const std::string& file : files) CheckReport(file);
}

TEST(MpipImporterTest, HandMadeReportsMatchAnIndependentReading) {
  CheckReport(Fixture("v34/ring.4.3141.1.mpiP"));
  CheckReport(Fixture("v35/cg.3.27182.1.mpiP"));
}

TEST(MpipImporterTest, EveryPrefixImportsOrFailsCleanly) {
  for (const std::string& file : AllReports()) {
    SCOPED_TRACE(file);
    const std::string text = testing::ReadFile(file);
    const size_t imported = testing::CheckEveryPrefix(ImportText, file, text);
    EXPECT_EQ(imported, text.size() + 1 - (text.find('\n') + 1));
    if (HasFailure()) return;
  }
}

TEST(MpipImporterTest, RandomMutantsNeverBreakTheImporter) {
  std::vector<std::string> seeds;
  for (const std::string& file : AllReports()) seeds.push_back(testing::ReadFile(file));
  testing::CheckRandomMutants(ImportText, seeds, 20240602, 3000);
}

}  // namespace
}  // namespace tracedb::query
