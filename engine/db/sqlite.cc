// SQLite wrapper. See sqlite.h.
#include "engine/db/sqlite.h"

#include <sys/mman.h>

#include <cstddef>

#include "engine/db/sqlite_harden.h"
#include "engine/util/read_buffer.h"

namespace tracedb::engine {

namespace {

// SQLite's page cache in one anonymous mapping of whole huge pages (advised MADV_HUGEPAGE):
// from the heap, its pages were faulted in 4 KiB at a time as the cache filled, then zeroed by
// SQLite, about 1,950 of the 3,715 page faults of compacting 10M events, each about 13 us of
// system time on a VM whose page faults are paravirtualised (docs/bench-compaction.md, "SQLite's
// page cache on huge pages"). As many slots of a 16 KiB page (the page size of our databases)
// and SQLite's header as fill two huge pages (about 250), shared by the process's connections;
// SQLite takes its pages from the heap beyond them, or for larger pages. SQLite touches every
// slot when it is configured (its free list), so every huge page of the mapping is zeroed at
// start: 512 slots (until 2026-11-29) cost five, 6 MB of resident memory more and 1-2 ms of
// every process's start, while a compaction of 10M events uses at most 155 slots when it has
// 160 (docs/bench-compaction.md, "The page cache's size"). Set once, before SQLite starts; where it
// has started already (another library in the process opened a database first), it keeps its own
// allocator. (Not in the loadable extension: its host started SQLite before loading it, and the API
// table an extension calls through has no sqlite3_config.)
void ConfigurePageCacheOnce() {
#ifndef TRACEDB_SQLITE_EXTENSION
  static const bool done = [] {
    int header = 0;
    if (sqlite3_config(SQLITE_CONFIG_PCACHE_HDRSZ, &header) != SQLITE_OK || header <= 0) {
      return false;
    }
    constexpr size_t kBytes = size_t{4} << 20, kPage = 16384;
    const size_t slot = kPage + ((static_cast<size_t>(header) + 63) & ~size_t{63});
    const size_t slots = kBytes / slot;
    size_t bytes = 0;
    char* const p = MapHugePages(slot * slots, &bytes);
    if (p == nullptr) return false;
    if (sqlite3_config(SQLITE_CONFIG_PAGECACHE, p, static_cast<int>(slot),
                       static_cast<int>(slots)) != SQLITE_OK) {
      ::munmap(p, bytes);
      return false;
    }
    return true;  // (the mapping lives as long as the process: SQLite may use it until exit)
  }();
  (void)done;
#endif
}

}  // namespace

StatusOr<std::unique_ptr<Db>> Db::Open(const std::string& path, Mode mode) {
  ConfigurePageCacheOnce();
  int flags = SQLITE_OPEN_NOMUTEX;
  switch (mode) {
    case Mode::kReadOnly:
      flags |= SQLITE_OPEN_READONLY;
      break;
    case Mode::kReadWrite:
      flags |= SQLITE_OPEN_READWRITE;
      break;
    case Mode::kCreate:
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      break;
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    if (rc == SQLITE_CANTOPEN) return Status::NotFound("cannot open database " + path + ": " + msg);
    return Status::IOError("cannot open database " + path + ": " + msg);
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, 10000);
  // A database is untrusted input (docs/security.md): no function or virtual table that has
  // side effects runs from its schema (views, triggers, CHECK, DEFAULT), and SQL cannot damage
  // the file's structure (writable_schema, journal tricks).
  HardenConnection(db);
  return std::unique_ptr<Db>(new Db(db, path));
}

void HardenConnection(sqlite3* db) {
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
}

std::unique_ptr<Db> Db::Borrow(sqlite3* db, std::string name) {
  return std::unique_ptr<Db>(new Db(db, std::move(name), /*owned=*/false));
}

Db::~Db() {
  for (auto& [sql, st] : cache_) sqlite3_finalize(st);
  if (owned_) sqlite3_close_v2(db_);
}

Status Db::Error(int rc, std::string_view what) const {
  std::string msg = path_ + ": " + std::string(what) + ": " + sqlite3_errmsg(db_);
  const int primary = rc & 0xff;
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) return Status::Corruption(msg);
  if (primary == SQLITE_INTERRUPT) return Status::Aborted(msg);
  if (primary == SQLITE_ERROR) return Status::InvalidArgument(msg);
  return Status::IOError(msg);
}

Status Db::Exec(std::string_view sql) {
  std::string s(sql);
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    sqlite3_free(err);
    return Error(rc, "executing SQL");
  }
  return Status::Ok();
}

StatusOr<Stmt> Db::Prepare(std::string_view sql) {
  sqlite3_stmt* st = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &st, nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing SQL");
  return Stmt(this, st);
}

StatusOr<Stmt> Db::PrepareCached(std::string_view sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    if (cache_.size() >= kMaxCached) return Prepare(sql);
    it = cache_.emplace(std::string(sql), nullptr).first;
  } else if (it->second != nullptr) {
    // Idle: lend it (it was reset and unbound when handed back).
    sqlite3_stmt* st = it->second;
    it->second = nullptr;
    return Stmt(this, st, &it->second);
  }
  sqlite3_stmt* st = nullptr;
  // PERSISTENT: kept for the connection's life, so SQLite allocates it outside its lookaside.
  const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &st, nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing SQL");
  return Stmt(this, st, &it->second);
}

Status Db::RunCached(std::string_view sql) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, PrepareCached(sql));
  return st.Run();
}

StatusOr<Stmt> Db::PrepareFirst(std::string_view sql, size_t* consumed) {
  sqlite3_stmt* st = nullptr;
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &st, &tail);
  if (rc != SQLITE_OK) return Error(rc, "preparing SQL");
  *consumed = tail ? static_cast<size_t>(tail - sql.data()) : sql.size();
  return Stmt(this, st);
}

StatusOr<int64_t> Db::QueryInt(std::string_view sql, int64_t fallback) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, Prepare(sql));
  TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row || st.IsNull(0)) return fallback;
  return st.Int(0);
}

bool Db::HasTable(std::string_view name) {
  auto st = Prepare("SELECT 1 FROM sqlite_master WHERE name = ?1 AND type IN ('table','view')");
  if (!st.ok()) return false;
  st->Bind(1, name);
  auto row = st->Step();
  return row.ok() && *row;
}

int64_t Db::LastInsertRowid() const { return sqlite3_last_insert_rowid(db_); }
int64_t Db::Changes() const { return sqlite3_changes64(db_); }

void Db::Rollback() { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    Release();
    db_ = o.db_;
    st_ = o.st_;
    home_ = o.home_;
    o.st_ = nullptr;
    o.home_ = nullptr;
  }
  return *this;
}

Stmt::~Stmt() { Release(); }

void Stmt::Release() {
  if (home_ != nullptr && *home_ == nullptr && st_ != nullptr) {
    // Back to the cache as new: no open read, no bound values kept alive.
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
    *home_ = st_;
  } else {
    // Not from the cache, or a second loan of SQL whose cached statement came back first.
    sqlite3_finalize(st_);
  }
  st_ = nullptr;
  home_ = nullptr;
}

Stmt& Stmt::Bind(int i, int64_t v) {
  sqlite3_bind_int64(st_, i, v);
  return *this;
}
Stmt& Stmt::Bind(int i, double v) {
  sqlite3_bind_double(st_, i, v);
  return *this;
}
Stmt& Stmt::Bind(int i, std::string_view text) {
  sqlite3_bind_text(st_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::BindBlob(int i, std::string_view bytes) {
  sqlite3_bind_blob(st_, i, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::BindNull(int i) {
  sqlite3_bind_null(st_, i);
  return *this;
}

StatusOr<bool> Stmt::Step() {
  const int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const char* sql = sqlite3_sql(st_);
  return db_->Error(rc, std::string("running ") + (sql ? sql : "?"));
}

Status Stmt::Run() {
  StatusOr<bool> r = Step();
  while (r.ok() && *r) r = Step();
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
  return r.status();
}

void Stmt::Reset() {
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

std::string_view Stmt::Text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
  return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(st_, col)))
           : std::string_view();
}

std::string_view Stmt::Blob(int col) const {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(st_, col));
  return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(st_, col)))
           : std::string_view();
}

}  // namespace tracedb::engine
