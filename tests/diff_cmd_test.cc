// `tracedb diff` end to end: two generated runs (tests/report_job_gen.cc), B with a known
// injected slowdown of "backward" by 25% and a straggler rank; the diff must flag backward
// (and the step time) as significantly slower, leave forward and optimizer alone, name the
// straggler, and print the same statistics as the built-in views (plain SQL) in CSV, JSON and
// text. Also: bad input gives a clear error naming the file.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// Rows of a CSV text keyed by their first column + "/" + second.
std::map<std::string, std::map<std::string, std::string>> ParseCsv(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  const auto head = SplitCsv(line);
  std::map<std::string, std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const auto f = SplitCsv(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < head.size() && i < f.size(); ++i) row[head[i]] = f[i];
    rows[f[0] + "/" + (f.size() > 1 ? f[1] : "")] = row;
  }
  return rows;
}

class DiffCmdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = dir_.Sub("a.tdb");
    b_ = dir_.Sub("b.tdb");
    int rc = -1;
    RunCommand(std::string(REPORT_JOB_GEN_PATH) + " " + ShellQuote(a_) + " 4 60 4 --seed 1", &rc);
    ASSERT_EQ(rc, 0);
    RunCommand(std::string(REPORT_JOB_GEN_PATH) + " " + ShellQuote(b_) +
                   " 4 60 4 --seed 2 --slow backward=1.25",
               &rc);
    ASSERT_EQ(rc, 0);
    c_ = dir_.Sub("c.tdb");
    RunCommand(std::string(REPORT_JOB_GEN_PATH) + " " + ShellQuote(c_) +
                   " 4 60 4 --seed 3 --straggler 3=1.3",
               &rc);
    ASSERT_EQ(rc, 0);
  }
  std::string Tracedb(const std::string& args, int* rc) {
    return RunCommand(TracedbBin() + " " + args + " 2>&1", rc);
  }
  TempDir dir_;
  std::string a_, b_, c_;  // c: rank 3 computes 30% longer
};

TEST_F(DiffCmdTest, FindsTheInjectedSlowdownAndOnlyIt) {
  int rc = -1;
  const std::string csv = Tracedb("diff " + ShellQuote(a_) + " " + ShellQuote(b_) + " -f csv", &rc);
  ASSERT_EQ(rc, 0) << csv;
  auto rows = ParseCsv(csv);
  ASSERT_TRUE(rows.count("backward/phase")) << csv;
  const auto& bwd = rows["backward/phase"];
  EXPECT_EQ(bwd.at("significant"), "1");
  EXPECT_NEAR(std::stod(bwd.at("mean_change")), 0.25, 0.03);
  EXPECT_LT(std::stod(bwd.at("p")), 1e-6);
  // Forward and the optimizer are unchanged (a different jitter of +-5% only).
  for (const char* same : {"forward/phase", "optimizer/phase"}) {
    ASSERT_TRUE(rows.count(same)) << same;
    EXPECT_EQ(rows[same].at("significant"), "0") << same << "\n" << csv;
    EXPECT_LT(std::abs(std::stod(rows[same].at("mean_change"))), 0.03) << same;
  }
  // The routine: others wait for the straggler, so it changes too, but it is a routine.
  EXPECT_EQ(rows["MPI_Allreduce/routine"].at("cat"), "mpi");
  // Step time: slower by backward's share of the step (6 of ~11 ms x 25%: about +13%).
  const auto& step = rows["/step"];
  EXPECT_EQ(step.at("significant"), "1");
  EXPECT_NEAR(std::stod(step.at("mean_change")), 0.135, 0.03);
  EXPECT_EQ(step.at("count_a"), "60");
  // The numbers of each run are the built-in views' (plain SQL over events).
  for (const auto& [which, db] : {std::pair{"a", a_}, std::pair{"b", b_}}) {
    const std::string sql = ShellQuote(
        "SELECT name, count, total_ns, p50_ns, p99_ns FROM name_stats_all ORDER BY name");
    const std::string ref = Tracedb("query " + ShellQuote(db) + " " + sql + " --format csv", &rc);
    ASSERT_EQ(rc, 0) << ref;
    auto refs = ParseCsv(ref);
    ASSERT_EQ(refs.size(), 5u) << ref;
    for (const auto& [key, r] : refs) {
      const std::string name = r.at("name");
      const std::string kind = name == "MPI_Allreduce" ? "routine" : "phase";
      const auto& d = rows[name + "/" + kind];
      const std::string w = which;
      EXPECT_EQ(d.at("count_" + w), r.at("count")) << name;
      EXPECT_EQ(d.at("total_" + w + "_ns"), r.at("total_ns")) << name;
      EXPECT_EQ(d.at("p50_" + w + "_ns"), r.at("p50_ns")) << name;
      EXPECT_EQ(d.at("p99_" + w + "_ns"), r.at("p99_ns")) << name;
    }
  }
}

TEST_F(DiffCmdTest, TextAndJsonSayTheSame) {
  int rc = -1;
  const std::string text = Tracedb("diff " + ShellQuote(a_) + " " + ShellQuote(b_), &rc);
  ASSERT_EQ(rc, 0) << text;
  std::istringstream in(text);
  std::string line;
  bool saw_backward = false, saw_forward = false, saw_stragglers = false;
  while (std::getline(in, line)) {
    if (line.rfind("backward ", 0) == 0) {
      saw_backward = true;
      EXPECT_NE(line.find("slower"), std::string::npos) << line;
    }
    if (line.rfind("forward ", 0) == 0) {
      saw_forward = true;
      EXPECT_EQ(line.find("slower"), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(saw_backward && saw_forward) << text;
  // C's worst straggler is rank 3 (the others wait for it in every allreduce).
  const std::string with_straggler = Tracedb("diff " + ShellQuote(a_) + " " + ShellQuote(c_), &rc);
  ASSERT_EQ(rc, 0) << with_straggler;
  std::istringstream in2(with_straggler);
  while (std::getline(in2, line)) {
    if (line.rfind("straggler ranks", 0) == 0) {
      saw_stragglers = true;
      std::istringstream f(line.substr(15));
      std::string ranks_a, ranks_c;
      f >> ranks_a >> ranks_c;
      EXPECT_EQ(ranks_c.substr(0, 2), "3,") << line;
    }
  }
  EXPECT_TRUE(saw_stragglers) << with_straggler;
  // JSON: parsed by Python's json module (an independent parser), checked for the same flags.
  const std::string json_path = dir_.Sub("d.json"), json_c = dir_.Sub("c.json");
  Tracedb("diff " + ShellQuote(a_) + " " + ShellQuote(b_) + " -f json > " + ShellQuote(json_path),
          &rc);
  ASSERT_EQ(rc, 0);
  Tracedb("diff " + ShellQuote(a_) + " " + ShellQuote(c_) + " -f json > " + ShellQuote(json_c),
          &rc);
  ASSERT_EQ(rc, 0);
  const std::string check = RunCommand(
      ShellQuote(Python3Bin()) + " -c " +
          ShellQuote("import json,sys; d=json.load(open(sys.argv[1])); "
                     "n={x['name']: x for x in d['names']}; "
                     "print(n['backward']['significant'], n['forward']['significant'], "
                     "json.load(open(sys.argv[2]))['b']['stragglers'][0], d['a']['steps'], "
                     "round(n['backward']['a']['count']))") +
          " " + ShellQuote(json_path) + " " + ShellQuote(json_c),
      &rc);
  ASSERT_EQ(rc, 0) << check;
  EXPECT_EQ(check, "True False 3 60 240\n");
}

TEST_F(DiffCmdTest, BadInputNamesTheFile) {
  int rc = -1;
  const std::string junk = dir_.Sub("junk.tdb");
  WriteFile(junk, "this is not a database at all, not even close........................");
  std::string out = Tracedb("diff " + ShellQuote(a_) + " " + ShellQuote(junk), &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("junk.tdb"), std::string::npos) << out;
  out = Tracedb("diff " + ShellQuote(a_) + " " + ShellQuote(dir_.Sub("missing.tdb")), &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("missing.tdb"), std::string::npos) << out;
  out = Tracedb("diff " + ShellQuote(a_) + " " + ShellQuote(b_) + " -f xml", &rc);
  EXPECT_EQ(rc, 2) << out;
}

}  // namespace
}  // namespace tracedb::testing
