// Who may write what, between processes: one writer at a time on a trace database (OutputLock,
// held by `compact` — also --watch — and `record` for their whole compaction), and one owner of
// a segment directory's files (SegmentDirLock, held by `record` for its whole run and by
// `compact --delete-compacted`), so that no command deletes segments another still needs.
// Also the journal switch that keeps readers from blocking a compaction (WAL while writing,
// one rollback-journal file at rest). Thread safety: one object per thread.
// Format and rationale: docs/database-format.md "Concurrency: one writer, many readers".
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/db/db_schema.h"
#include "engine/db/sqlite.h"
#include "engine/util/interrupt_cleanup.h"
#include "engine/util/status.h"

namespace tracedb::engine {

struct LockOptions {
  bool wait = true;  // false: fail at once (Status::Aborted) when another process holds it
  // Called once, before waiting, when another process holds the lock.
  std::function<void()> on_wait;
};

// An exclusive lock on a trace database file, taken before it is opened for writing and held
// until after it is closed. The file is created empty when missing; whether this process
// created it is remembered, so that a failed run removes only a file it made (a file another
// run created, or wrote to first, is never removed). The lock is an open-file-description lock
// on one byte far past SQLite's own lock bytes: it excludes other tracedb writers and does not
// interfere with SQLite's locking, so readers (`sqlite3`, `query`, the view) are not excluded.
// REQUIRES: the SQLite connections of this process to `path` are closed before this object is
// destroyed (closing any descriptor of a file drops the process's POSIX locks on it).
class OutputLock {
 public:
  static StatusOr<std::unique_ptr<OutputLock>> Acquire(const std::string& path,
                                                       const LockOptions& options = {});
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  // True when this process created the file and it was still empty once locked.
  bool created() const { return created_; }
  // True when the file was empty once locked: no database yet (this run's file, or one a run
  // killed before its first commit left behind).
  bool empty() const { return empty_; }
  const std::string& path() const { return path_; }
  // After a failure: removes the database and SQLite's side files when created(), and only
  // while `path` still names the locked file. Returns the problems met, "" when none.
  std::string RemoveCreated();

 private:
  OutputLock(std::string path, int fd, bool created, bool empty)
      : path_(std::move(path)), fd_(fd), created_(created), empty_(empty) {}
  std::string path_;
  int fd_ = -1;
  bool created_ = false;
  bool empty_ = false;
};

// A new database written aside and put in place whole (docs/database-format.md "A new database
// is built aside"). Nobody can read a database that does not exist yet, so the one-shot
// compaction that creates one needs neither the WAL (each page written twice: about a tenth of
// compaction's CPU) nor a rollback journal on disk nor a sync per commit: it writes
// OUTPUT.partial without a journal and without syncs, and at the end syncs it and renames it
// over the (empty, locked) output. A crash or SIGKILL leaves OUTPUT.partial, which the next
// writer of OUTPUT removes (it holds the output's lock, so no live run is writing it); SIGINT,
// SIGTERM or SIGHUP remove it at once (engine/util/interrupt_cleanup.h), with the empty output
// when this run created it. Readers of OUTPUT meanwhile find no database, and are told that one
// is being built (OpenTraceDb). Thread safety: one object per thread.
class FreshBuild {
 public:
  // For the database `lock` holds: first removes what a run killed while building it left at
  // OUTPUT.partial (the lock says no live run is writing it). Then, when `wanted` and the output
  // is empty and a regular file (not a symlink: the rename would replace the link, not its
  // target), returns the build, registered (with the output, when `lock` created it) for
  // removal on an interrupt, messages prefixed by `who` ("tracedb compact"); else null: the
  // caller writes the database in place.
  static StatusOr<std::unique_ptr<FreshBuild>> Begin(OutputLock* lock, const std::string& who,
                                                     bool wanted = true);
  ~FreshBuild();  // not installed: the build's files removed
  FreshBuild(const FreshBuild&) = delete;
  FreshBuild& operator=(const FreshBuild&) = delete;

  const std::string& path() const { return build_; }
  // The settings of a connection to path() for a build nobody reads and any failure discards:
  // no journal (nothing is ever rolled back: a failed run removes the whole build; a journal in
  // memory cost 3% of the CPU, 24,000 page faults and 15 MB at 1e9 events), no syncs.
  static Status Configure(Db* db);
  // REQUIRES: every connection to path() closed. Syncs the build, renames it over the output and
  // syncs the directory; afterwards the output is the complete database. On failure the build
  // is removed and the output left as it was.
  Status Install();

 private:
  FreshBuild(OutputLock* lock, std::string build, const std::string& who);
  OutputLock* lock_;
  std::string build_;
  InterruptCleanup build_on_interrupt_, output_on_interrupt_;
  bool installed_ = false;
};

// The owner of the files in a segment directory: DIR/.tracedb-owner, locked (flock) for as long
// as the owner runs, holding a line that says who it is ("tracedb record (pid 1234)"). `record`
// takes it for its run (it compacts every file at the end, so no one may delete one before);
// `compact --delete-compacted` takes it for its run. The second is refused with that line.
class SegmentDirLock {
 public:
  static constexpr const char* kFileName = ".tracedb-owner";
  // `who` is written into the lock file for the message another process prints.
  static StatusOr<std::unique_ptr<SegmentDirLock>> Acquire(const std::string& dir,
                                                           const std::string& who);
  ~SegmentDirLock();  // removes the lock file, then unlocks
  SegmentDirLock(const SegmentDirLock&) = delete;
  SegmentDirLock& operator=(const SegmentDirLock&) = delete;

 private:
  SegmentDirLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

// Switches a database opened for writing to WAL, so that readers (a long query, the view) never
// block its commits. Waits for readers already inside a read of the rollback-journal file
// (calling `on_wait` once after `notice_ms`), however long: such a reader cannot be pre-empted.
Status EnterWalForWriting(Db* db, const std::function<void()>& on_wait, int notice_ms = 1000);
// Back to one rollback-journal file at rest (what `sqlite3` and copies expect). When a reader
// still has the database open this cannot be done without waiting for it: the WAL is then
// checkpointed into the file and left empty, and the database stays in WAL mode until the next
// writer (every writer's open switches it back); returns false in that case.
StatusOr<bool> LeaveWalAtRest(Db* db);

}  // namespace tracedb::engine
