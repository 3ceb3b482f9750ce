// NVTX with no code change: nvtx_program (plain C, NVTX v3 header-only, never calls tracedb) runs
// with NVTX_INJECTION64_PATH=libtracedb_nvtx.so; `tracedb compact` merges its segments, and the
// database is compared with what the program printed it did: push/pop nesting and the depth NVTX
// returned, marks, counters from payloads, wide strings, domains and registered strings, start/end
// ranges (overlapping, one ended on another thread) on rows that never overlap, thread names, and
// the exact count of a loop. Without the variable the same program records nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "query/open/query_db.h"
#include "tests/db_invariants.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

std::string Spaces(std::string s) {
  for (char& c : s) {
    if (c == '_') c = ' ';
  }
  return s;
}

std::string Q(const std::string& s) { return "'" + s + "'"; }

class NvtxTest : public ::testing::Test {
 protected:
  void Run(const std::string& env, int loop) {
    int rc = 0;
    out_ = RunCommand("env TRACEDB_DIR=" + ShellQuote(tmp_.Sub("trace")) + " " + env + " " +
                          ShellQuote(NVTX_PROGRAM_PATH) + " " + std::to_string(loop),
                      &rc);
    ASSERT_EQ(rc, 0) << out_;
  }
  int64_t Int(const std::string& sql) {
    auto v = db_->QueryInt(sql, -1);
    if (!v.ok()) {
      ADD_FAILURE() << v.status().ToString();
      return -999;
    }
    return *v;
  }
  TempDir tmp_;
  std::string out_;
  std::unique_ptr<engine::Db> db_;
};

TEST_F(NvtxTest, EveryCallBecomesAnEvent) {
  const int loop = 5000;
  Run("NVTX_INJECTION64_PATH=" + ShellQuote(NVTX_LIB_PATH), loop);
  int rc = 0;
  const std::string dbpath = tmp_.Sub("job.tdb");
  const std::string c = RunCommand(TracedbBin() + " compact " + ShellQuote(tmp_.Sub("trace")) +
                                       " -o " + ShellQuote(dbpath) + " -q 2>&1",
                                   &rc);
  ASSERT_EQ(rc, 0) << c;
  ExpectDbInvariants(dbpath);  // tests/db_invariants.h
  auto q = query::OpenQueryDb(dbpath);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  db_ = std::move(*q);

  std::map<std::string, int> pushes, marks, asyncs;
  std::istringstream lines(out_);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream w(line);
    std::string kind, name;
    w >> kind >> name;
    name = Spaces(name);
    if (kind == "push") {
      int depth = -1;
      w >> depth;
      ++pushes[name];
      // NVTX's push returns the nesting level; the database has the same depth.
      if (name != "on ender") {
        EXPECT_EQ(Int("SELECT max(depth) FROM events WHERE name = " + Q(name)), depth) << name;
      }
      std::string word;
      if (w >> word && word == "category") {
        int category = 0;
        w >> category;
        EXPECT_EQ(Int("SELECT count(*) FROM events WHERE name = " + Q(name) +
                      " AND tag = " + std::to_string(category)),
                  1);
      }
    } else if (kind == "mark") {
      ++marks[name];
    } else if (kind == "counter") {
      double v = 0;
      w >> v;
      EXPECT_EQ(Int("SELECT count(*) FROM events WHERE kind = 'counter' AND name = " + Q(name) +
                    " AND value = " + std::to_string(v)),
                1);
    } else if (kind == "async") {
      ++asyncs[name];
    } else if (kind == "loop") {
      EXPECT_EQ(std::stoi(name), loop);
    }
  }
  ASSERT_FALSE(pushes.empty()) << out_;
  for (const auto& [name, n] : pushes) {
    EXPECT_EQ(Int("SELECT count(*) FROM events WHERE kind = 'span' AND lane IS NULL AND "
                  "cat = 'user' AND name = " +
                  Q(name)),
              n)
        << name;
  }
  for (const auto& [name, n] : marks) {
    EXPECT_EQ(
        Int("SELECT count(*) FROM events WHERE kind = 'instant' AND lane IS NULL AND name = " +
            Q(name)),
        n)
        << name;
  }
  for (const auto& [name, n] : asyncs) {
    EXPECT_EQ(
        Int("SELECT count(*) FROM events WHERE kind = 'span' AND lane LIKE 'nvtx % ranges #%' "
            "AND name = " +
            Q(name)),
        n)
        << name;
  }
  // Nesting, the wide string, the domain prefix.
  EXPECT_EQ(Int("SELECT count(*) FROM events c JOIN events p ON p.id = c.parent "
                "WHERE c.name = 'inner' AND p.name = 'outer'"),
            1);
  EXPECT_EQ(Int("SELECT count(*) FROM events c JOIN events p ON p.id = c.parent "
                "WHERE c.name = 'checkpoint' AND p.name = 'inner'"),
            1);
  EXPECT_EQ(Int("SELECT count(*) FROM events WHERE name = 'wide \xc3\xbcn\xc3\xaf'"), 1);
  EXPECT_EQ(Int("SELECT count(*) FROM events WHERE name = 'step'"), loop);
  // Overlapping start/end ranges sit on different rows; each row's ranges never overlap.
  EXPECT_EQ(Int("SELECT count(DISTINCT lane) FROM events WHERE name IN ('async A', 'async B')"), 2);
  EXPECT_EQ(
      Int("SELECT count(*) FROM events WHERE name IN ('async A', 'async B') AND dur >= 1000000"),
      2);
  EXPECT_EQ(Int("SELECT count(*) FROM events WHERE name = 'NCCL: bucket 3' AND "
                "lane = 'nvtx NCCL ranges #0'"),
            1);
  // Thread names from nvtxNameOsThread.
  EXPECT_EQ(Int("SELECT count(*) FROM events WHERE name = 'step' AND track_name = 'trainer'"),
            loop);
  EXPECT_EQ(Int("SELECT count(*) FROM events WHERE name = 'on ender' AND track_name = 'ender'"), 1);
  // Everything nests; nothing was dropped.
  EXPECT_EQ(Int("SELECT coalesce(sum(value), 0) FROM stats WHERE name IN "
                "('improper_nesting', 'unmatched_end', 'negative_duration', 'dropped')"),
            0);
}

TEST_F(NvtxTest, WithoutTheVariableNothingIsRecorded) {
  Run("", 100);
  EXPECT_NE(out_.find("loop 100"), std::string::npos) << out_;
  EXPECT_FALSE(std::filesystem::exists(tmp_.Sub("trace")));
}

}  // namespace
}  // namespace tracedb::testing
