// Tests of the SQLite wrapper's statement cache (Db::PrepareCached): a statement comes back
// reset and unbound, is shared by no two holders at once, follows schema changes, and never
// keeps a table busy once handed back.
#include "engine/db/sqlite.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tracedb::engine {
namespace {

std::unique_ptr<Db> MemoryDb() {
  auto db = Db::Open(":memory:", Db::Mode::kCreate);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return std::move(db).value();
}

TEST(DbStatementCache, HandedBackStatementIsReusedResetAndUnbound) {
  auto db = MemoryDb();
  sqlite3_stmt* first = nullptr;
  {
    auto st = db->PrepareCached("SELECT ?1");
    ASSERT_TRUE(st.ok());
    first = st->raw();
    st->Bind(1, int64_t{42});
    ASSERT_TRUE(*st->Step());
    EXPECT_EQ(st->Int(0), 42);
    // Destroyed mid-result, still bound.
  }
  auto st = db->PrepareCached("SELECT ?1");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->raw(), first);
  ASSERT_TRUE(*st->Step());
  EXPECT_TRUE(st->IsNull(0));  // the 42 did not stay bound
  // Another text is another statement.
  auto other = db->PrepareCached("SELECT ?1 + 0");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->raw(), first);
}

TEST(DbStatementCache, TwoHoldersOfOneTextGetTwoStatements) {
  auto db = MemoryDb();
  ASSERT_TRUE(db->Exec("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES(1), (2), (3)").ok());
  const char* sql = "SELECT x FROM t WHERE x >= ?1 ORDER BY x";
  auto a = db->PrepareCached(sql);
  auto b = db->PrepareCached(sql);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->raw(), b->raw());
  a->Bind(1, int64_t{2});
  b->Bind(1, int64_t{3});
  ASSERT_TRUE(*a->Step());
  ASSERT_TRUE(*b->Step());
  EXPECT_EQ(a->Int(0), 2);
  EXPECT_EQ(b->Int(0), 3);
  ASSERT_TRUE(*a->Step());
  EXPECT_EQ(a->Int(0), 3);
  EXPECT_FALSE(*b->Step());
  sqlite3_stmt* kept = b->raw();
  *b = Stmt();  // b goes back to the cache first; a, handed back later, is finalized
  *a = Stmt();
  auto c = db->PrepareCached(sql);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->raw(), kept);
  c->Bind(1, int64_t{1});
  int rows = 0;
  while (*c->Step()) ++rows;
  EXPECT_EQ(rows, 3);
}

TEST(DbStatementCache, MovedStatementIsHandedBackOnce) {
  auto db = MemoryDb();
  sqlite3_stmt* raw = nullptr;
  {
    auto st = db->PrepareCached("SELECT 7");
    ASSERT_TRUE(st.ok());
    raw = st->raw();
    Stmt moved(std::move(st).value());
    Stmt assigned;
    assigned = std::move(moved);
    ASSERT_TRUE(*assigned.Step());
    EXPECT_EQ(assigned.Int(0), 7);
  }
  auto again = db->PrepareCached("SELECT 7");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->raw(), raw);
  // Only one cached copy: a second holder now gets a fresh statement.
  auto second = db->PrepareCached("SELECT 7");
  ASSERT_TRUE(second.ok());
  EXPECT_NE(second->raw(), raw);
}

TEST(DbStatementCache, CachedStatementsFollowSchemaChangesAndHoldNoLocks) {
  auto db = MemoryDb();
  ASSERT_TRUE(db->Exec("CREATE TABLE t(x INTEGER)").ok());
  const char* ins = "INSERT INTO t(x) VALUES(?1)";
  for (int i = 0; i < 5; ++i) {
    auto st = db->PrepareCached(ins);
    ASSERT_TRUE(st.ok());
    ASSERT_TRUE(st->Bind(1, int64_t{i}).Run().ok());
  }
  {
    auto sel = db->PrepareCached("SELECT * FROM t");
    ASSERT_TRUE(sel.ok());
    ASSERT_TRUE(*sel->Step());
    EXPECT_EQ(sel->ColumnCount(), 1);
  }
  // A statement handed back in the middle of its rows keeps no table busy: DROP TABLE fails
  // while an uncached one is in the same place, and succeeds once the cached one is back.
  ASSERT_TRUE(db->Exec("CREATE TABLE u(x); INSERT INTO u VALUES(1), (2)").ok());
  {
    auto plain = db->Prepare("SELECT x FROM u");
    ASSERT_TRUE(plain.ok());
    ASSERT_TRUE(*plain->Step());
    EXPECT_FALSE(db->Exec("DROP TABLE u").ok());
  }
  {
    auto sel = db->PrepareCached("SELECT x FROM u");
    ASSERT_TRUE(sel.ok());
    ASSERT_TRUE(*sel->Step());
  }
  EXPECT_TRUE(db->Exec("DROP TABLE u").ok());
  ASSERT_TRUE(db->Exec("ALTER TABLE t ADD COLUMN y INTEGER DEFAULT 9").ok());
  {
    auto sel = db->PrepareCached("SELECT * FROM t");
    ASSERT_TRUE(sel.ok());
    ASSERT_TRUE(*sel->Step());
    EXPECT_EQ(sel->ColumnCount(), 2);
    EXPECT_EQ(sel->Int(1), 9);
  }
  ASSERT_TRUE(db->Begin().ok());
  {
    auto st = db->PrepareCached(ins);
    ASSERT_TRUE(st.ok());
    ASSERT_TRUE(st->Bind(1, int64_t{5}).Run().ok());
  }
  ASSERT_TRUE(db->Commit().ok());
  EXPECT_EQ(*db->QueryInt("SELECT count(*) FROM t"), 6);
  // Begin and Commit go through the cache too; a second Begin fails as it always did.
  ASSERT_TRUE(db->Begin().ok());
  EXPECT_FALSE(db->Begin().ok());
  db->Rollback();
  ASSERT_TRUE(db->Exec("DROP TABLE t").ok());
  // The cached insert now fails when run, as a fresh prepare would.
  auto st = db->PrepareCached(ins);
  ASSERT_TRUE(st.ok());  // the cached statement, compiled before the drop
  EXPECT_FALSE(st->Bind(1, int64_t{1}).Run().ok());
}

TEST(DbStatementCache, ManyDistinctTextsAllRun) {
  // Past the cache's size statements are compiled per call; each still gives its own result.
  auto db = MemoryDb();
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 200; ++i) {
      auto st = db->PrepareCached("SELECT " + std::to_string(i));
      ASSERT_TRUE(st.ok());
      ASSERT_TRUE(*st->Step());
      EXPECT_EQ(st->Int(0), i);
    }
  }
  EXPECT_FALSE(db->PrepareCached("SELECT FROM nowhere").ok());
}

// Db::Open gives SQLite its page cache in one mapping (engine/db/sqlite.cc): a database's pages
// are taken from it, seen in SQLite's own count of that memory's slots in use.
TEST(DbPageCache, PagesComeFromTheConfiguredSlots) {
  auto db = MemoryDb();
  ASSERT_TRUE(db->Exec("PRAGMA page_size=16384; CREATE TABLE t(x BLOB)").ok());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(db->Exec("INSERT INTO t VALUES(zeroblob(50000))").ok());
  }
  sqlite3_int64 used = 0, highwater = 0;
  ASSERT_EQ(sqlite3_status64(SQLITE_STATUS_PAGECACHE_USED, &used, &highwater, 0), SQLITE_OK);
  EXPECT_GE(highwater, 20) << "pages taken from the heap, not from the configured slots";
  sqlite3_int64 overflow = 0, overflow_high = 0;
  ASSERT_EQ(sqlite3_status64(SQLITE_STATUS_PAGECACHE_SIZE, &overflow, &overflow_high, 0),
            SQLITE_OK);
  EXPECT_LE(overflow_high, 16384 + 1024);  // the largest page request: one of our page size
}

}  // namespace
}  // namespace tracedb::engine
