// Output files written under a temporary name and renamed into place. See atomic_file.h.
#include "engine/util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/util/interrupt_cleanup.h"
#include "engine/util/path.h"

namespace tracedb::engine {
namespace {

Status WriteAll(int fd, std::string_view data, const std::string& name) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("cannot write " + name, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

Status CreateTemporaryBeside(const std::string& path, std::string* temp, int* fd) {
  std::string name = path + ".partial-XXXXXX";
  const int f = ::mkostemp(name.data(), O_CLOEXEC);
  if (f < 0) return Status::FromErrno("cannot create " + path, errno);
  // mkostemp creates 0600; the output gets the usual 0666 less the umask.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(f, 0666 & ~mask) != 0) {
    const int err = errno;
    ::close(f);
    ::unlink(name.c_str());
    return Status::FromErrno("cannot set the mode of " + name, err);
  }
  *temp = std::move(name);
  *fd = f;
  return Status::Ok();
}

Status SyncDirOf(const std::string& path) {
  const std::string dir = DirOf(path);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  Status s;
  if (dfd < 0 || ::fsync(dfd) != 0) {
    if (errno != EINVAL && errno != EROFS)
      s = Status::FromErrno("cannot sync directory " + dir, errno);
  }
  if (dfd >= 0) ::close(dfd);
  return s;
}

Status RenameDurably(const std::string& temp, const std::string& path) {
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    return Status::FromErrno("cannot rename " + temp + " to " + path, errno);
  }
  return SyncDirOf(path);
}

Status InstallFile(const std::string& temp, const std::string& path) {
  const int fd = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);
  Status s;
  if (fd < 0) {
    s = Status::FromErrno("cannot open " + temp, errno);
  } else {
    if (::fsync(fd) != 0) s = Status::FromErrno("cannot sync " + temp, errno);
    ::close(fd);
  }
  if (s.ok()) s = RenameDurably(temp, path);
  if (!s.ok()) ::unlink(temp.c_str());
  return s;
}

Status WriteFileAtomically(const std::string& path, std::string_view data, const std::string& who) {
  struct stat target;
  if (::stat(path.c_str(), &target) == 0 && !S_ISREG(target.st_mode)) {
    if (S_ISDIR(target.st_mode)) return Status::InvalidArgument(path + " is a directory");
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("cannot open " + path, errno);
    Status s = WriteAll(fd, data, path);
    if (::close(fd) != 0 && s.ok()) s = Status::FromErrno("cannot write " + path, errno);
    return s;
  }
  std::string temp;
  int fd = -1;
  TRACEDB_RETURN_IF_ERROR(CreateTemporaryBeside(path, &temp, &fd));
  InterruptCleanup on_interrupt(temp, who);
  Status s = WriteAll(fd, data, temp);
  // On disk before it takes the final name, so that a crash never leaves PATH short.
  if (s.ok() && ::fsync(fd) != 0) s = Status::FromErrno("cannot sync " + temp, errno);
  if (::close(fd) != 0 && s.ok()) s = Status::FromErrno("cannot write " + temp, errno);
  if (s.ok()) s = RenameDurably(temp, path);
  if (!s.ok()) ::unlink(temp.c_str());
  on_interrupt.Release();  // renamed into place, or removed
  return s;
}

std::string RemoveDbFiles(const std::string& path) {
  std::string problems;
  for (const char* suffix : {"-journal", "-wal", "-shm", ""}) {
    const std::string p = path + suffix;
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
      if (!problems.empty()) problems += "; ";
      problems += "cannot remove " + p + ": " + std::strerror(errno);
    }
  }
  return problems;
}

}  // namespace tracedb::engine
