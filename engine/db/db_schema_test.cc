// Tests of the tables created when first written (engine/db/db_schema.h, EnsureTable): a new
// database holds an empty view in each one's place, with the table's columns, costing no page;
// a writer gets the table in the view's place, atomically; a foreign object of the same name is
// refused. Checked against SQLite's own account (sqlite_master, pragma_table_info, page_count).
#include "engine/db/db_schema.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/db/trace_writer.h"

namespace tracedb::engine {
namespace {

namespace fs = std::filesystem;

// The names docs/database-format.md lists as created when first written (a separate list from
// the schema's own, so that a table dropped from it or added to it is noticed here).
const std::vector<std::string> kLazy = {"sync_points", "steps",       "stats",        "step_stats",
                                        "triggers",    "comm_groups", "rank_comms",   "mpi_profile",
                                        "mpi_msgsize", "rank_times",  "mpi_callsites"};

class LazyTables : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tracedb_schema_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "t.tdb").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Db> Open(bool create = false, bool read_only = false) {
    auto db = OpenTraceDb(path_, create, read_only);
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    return db.ok() ? std::move(db).value() : nullptr;
  }
  static std::string Text(Db* db, const std::string& sql) {
    auto st = db->Prepare(sql);
    EXPECT_TRUE(st.ok()) << sql << ": " << st.status().ToString();
    if (!st.ok()) return "?";
    std::string out;
    for (;;) {
      auto row = st->Step();
      EXPECT_TRUE(row.ok()) << sql;
      if (!row.ok() || !*row) break;
      if (!out.empty()) out += "|";
      out += st->IsNull(0) ? "NULL" : std::string(st->Text(0));
    }
    return out;
  }
  static std::string Type(Db* db, const std::string& name) {
    return Text(db, "SELECT type FROM sqlite_master WHERE name = '" + name + "'");
  }
  static std::string Columns(Db* db, const std::string& name) {
    return Text(db, "SELECT name FROM pragma_table_info('" + name + "') ORDER BY cid");
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(LazyTables, ANewDatabaseHoldsEmptyViewsWithTheTablesColumns) {
  auto db = Open(/*create=*/true);
  ASSERT_TRUE(db);
  std::vector<std::string> view_columns;
  for (const std::string& t : kLazy) {
    SCOPED_TRACE(t);
    EXPECT_EQ(Type(db.get(), t), "view");
    EXPECT_EQ(Text(db.get(), "SELECT count(*) FROM " + t), "0");
    view_columns.push_back(Columns(db.get(), t));
    auto p = IsPlaceholderTable(db.get(), t);
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(*p);
  }
  // The comms view reads through two of them.
  EXPECT_EQ(Text(db.get(), "SELECT count(*) FROM comms"), "0");
  const int64_t pages_before = *db->QueryInt("PRAGMA page_count");
  for (size_t i = 0; i < kLazy.size(); ++i) {
    SCOPED_TRACE(kLazy[i]);
    ASSERT_TRUE(EnsureTable(db.get(), kLazy[i]).ok());
    EXPECT_EQ(Type(db.get(), kLazy[i]).substr(0, 5), "table");
    // The view had the table's columns, in its order (`INSERT ... SELECT *` relies on it).
    EXPECT_EQ(Columns(db.get(), kLazy[i]), view_columns[i]);
    auto p = IsPlaceholderTable(db.get(), kLazy[i]);
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(*p);
  }
  // Each table is a root page, comm_groups' UNIQUE index one more: what the views saved.
  EXPECT_EQ(*db->QueryInt("PRAGMA page_count") - pages_before,
            static_cast<int64_t>(kLazy.size()) + 1);
  // Again: a no-op (the same root pages).
  const std::string roots = Text(db.get(), "SELECT group_concat(rootpage) FROM sqlite_master");
  for (const std::string& t : kLazy) ASSERT_TRUE(EnsureTable(db.get(), t).ok());
  EXPECT_EQ(Text(db.get(), "SELECT group_concat(rootpage) FROM sqlite_master"), roots);
  EXPECT_EQ(Text(db.get(), "PRAGMA integrity_check"), "ok");
  db.reset();
  // A reader opens both shapes.
  EXPECT_TRUE(Open(false, /*read_only=*/true));
}

TEST_F(LazyTables, TheViewGoesOnlyWithTheTableInItsPlace) {
  auto db = Open(/*create=*/true);
  ASSERT_TRUE(db);
  // In a transaction rolled back: the view again, and still accepted.
  ASSERT_TRUE(db->Begin().ok());
  ASSERT_TRUE(EnsureTable(db.get(), "steps").ok());
  EXPECT_EQ(Type(db.get(), "steps"), "table");
  ASSERT_TRUE(db->Exec("INSERT INTO steps VALUES(0, 10, 1)").ok());
  db->Rollback();
  EXPECT_EQ(Type(db.get(), "steps"), "view");
  // Outside a transaction, with a statement of another table open on the connection.
  auto reading = db->Prepare("SELECT key FROM meta");
  ASSERT_TRUE(reading.ok());
  ASSERT_TRUE(*reading->Step());
  ASSERT_TRUE(EnsureTable(db.get(), "steps").ok());
  reading->Reset();
  ASSERT_TRUE(db->Exec("INSERT INTO steps VALUES(0, 10, 1)").ok());
  db.reset();
  db = Open(false, true);
  ASSERT_TRUE(db);
  EXPECT_EQ(Text(db.get(), "SELECT rank || ',' || ts || ',' || step FROM steps"), "0,10,1");
}

TEST_F(LazyTables, AMissingTableIsCreatedAndAForeignObjectRefused) {
  {
    auto db = Open(/*create=*/true);
    ASSERT_TRUE(db);
    // A database older than the table (as step_stats and triggers once were).
    ASSERT_TRUE(db->Exec("DROP VIEW step_stats").ok());
    ASSERT_TRUE(EnsureTable(db.get(), "step_stats").ok());
    EXPECT_EQ(Type(db.get(), "step_stats"), "table");
    // Not one of them.
    EXPECT_FALSE(EnsureTable(db.get(), "blocks").ok());
    // Another view of the same name and columns: refused by the writer and at open.
    ASSERT_TRUE(db->Exec("DROP VIEW triggers; CREATE VIEW triggers(rank, ts, reason) AS "
                         "SELECT 1, 2, 'x'")
                    .ok());
    const Status s = EnsureTable(db.get(), "triggers");
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find("`triggers` is a view, not a table"), std::string::npos)
        << s.ToString();
  }
  auto again = OpenTraceDb(path_, false, true);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("`triggers` is a view, not a table"), std::string::npos)
      << again.status().ToString();
}

TEST_F(LazyTables, AWriterMakesOnlyTheTablesItWrites) {
  {
    auto w = TraceWriter::Open(path_);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->BeginBatch().ok());
    TrackSpec thread;
    thread.rank = 0;
    thread.tid = 1;
    thread.pid = 1;
    const uint32_t t = (*w)->Track(thread);
    (*w)->AddStep(0, 100, 7);
    Row r;
    r.track = t;
    r.k = (*w)->TakeK(t);
    r.ts = 100;
    r.dur = 5;
    r.name = (*w)->Intern("x");
    ASSERT_TRUE((*w)->AddRow(0, std::move(r)).ok());
    ASSERT_TRUE((*w)->CommitBatch().ok());
  }
  auto db = Open(false, true);
  ASSERT_TRUE(db);
  EXPECT_EQ(Type(db.get(), "steps"), "table");
  EXPECT_EQ(Text(db.get(), "SELECT step FROM steps"), "7");
  for (const std::string& t : kLazy) {
    if (t == "steps") continue;
    EXPECT_EQ(Type(db.get(), t), "view") << t;
  }
}

}  // namespace
}  // namespace tracedb::engine
