// Writer locks and the journal switch. See output_lock.h.
#include "engine/compact/output_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "engine/util/atomic_file.h"

namespace tracedb::engine {
namespace {

// Far past SQLite's lock bytes (0x40000000 .. 0x40000201), so never one of them.
constexpr off_t kWriterLockByte = 0x40001000;

bool SameFile(int fd, const std::string& path) {
  struct stat a, b;
  if (::fstat(fd, &a) != 0 || ::stat(path.c_str(), &b) != 0) return false;
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int LockByte(int fd, bool wait) {
  struct flock fl = {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = kWriterLockByte;
  fl.l_len = 1;
  return ::fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
}

}  // namespace

StatusOr<std::unique_ptr<OutputLock>> OutputLock::Acquire(const std::string& path,
                                                          const LockOptions& options) {
  bool told = false;
  for (int attempt = 0;; ++attempt) {
    bool made = true;
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) {
      made = false;
      fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0 && errno == ENOENT && attempt < 1000) continue;  // removed meanwhile
    }
    if (fd < 0) return Status::FromErrno("cannot open " + path + " to lock it for writing", errno);
    if (LockByte(fd, false) != 0) {
      const int err = errno;
      if (err != EAGAIN && err != EACCES) {
        ::close(fd);
        return Status::FromErrno("cannot lock " + path, err);
      }
      if (!options.wait) {
        ::close(fd);
        return Status::Aborted(path +
                               ": another tracedb process is writing it (compact or record); not "
                               "waiting (--no-wait)");
      }
      if (!told && options.on_wait) options.on_wait();
      told = true;
      if (LockByte(fd, true) != 0) {
        const int e = errno;
        ::close(fd);
        if (e == EINTR) return Status::Aborted(path + ": interrupted while waiting for its lock");
        return Status::FromErrno("cannot lock " + path, e);
      }
    }
    // The holder before us may have removed the file (a run that failed removes what it
    // created): then the lock is on a file no longer there; start again.
    if (!SameFile(fd, path)) {
      ::close(fd);
      if (attempt < 1000) continue;
      return Status::IOError(path + ": keeps being replaced while locking it");
    }
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      const int e = errno;
      ::close(fd);
      return Status::FromErrno("cannot stat " + path, e);
    }
    return std::unique_ptr<OutputLock>(
        new OutputLock(path, fd, made && st.st_size == 0, st.st_size == 0));
  }
}

OutputLock::~OutputLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::string OutputLock::RemoveCreated() {
  if (!created_ || fd_ < 0 || !SameFile(fd_, path_)) return "";
  std::string problems = RemoveDbFiles(path_);  // engine/util/atomic_file.h
  created_ = false;
  return problems;
}

StatusOr<std::unique_ptr<FreshBuild>> FreshBuild::Begin(OutputLock* lock, const std::string& who,
                                                        bool wanted) {
  const std::string build = lock->path() + kBuildAsideSuffix;  // engine/db/db_schema.h
  const std::string problems = RemoveDbFiles(build);           // engine/util/atomic_file.h
  if (!problems.empty()) return Status::IOError(problems);
  struct stat st;
  if (!wanted || !lock->empty() || ::lstat(lock->path().c_str(), &st) != 0 ||
      !S_ISREG(st.st_mode)) {
    return std::unique_ptr<FreshBuild>();
  }
  return std::unique_ptr<FreshBuild>(new FreshBuild(lock, build, who));
}

FreshBuild::FreshBuild(OutputLock* lock, std::string build, const std::string& who)
    : lock_(lock), build_(std::move(build)), build_on_interrupt_(build_, who, /*sqlite_db=*/true) {
  if (lock_->created()) output_on_interrupt_ = InterruptCleanup(lock_->path(), who);
}

FreshBuild::~FreshBuild() {
  build_on_interrupt_.Release();
  output_on_interrupt_.Release();
  if (!installed_) (void)RemoveDbFiles(build_);
}

Status FreshBuild::Configure(Db* db) {
  return db->Exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF");
}

Status FreshBuild::Install() {
  // The output is about to become the database: no longer removed on an interrupt. (The build
  // still is until it has been renamed: a signal in between removes it and leaves the empty
  // output, which the next run builds again.)
  output_on_interrupt_.Release();
  const Status s = InstallFile(build_, lock_->path());  // synced, renamed, directory synced
  // After the rename the registered name is gone, so an interrupt can no longer remove anything.
  build_on_interrupt_.Release();
  installed_ = s.ok();
  return s.ok() ? s : s.WithContext("putting the new database in place");
}

StatusOr<std::unique_ptr<SegmentDirLock>> SegmentDirLock::Acquire(const std::string& dir,
                                                                  const std::string& who) {
  const std::string path = dir + "/" + kFileName;
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return Status::FromErrno("cannot create " + path, errno);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      std::string owner;
      char buf[256];
      const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
      if (n > 0) owner.assign(buf, static_cast<size_t>(n));
      while (!owner.empty() && (owner.back() == '\n' || owner.back() == '\0')) owner.pop_back();
      ::close(fd);
      if (err != EWOULDBLOCK) return Status::FromErrno("cannot lock " + path, err);
      return Status::Aborted(dir + ": its segment files belong to " +
                             (owner.empty() ? std::string("another tracedb process") : owner) +
                             " (" + path + " is locked)");
    }
    if (!SameFile(fd, path)) {  // the owner before us removed it on its way out
      ::close(fd);
      if (attempt < 1000) continue;
      return Status::IOError(path + ": keeps being replaced while locking it");
    }
    const std::string line = who + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, line.data(), line.size(), 0) < 0) {
      const int e = errno;
      ::unlink(path.c_str());
      ::close(fd);
      return Status::FromErrno("cannot write " + path, e);
    }
    return std::unique_ptr<SegmentDirLock>(new SegmentDirLock(path, fd));
  }
}

SegmentDirLock::~SegmentDirLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still locked: a waiter then sees the name gone
  ::close(fd_);
}

namespace {

struct BusyWait {
  const std::function<void()>* on_wait;
  int notice_ms;
  std::chrono::steady_clock::time_point start;
  bool told = false;
};

int WaitForever(void* arg, int count) {
  auto* w = static_cast<BusyWait*>(arg);
  const auto now = std::chrono::steady_clock::now();
  if (count == 0) w->start = now;
  if (!w->told && now - w->start >= std::chrono::milliseconds(w->notice_ms)) {
    w->told = true;
    if (*w->on_wait) (*w->on_wait)();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(count < 10 ? 5 : 25));
  return 1;
}

StatusOr<std::string> JournalMode(Db* db, const char* sql) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare(sql));
  TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::string();
  return std::string(st.Text(0));
}

}  // namespace

Status EnterWalForWriting(Db* db, const std::function<void()>& on_wait, int notice_ms) {
  BusyWait w{&on_wait, notice_ms, std::chrono::steady_clock::now()};
  sqlite3_busy_handler(db->raw(), WaitForever, &w);
  StatusOr<std::string> mode = JournalMode(db, "PRAGMA journal_mode=WAL");
  sqlite3_busy_timeout(db->raw(), 10000);  // the default again (engine/db/sqlite.cc)
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") {
    return Status::IOError(db->path() + ": cannot use WAL for compaction (journal mode " + *mode +
                           "; a filesystem without shared memory?)");
  }
  return Status::Ok();
}

StatusOr<bool> LeaveWalAtRest(Db* db) {
  sqlite3_busy_timeout(db->raw(), 200);
  StatusOr<std::string> mode = JournalMode(db, "PRAGMA journal_mode=DELETE");
  bool ok = mode.ok() && *mode == "delete";
  if (!ok) {
    // A reader has the database open: everything into the main file, the WAL emptied.
    (void)db->Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  sqlite3_busy_timeout(db->raw(), 10000);
  // A busy database is the case above; another error (a full disk) is the caller's.
  if (!mode.ok() && mode.status().code() != Status::Code::kIOError) return mode.status();
  return ok;
}

}  // namespace tracedb::engine
