// Deadline and authorizer for the view server's SQL. See sql_guard.h.
#include "view/sql_guard.h"

#include <cstring>
#include <initializer_list>

namespace tracedb::view {

ScopedDeadline::ScopedDeadline(engine::Db* db, int ms)
    : db_(db), until_(std::chrono::steady_clock::now() + std::chrono::milliseconds(ms)) {
  sqlite3_progress_handler(db_->raw(), 1000, &ScopedDeadline::Check, this);
  // Work that runs no VM instruction for a long time (a virtual table's filter, a huge sort
  // or value) is interrupted too: SQLite checks the flag at its next chance.
  watchdog_ = std::thread([this] {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_until(l, until_, [this] { return done_; })) sqlite3_interrupt(db_->raw());
  });
}

ScopedDeadline::~ScopedDeadline() {
  {
    std::lock_guard<std::mutex> l(mu_);
    done_ = true;
  }
  cv_.notify_all();
  watchdog_.join();
  sqlite3_progress_handler(db_->raw(), 0, nullptr, nullptr);
}

bool ScopedDeadline::expired() const { return std::chrono::steady_clock::now() > until_; }

int ScopedDeadline::Check(void* self) {
  return static_cast<ScopedDeadline*>(self)->expired() ? 1 : 0;
}

namespace {

bool OneOf(const char* name, std::initializer_list<const char*> names) {
  for (const char* p : names) {
    if (sqlite3_stricmp(name, p) == 0) return true;
  }
  return false;
}

// PRAGMAs a client may run: those that describe the schema, whose argument (if any) names a
// table or an index, and settings read without a value. A value given to any other sets it.
bool ReadablePragma(const char* name, const char* arg) {
  if (OneOf(name, {"table_info", "table_xinfo", "table_list", "index_list", "index_info",
                   "index_xinfo", "foreign_key_list"})) {
    return true;
  }
  return arg == nullptr &&
         OneOf(name, {"function_list", "module_list", "pragma_list", "collation_list",
                      "database_list", "page_size", "page_count", "freelist_count", "encoding",
                      "user_version", "schema_version", "application_id", "compile_options"});
}

int Authorize(void*, int action, const char* a, const char* b, const char*, const char*) {
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_FUNCTION:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_UPDATE:
      // SQLite asks this of the schema table while it (re)reads the schema for a prepare; a
      // real UPDATE of it is a write, which the server refuses before running anything
      // (sqlite3_stmt_readonly) and query_only forbids.
      return a != nullptr && (sqlite3_stricmp(a, "sqlite_master") == 0 ||
                              sqlite3_stricmp(a, "sqlite_temp_master") == 0)
                 ? SQLITE_OK
                 : SQLITE_DENY;
    case SQLITE_PRAGMA:
      // a: the pragma's name, b: its argument (NULL when only read).
      return a != nullptr && ReadablePragma(a, b) ? SQLITE_OK : SQLITE_DENY;
    default:
      // ATTACH, DETACH, every write, CREATE/DROP (temp too), BEGIN/COMMIT, SAVEPOINT, ANALYZE…
      return SQLITE_DENY;
  }
}

}  // namespace

ScopedClientSql::ScopedClientSql(engine::Db* db) : db_(db) {
  old_length_ = sqlite3_limit(db_->raw(), SQLITE_LIMIT_LENGTH, kMaxValueBytes);
  sqlite3_set_authorizer(db_->raw(), Authorize, nullptr);
}

ScopedClientSql::~ScopedClientSql() {
  sqlite3_set_authorizer(db_->raw(), nullptr, nullptr);
  sqlite3_limit(db_->raw(), SQLITE_LIMIT_LENGTH, old_length_);
}

}  // namespace tracedb::view
