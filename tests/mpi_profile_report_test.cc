// `tracedb report mpi` over imported mpitrace profiles, checked line by line against the
// profiles' own text: every real profile in ../shared/fixtures/mpitrace, each file alone and each
// job's files together. The expected lines are read from the profile with plain string matching
// (no importer code): rank 0's "minimum/median/maximum communication time = X sec for task T",
// every file's "MPI task T of N had the ... communication time.", its totals, its routine table
// rows and its message-size rows. Also checks that a partial input is not called "every rank's
// calls together" and gets no section for a rank whose file is absent.
// Skipped when ../shared/fixtures is absent, failed then when CI=true.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "query/open/query_db.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

bool StartsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

std::string TrimLeft(const std::string& s) {
  size_t i = s.find_first_not_of(' ');
  return i == std::string::npos ? "" : s.substr(i);
}

// What one profile says, read from its text.
struct ProfileText {
  int rank = -1, world = 0;
  std::vector<std::string> summary;  // "  minimum communication time = … sec for task T"
  std::vector<std::string> own;      // "MPI task …", "total … time = …", "user cpu time …"
  std::vector<std::string> routine_rows;
  std::vector<std::string> size_rows;  // "<routine>|<value line>"
};

ProfileText ReadProfile(const std::string& path) {
  ProfileText p;
  const std::vector<std::string> lines = Lines(ReadFile(path));
  int dashes = 0;
  bool in_sizes = false;
  std::string size_routine;
  for (const std::string& line : lines) {
    if (StartsWith(line, "Data for MPI rank ")) {
      std::istringstream in(line.substr(18));
      std::string of;
      in >> p.rank >> of >> p.world;
      continue;
    }
    if (StartsWith(line, "-----")) {
      ++dashes;
      in_sizes = false;  // a rule closes the message-size distributions
      continue;
    }
    if (dashes == 2 && !line.empty()) p.routine_rows.push_back(line);
    if (StartsWith(line, "MPI task ") || StartsWith(line, "total communication time") ||
        StartsWith(line, "total elapsed time") || StartsWith(line, "user cpu time") ||
        StartsWith(line, "system time")) {
      p.own.push_back(line);
    }
    const std::string t = TrimLeft(line);
    if (StartsWith(t, "minimum communication time =") ||
        StartsWith(t, "median  communication time =") ||
        StartsWith(t, "maximum communication time =")) {
      p.summary.push_back(line);
    }
    if (line == "Message size distributions:") {
      in_sizes = true;
    } else if (in_sizes && !line.empty() && line[0] != ' ') {
      size_routine = line.substr(0, line.find(' '));
    } else if (in_sizes && !line.empty()) {
      p.size_rows.push_back(size_routine + "|" + line);
    }
  }
  return p;
}

// The report's section of one rank: from "Data for MPI rank R of" to the next section.
std::vector<std::string> Section(const std::vector<std::string>& report, int rank) {
  std::vector<std::string> out;
  bool in = false;
  const std::string head = "Data for MPI rank " + std::to_string(rank) + " of ";
  for (const std::string& line : report) {
    if (StartsWith(line, "Data for MPI rank ") || StartsWith(line, "MPI timing summary") ||
        StartsWith(line, "No calls in the input")) {
      in = StartsWith(line, head);
    }
    if (in) out.push_back(line);
  }
  return out;
}

bool Contains(const std::vector<std::string>& lines, const std::string& line) {
  for (const std::string& l : lines) {
    if (l == line) return true;
  }
  return false;
}

// The fixture folder, or "" (the test skips; with CI=true it fails).
std::string FixtureDir() {
  const std::string dir = SharedFixtures() + "/mpitrace";
  if (fs::is_directory(dir)) return dir;
  const char* ci = std::getenv("CI");
  if (ci && std::string(ci) == "true") ADD_FAILURE() << dir << " is missing and CI=true";
  return "";
}

// Imports `files`, runs the report, and checks it against the profiles' own lines.
void CheckReport(const std::vector<std::string>& files) {
  TempDir tmp;
  const std::string db = tmp.Sub("p.tdb");
  std::string cmd = TracedbBin() + " import";
  for (const std::string& f : files) cmd += " " + ShellQuote(f);
  int rc = 0;
  std::string out = RunCommand(cmd + " -o " + ShellQuote(db) + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string text =
      RunCommand(TracedbBin() + " report mpi --all-ranks " + ShellQuote(db) + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << text;
  const std::vector<std::string> report = Lines(text);
  std::set<int> present;
  int world = 0;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    const ProfileText p = ReadProfile(f);
    ASSERT_GE(p.rank, 0);
    present.insert(p.rank);
    world = p.world;
    for (const std::string& line : p.summary) EXPECT_TRUE(Contains(report, line)) << line;
    const std::vector<std::string> section = Section(report, p.rank);
    ASSERT_FALSE(section.empty()) << text;
    for (const std::string& line : p.own) EXPECT_TRUE(Contains(section, line)) << line << text;
    for (const std::string& line : p.routine_rows) {
      EXPECT_TRUE(Contains(section, line)) << "routine row: " << line << "\n" << text;
    }
    // Message-size rows: the report prints mpitrace's columns, then the bin.
    for (const std::string& row : p.size_rows) {
      const std::string routine = row.substr(0, row.find('|'));
      const std::string line = row.substr(row.find('|') + 1);
      bool found = false, in_routine = false;
      for (const std::string& l : section) {
        if (!l.empty() && l[0] != ' ') in_routine = StartsWith(l, routine + " ");
        if (in_routine && StartsWith(l, line + "   ")) found = true;
      }
      EXPECT_TRUE(found) << routine << ": " << line << "\n" << text;
    }
  }
  // Every "MPI task T of N had the X" line the report prints is one the profiles print.
  std::set<std::string> stated;
  for (const std::string& f : files) {
    for (const std::string& line : ReadProfile(f).own) stated.insert(line);
  }
  for (const std::string& line : report) {
    if (StartsWith(line, "MPI task ")) {
      EXPECT_TRUE(stated.count(line)) << line << "\n" << text;
    }
  }
  // No section for a rank whose file is absent; a partial input is not "every rank's calls".
  for (int r = 0; r < world; ++r) {
    if (!present.count(r)) {
      EXPECT_TRUE(Section(report, r).empty()) << "rank " << r << "\n" << text;
    }
  }
  const bool every = text.find("every rank's calls together") != std::string::npos;
  EXPECT_EQ(every, static_cast<int>(present.size()) == world) << text;
}

TEST(MpiReport, EachRealProfileAloneMatchesItsOwnLines) {
  const std::string dir = FixtureDir();
  if (dir.empty()) GTEST_SKIP() << "../shared/fixtures/mpitrace is absent";
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    SCOPED_TRACE(e.path().string());
    CheckReport({e.path().string()});
    ++files;
  }
  EXPECT_GT(files, 0);
}

TEST(MpiReport, EachRealJobMatchesItsOwnLines) {
  const std::string dir = FixtureDir();
  if (dir.empty()) GTEST_SKIP() << "../shared/fixtures/mpitrace is absent";
  // Files of one job share the name up to the rank suffix: mpi_profile.<jobid>.<rank>.
  std::map<std::string, std::vector<std::string>> jobs;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    jobs[name.substr(0, name.rfind('.'))].push_back(e.path().string());
  }
  EXPECT_GE(jobs.size(), 2u);
  for (auto& [job, files] : jobs) {
    SCOPED_TRACE(job);
    std::sort(files.begin(), files.end());
    CheckReport(files);
  }
}

// A minimal mpitrace profile of rank `rank` of `world` whose one routine took `secs` seconds.
std::string ProfileText(int rank, int world, double secs) {
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "Data for MPI rank %d of %d:\n"
                "Times from MPI_Init() to MPI_Finalize().\n"
                "-----------------------------------------------------------------------\n"
                "MPI Routine                        #calls     avg. bytes      time(sec)\n"
                "-----------------------------------------------------------------------\n"
                "MPI_Allreduce                          10            8.0          %.3f\n"
                "-----------------------------------------------------------------------\n"
                "total communication time = %.3f seconds.\n"
                "total elapsed time       = 10.000 seconds.\n",
                rank, world, secs, secs);
  return buf;
}

// The lines checked above are mpitrace's; this checks the lower median on a job that has every
// rank but does not state its extremes (rank 0's file absent): 4 hand-written profiles whose
// times 4, 1, 3, 2 put the lower median at 2 s (task 3), not the upper one (3 s, task 2).
TEST(MpiReport, ComputedMedianIsTheLowerOne) {
  TempDir tmp;
  const double secs[] = {4, 1, 3, 2};
  std::string files;
  for (int r = 0; r < 4; ++r) {
    const std::string path = tmp.Sub("mpi_profile.7." + std::to_string(r));
    WriteFile(path, ProfileText(r, 4, secs[r]));
    files += " " + ShellQuote(path);
  }
  int rc = 0;
  std::string out =
      RunCommand(TracedbBin() + " import" + files + " -o " + tmp.Sub("j.tdb") + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  out = RunCommand(TracedbBin() + " report mpi " + tmp.Sub("j.tdb") + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("  minimum communication time = 1.000 sec for task 1\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("  median  communication time = 2.000 sec for task 3\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("  maximum communication time = 4.000 sec for task 0\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("every rank's calls together"), std::string::npos) << out;
}

int ImportArgs(const std::string& args, std::string* out) {
  int rc = 0;
  *out = RunCommand(TracedbBin() + " import " + args + " 2>&1", &rc);
  return rc;
}

int64_t QueryInt(const std::string& db, const std::string& sql) {
  auto d = query::OpenQueryDb(db);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  if (!d.ok()) return -1;
  auto v = (*d)->QueryInt(sql, -1);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : -1;
}

// mpitrace profiles of two jobs: a rank imported twice, another world size, another job id.
TEST(MpiReport, ProfilesOfTwoJobsAreKeptApart) {
  TempDir dir;
  auto profile = [&](const std::string& name, int rank, int world, double secs) {
    WriteFile(dir.Sub(name), ProfileText(rank, world, secs));
    return "'" + dir.Sub(name) + "'";
  };
  const std::string a0 = profile("mpi_profile.100.0", 0, 2, 1);
  const std::string a1 = profile("mpi_profile.100.1", 1, 2, 2);
  const std::string b0 = profile("mpi_profile.200.0", 0, 2, 3);  // same rank, other job
  const std::string c1 = profile("mpi_profile.300.1", 1, 4, 4);  // other world size
  const std::string d1 = profile("mpi_profile.400.1", 1, 2, 5);  // other job id only
  std::string out;
  EXPECT_EQ(ImportArgs(a0 + " " + b0 + " -o " + dir.Sub("j.tdb"), &out), 1) << out;
  EXPECT_NE(out.find("rank 0 is already imported"), std::string::npos) << out;
  EXPECT_EQ(QueryInt(dir.Sub("j.tdb"), "SELECT time_ns FROM mpi_profile WHERE rank = 0"),
            1000000000);
  EXPECT_EQ(ImportArgs(a0 + " " + c1 + " -o " + dir.Sub("k.tdb"), &out), 1) << out;
  EXPECT_NE(out.find("a world of 4 ranks, the database holds one of 2"), std::string::npos) << out;
  EXPECT_EQ(ImportArgs(a0 + " " + d1 + " -o " + dir.Sub("l.tdb"), &out), 1) << out;
  EXPECT_NE(out.find("mpitrace job 400, the database holds job 100"), std::string::npos) << out;
  // One job's files go in together; --separate puts the others beside them.
  ASSERT_EQ(
      ImportArgs(a0 + " " + a1 + " " + b0 + " " + d1 + " --separate -o " + dir.Sub("s.tdb"), &out),
      0)
      << out;
  EXPECT_EQ(QueryInt(dir.Sub("s.tdb"), "SELECT sum(time_ns) FROM mpi_profile"), 3000000000);
  EXPECT_EQ(QueryInt(dir.Sub("s-2.tdb"), "SELECT sum(time_ns) FROM mpi_profile"), 3000000000);
  EXPECT_EQ(QueryInt(dir.Sub("s-3.tdb"), "SELECT sum(time_ns) FROM mpi_profile"), 5000000000);
}

}  // namespace
}  // namespace tracedb::testing
