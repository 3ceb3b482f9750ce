// Communicators are stored once per distinct member list (schema version 2: comm_groups and
// rank_comms, with `comms` their view). The reference is the spec's own COMMS lines, parsed
// here from the text, and the DB is read with the stock sqlite3 program.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <vector>

#include "tests/segment_fixture.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;

// Three ranks: the world (0,1,2) on every rank, a sub-communicator (0,2) on ranks 0 and 2, and
// a communicator without a member list on rank 1.
constexpr const char* kSpecRanks01 = R"(
file trace 0 100 0 host=node0 world=3
anchor 1000000000000 0
string 1 MPI_Allreduce
thread 1 10 main
comm 1 3 0 0,1,2
comm 2 2 0 0,2
events 1
X 1000 100 1 comm=1 seq=1
X 2000 100 1 comm=2 seq=1
end
file trace 1 200 0 host=node0 world=3
anchor 1000000000000 0
string 1 MPI_Allreduce
thread 1 11 main
comm 1 3 1 0,1,2
comm 7 4 3
events 1
X 1000 100 1 comm=1 seq=1
end
)";

constexpr const char* kSpecRank2 = R"(
file trace 2 300 0 host=node1 world=3
anchor 1000000000000 0
string 1 MPI_Allreduce
thread 1 12 main
comm 1 3 2 0,1,2
comm 2 2 1 0,2
events 1
X 1000 100 1 comm=1 seq=1
X 2000 100 1 comm=2 seq=1
end
)";

// The comms rows a spec describes, as sqlite3's CSV mode prints
// `SELECT rank, comm, size, rank_in_comm, members FROM comms ORDER BY rank, comm`.
std::string ExpectedComms(const std::string& spec) {
  std::vector<std::pair<std::pair<int, int>, std::string>> rows;
  std::istringstream in(spec);
  std::string line;
  int rank = -1;
  while (std::getline(in, line)) {
    std::istringstream w(line);
    std::string kw;
    w >> kw;
    if (kw == "file") {
      std::string dir;
      w >> dir >> rank;
    } else if (kw == "comm") {
      int id = 0, size = 0, rank_in_comm = 0;
      std::string members;
      w >> id >> size >> rank_in_comm >> members;
      if (members.find(',') != std::string::npos) members = "\"" + members + "\"";
      rows.push_back({{rank, id},
                      std::to_string(rank) + "," + std::to_string(id) + "," + std::to_string(size) +
                          "," + std::to_string(rank_in_comm) + "," + members + "\n"});
    }
  }
  std::sort(rows.begin(), rows.end());
  std::string out;
  for (const auto& r : rows) out += r.second;
  return out;
}

std::string Sql(const std::string& db, const std::string& sql) {
  int rc = 0;
  const std::string out =
      RunCommand("sqlite3 -csv " + ShellQuote(db) + " " + ShellQuote(sql) + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << sql << ": " << out;
  return out;
}

std::string TracedbQuery(const std::string& db, const std::string& sql) {
  int rc = 0;
  const std::string out = RunCommand(
      TracedbBin() + " query " + ShellQuote(db) + " " + ShellQuote(sql) + " --format csv 2>&1",
      &rc);
  EXPECT_EQ(rc, 0) << sql << ": " << out;
  return out;
}

void Compact(const std::string& trace, const std::string& db) {
  int rc = 0;
  const std::string out = RunCommand(TracedbBin() + " compact " + ShellQuote(trace) + " -o " +
                                         ShellQuote(db) + " --finish -q 2>&1",
                                     &rc);
  ASSERT_EQ(rc, 0) << out;
}

constexpr const char* kCommsSql =
    "SELECT rank, comm, size, rank_in_comm, members FROM comms ORDER BY rank, comm";

TEST(CommGroups, RanksOfOneCommunicatorShareOneGroupRow) {
  TempDir tmp;
  const std::string spec = std::string(kSpecRanks01) + kSpecRank2;
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), spec).ok());
  const std::string db = tmp.Sub("job.tdb");
  Compact(tmp.Sub("trace"), db);

  EXPECT_EQ(Sql(db, kCommsSql), ExpectedComms(spec));
  // Two distinct member lists in the spec: two groups, each stored once.
  EXPECT_EQ(Sql(db, "SELECT size, members FROM comm_groups ORDER BY members"),
            "3,\"0,1,2\"\n2,\"0,2\"\n");
  EXPECT_EQ(Sql(db, "SELECT count(DISTINCT group_id), count(*) FROM rank_comms WHERE comm = 1"),
            "1,3\n");
  EXPECT_EQ(Sql(db, "SELECT count(DISTINCT group_id), count(*) FROM rank_comms WHERE comm = 2"),
            "1,2\n");
  EXPECT_EQ(Sql(db, "SELECT group_id IS NULL FROM rank_comms WHERE comm = 7"), "1\n");
  EXPECT_EQ(Sql(db, "SELECT value FROM meta WHERE key = 'schema_version'"), "3\n");
  EXPECT_EQ(Sql(db, "PRAGMA integrity_check"), "ok\n");
  // The SQL layer's view of the same rows (tracedb query adds its header line).
  EXPECT_EQ(TracedbQuery(db, kCommsSql),
            "rank,comm,size,rank_in_comm,members\n" + ExpectedComms(spec));
}

TEST(CommGroups, ALaterRankAndAReRunReuseTheGroupByContent) {
  TempDir tmp;
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), kSpecRanks01).ok());
  const std::string db = tmp.Sub("job.tdb");
  Compact(tmp.Sub("trace"), db);
  EXPECT_EQ(Sql(db, kCommsSql), ExpectedComms(kSpecRanks01));
  EXPECT_EQ(Sql(db, "SELECT count(*) FROM comm_groups"), "2\n");

  // Rank 2's files arrive later: its world list is the one already stored.
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), kSpecRank2).ok());
  Compact(tmp.Sub("trace"), db);
  Compact(tmp.Sub("trace"), db);  // and a re-run over the same files
  const std::string spec = std::string(kSpecRanks01) + kSpecRank2;
  EXPECT_EQ(Sql(db, kCommsSql), ExpectedComms(spec));
  EXPECT_EQ(Sql(db, "SELECT count(*) FROM comm_groups"), "2\n");
  EXPECT_EQ(Sql(db, "SELECT count(DISTINCT group_id) FROM rank_comms WHERE comm = 1"), "1\n");
}

// fixtures/formats/v1: a schema-version-1 DB (comms a table with a member list per rank)
// reads as it is, and is upgraded to the groups when written to.
TEST(CommGroups, VersionOneDbReadsAndUpgradesWhenWritten) {
  const std::string dir = SourceRoot() + "/fixtures/formats/v1/spec";
  const std::string spec = ReadFile(dir + "/input.spec");
  ASSERT_FALSE(spec.empty());
  const std::string expected = ExpectedComms(spec);
  ASSERT_EQ(expected, "0,1,2,0,\"0,1\"\n1,1,2,1,\"0,1\"\n");
  TempDir tmp;
  const std::string db = tmp.Sub("job.tdb");
  fs::copy_file(dir + "/job.tdb", db);
  ASSERT_EQ(Sql(db, "SELECT value FROM meta WHERE key = 'schema_version'"), "1\n");

  // Read-only: the old table answers, and the file is not changed.
  EXPECT_EQ(TracedbQuery(db, "SELECT * FROM comms ORDER BY rank, comm"),
            "rank,comm,size,rank_in_comm,members\n" + expected);
  EXPECT_EQ(Sql(db, "SELECT value FROM meta WHERE key = 'schema_version'"), "1\n");

  // Compacting the same (copied) segments into it opens it for writing: upgraded, same rows.
  const std::string trace = tmp.Sub("trace");
  fs::copy(dir + "/trace", trace, fs::copy_options::recursive);
  Compact(trace, db);
  EXPECT_EQ(Sql(db, "SELECT value FROM meta WHERE key = 'schema_version'"), "2\n");
  EXPECT_EQ(Sql(db, "SELECT type FROM sqlite_master WHERE name = 'comms'"), "view\n");
  EXPECT_EQ(Sql(db, kCommsSql), expected);
  EXPECT_EQ(Sql(db, "SELECT size, members FROM comm_groups"), "2,\"0,1\"\n");
  EXPECT_EQ(Sql(db, "PRAGMA integrity_check"), "ok\n");
}

TEST(CommGroups, AnUnknownSchemaVersionIsRefusedByName) {
  TempDir tmp;
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), kSpecRanks01).ok());
  const std::string db = tmp.Sub("job.tdb");
  Compact(tmp.Sub("trace"), db);
  Sql(db, "UPDATE meta SET value = '99' WHERE key = 'schema_version'");
  int rc = 0;
  const std::string out =
      RunCommand(TracedbBin() + " query " + ShellQuote(db) + " 'SELECT 1' 2>&1", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("job.tdb: schema version 99"), std::string::npos) << out;
}

}  // namespace
}  // namespace tracedb::testing
