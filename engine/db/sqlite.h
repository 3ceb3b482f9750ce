// The one wrapper around SQLite's C API used by the engine, the importers, the reports and the
// shell: a database handle (Db) and prepared statements (Stmt), returning Status.
// (The `events` virtual table in query/ necessarily implements SQLite's module interface
// itself; everything else goes through here.)
// Thread safety: a Db and its Stmts belong to one thread at a time.
#pragma once

#include "engine/db/sqlite_api.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/util/hash.h"
#include "engine/util/status.h"

namespace tracedb::engine {

class Stmt;

class Db {
 public:
  enum class Mode { kReadOnly, kReadWrite, kCreate };
  // Opens `path`. kCreate creates the file when missing.
  static StatusOr<std::unique_ptr<Db>> Open(const std::string& path, Mode mode);
  // Wraps a handle owned by someone else (a virtual table's connection); never closes it.
  static std::unique_ptr<Db> Borrow(sqlite3* db, std::string name);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more statements that return no rows of interest.
  Status Exec(std::string_view sql);
  StatusOr<Stmt> Prepare(std::string_view sql);
  // Prepare for SQL this connection runs again and again (a writer's inserts, an importer's
  // upserts, BEGIN and COMMIT): the statement is compiled once, and the Stmt returned hands it
  // back to this Db, reset and unbound, when it is destroyed, for the next call with the same
  // text. Compiling is most of the cost of a small batch (a few rows, a dozen statements).
  // While a statement is on loan, another call with the same text compiles one of its own.
  // REQUIRES: the Stmt is destroyed before this Db; `sql` is one statement.
  StatusOr<Stmt> PrepareCached(std::string_view sql);
  // Prepares the first statement of `sql`; *consumed is how many bytes it took. The Stmt is
  // empty (raw() == nullptr) when only whitespace or comments remain.
  StatusOr<Stmt> PrepareFirst(std::string_view sql, size_t* consumed);
  // Makes a running statement on this connection stop with an "interrupted" error. Safe from
  // a signal handler or another thread.
  void Interrupt() { sqlite3_interrupt(db_); }
  // The single integer result of `sql` (e.g. "SELECT count(*) FROM t"), or `fallback` when it
  // returns no row or NULL.
  StatusOr<int64_t> QueryInt(std::string_view sql, int64_t fallback = 0);
  // Does table or view `name` exist?
  bool HasTable(std::string_view name);
  int64_t LastInsertRowid() const;
  int64_t Changes() const;

  Status Begin() { return RunCached("BEGIN IMMEDIATE"); }
  Status Commit() { return RunCached("COMMIT"); }
  void Rollback();

  sqlite3* raw() const { return db_; }
  const std::string& path() const { return path_; }
  // A Status for SQLite error `rc`, with the DB path and `what` in the message.
  Status Error(int rc, std::string_view what) const;

 private:
  // Kept statements at most; past that PrepareCached compiles a statement of its own (SQL text
  // built at run time must not grow the cache without bound).
  static constexpr size_t kMaxCached = 64;

  Db(sqlite3* db, std::string path, bool owned = true)
      : db_(db), path_(std::move(path)), owned_(owned) {}
  // Runs a statement without result rows through the cache.
  Status RunCached(std::string_view sql);
  sqlite3* db_;
  std::string path_;
  bool owned_ = true;
  // SQL text -> its idle statement, or nullptr while it is on loan, looked up without copying
  // the text into a std::string first. Entries are never erased before the destructor (a lent
  // Stmt points at its entry's value).
  std::unordered_map<std::string, sqlite3_stmt*, StringViewHash, std::equal_to<>> cache_;
};

// A prepared statement. Bind parameters are 1-based, columns 0-based (as in SQLite).
class Stmt {
 public:
  Stmt() = default;
  Stmt(Stmt&& o) noexcept : db_(o.db_), st_(o.st_), home_(o.home_) {
    o.st_ = nullptr;
    o.home_ = nullptr;
  }
  Stmt& operator=(Stmt&& o) noexcept;
  ~Stmt();

  Stmt& Bind(int i, int64_t v);
  Stmt& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  Stmt& Bind(int i, uint32_t v) { return Bind(i, static_cast<int64_t>(v)); }
  Stmt& Bind(int i, double v);
  Stmt& Bind(int i, std::string_view text);
  Stmt& BindBlob(int i, std::string_view bytes);
  Stmt& BindNull(int i);

  // Steps once: true when a row is available, false when done. Errors carry the SQL.
  StatusOr<bool> Step();
  // Steps to completion (for statements without result rows) and resets.
  Status Run();
  void Reset();

  int64_t Int(int col) const { return sqlite3_column_int64(st_, col); }
  double Double(int col) const { return sqlite3_column_double(st_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
  std::string_view Text(int col) const;
  std::string_view Blob(int col) const;
  int ColumnCount() const { return sqlite3_column_count(st_); }
  const char* ColumnName(int col) const { return sqlite3_column_name(st_, col); }
  int ColumnType(int col) const { return sqlite3_column_type(st_, col); }
  sqlite3_stmt* raw() const { return st_; }

 private:
  friend class Db;
  Stmt(const Db* db, sqlite3_stmt* st, sqlite3_stmt** home = nullptr)
      : db_(db), st_(st), home_(home) {}
  // Finalizes the statement, or resets it and hands it back to its Db's cache.
  void Release();
  const Db* db_ = nullptr;
  sqlite3_stmt* st_ = nullptr;
  sqlite3_stmt** home_ = nullptr;  // the Db cache entry st_ goes back to, if any
};

}  // namespace tracedb::engine
