// Limits on the SQL the `tracedb view` server runs for a client (the UI's SQL box, searches,
// event details): a deadline that holds (the progress handler for SQLite's own work, and a
// watchdog that calls sqlite3_interrupt for work outside it), and, for SQL a client wrote, an
// authorizer that makes it read-only in every sense: no ATTACH/DETACH, no PRAGMA that sets
// anything (temp_store_directory, query_only…), no transaction or savepoint left open on a
// pooled connection, no temp objects; plus a bound on the length of any one value.
// Thread safety: one guard per connection at a time, on the thread that runs its SQL.
// Documented in docs/view.md "Security".
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/db/sqlite.h"

namespace tracedb::view {

// Interrupts the connection's SQL once `ms` milliseconds have passed, until destroyed.
class ScopedDeadline {
 public:
  ScopedDeadline(engine::Db* db, int ms);
  ~ScopedDeadline();
  ScopedDeadline(const ScopedDeadline&) = delete;
  ScopedDeadline& operator=(const ScopedDeadline&) = delete;
  // True once the deadline passed (also for work outside SQLite: the caller checks it).
  bool expired() const;

 private:
  static int Check(void* self);
  engine::Db* db_;
  std::chrono::steady_clock::time_point until_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread watchdog_;
};

// The authorizer and the value-length bound for SQL from a client, while it is prepared and run.
class ScopedClientSql {
 public:
  // Any one string or blob (a zeroblob(), a group_concat, a printf) at most this long.
  static constexpr int kMaxValueBytes = 8 << 20;
  explicit ScopedClientSql(engine::Db* db);
  ~ScopedClientSql();
  ScopedClientSql(const ScopedClientSql&) = delete;
  ScopedClientSql& operator=(const ScopedClientSql&) = delete;

 private:
  engine::Db* db_;
  int old_length_ = 0;
};

}  // namespace tracedb::view
