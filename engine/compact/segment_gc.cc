// Removal of compacted segment files. See segment_gc.h.
#include "engine/compact/segment_gc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <optional>

#include "engine/db/db_schema.h"
#include "engine/segment/segment_dir.h"
#include "engine/segment/segment_reader.h"
#include "engine/segment/segment_writer.h"
#include "engine/util/path.h"

namespace tracedb::engine {
namespace {

struct Source {
  uint64_t offset = 0;
  uint64_t size = 0;
  bool finished = false;
};

std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "";
  return host;
}

// A directory's entries made durable (the database's own file is synced by SyncDatabase: never
// open a descriptor of a database this process has open).
Status FsyncDir(const std::string& path) {
  const int fd = ::open(path.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("cannot open " + path + " to sync it", errno);
  const int r = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some filesystems refuse fsync on a directory (EINVAL): nothing more can be done there.
  if (r != 0 && err != EINVAL) return Status::FromErrno("cannot sync " + path, err);
  return Status::Ok();
}

// Syncs the database's files through SQLite's own handles: the main file and, when open, its
// journal or WAL. Never through a descriptor opened here: closing any descriptor of a file drops
// every POSIX lock this process holds on it, SQLite's included. (It did: a `compact --watch
// --delete-compacted` lost its WAL lock at each pass that deleted files, and a `tracedb archive`
// beside it switched the file out of WAL under it; the watch's next commits went to a WAL
// nobody read, and the file was corrupt.)
Status SyncDatabase(Db* db) {
  for (const int op : {SQLITE_FCNTL_FILE_POINTER, SQLITE_FCNTL_JOURNAL_POINTER}) {
    sqlite3_file* file = nullptr;
    if (sqlite3_file_control(db->raw(), "main", op, &file) != SQLITE_OK || file == nullptr ||
        file->pMethods == nullptr) {
      continue;  // no such file open (no journal outside a transaction in DELETE mode)
    }
    const int rc = file->pMethods->xSync(file, SQLITE_SYNC_FULL);
    if (rc != SQLITE_OK) {
      return Status::IOError(
          "cannot sync " + db->path() +
          (op == SQLITE_FCNTL_FILE_POINTER ? std::string() : std::string(" (its journal)")) + ": " +
          sqlite3_errstr(rc));
    }
  }
  return Status::Ok();
}

// Is `path` inside one of `dirs` (as ListSegmentFiles builds paths: DIR + "/" + …)?
bool UnderInputs(const std::string& path, const std::vector<std::string>& dirs) {
  for (std::string d : dirs) {
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    if (path.size() > d.size() && path.compare(0, d.size(), d) == 0 && path[d.size()] == '/') {
      return true;
    }
  }
  return false;
}

// Removes `path`, a file found under one of `dirs`, without following a symbolic link on the
// way: each directory below the input is opened with O_NOFOLLOW and the file removed relative
// to it, so a rank directory (or file) that is a link to elsewhere is never reached through.
// The input directory itself is the user's to name (it may be a link).
Status UnlinkInside(const std::string& path, const std::vector<std::string>& dirs,
                    uint64_t expected_size) {
  std::string root;
  for (std::string d : dirs) {
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    if (path.size() > d.size() && path.compare(0, d.size(), d) == 0 && path[d.size()] == '/') {
      root = d;
      break;
    }
  }
  if (root.empty()) return Status::InvalidArgument(path + ": not inside an input directory");
  int fd = ::open(root.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("cannot open " + root, errno);
  std::string rest = path.substr(root.size() + 1);
  std::string done = root;
  for (size_t slash; (slash = rest.find('/')) != std::string::npos;) {
    const std::string part = rest.substr(0, slash);
    rest = rest.substr(slash + 1);
    done += "/" + part;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      ::close(fd);
      return Status::InvalidArgument(path + ": not removed: '..' in the path");
    }
    const int next = ::openat(fd, part.c_str(), O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    ::close(fd);
    if (next < 0) {
      if (err == ELOOP || err == ENOTDIR) {
        return Status::InvalidArgument(path + ": not removed: " + done +
                                       " is a symbolic link (only files inside the trace "
                                       "directory are deleted)");
      }
      return Status::FromErrno("cannot open " + done, err);
    }
    fd = next;
  }
  struct stat st;
  Status result = Status::Ok();
  if (::fstatat(fd, rest.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    result = Status::FromErrno("cannot stat " + path, errno);
  } else if (!S_ISREG(st.st_mode)) {
    result = Status::InvalidArgument(path +
                                     ": not removed: not a regular file (a symbolic "
                                     "link?)");
  } else if (static_cast<uint64_t>(st.st_size) != expected_size) {
    result = Status::Aborted(path + ": changed under us");
  } else if (::unlinkat(fd, rest.c_str(), 0) != 0) {
    result = Status::FromErrno("cannot remove " + path, errno);
  }
  ::close(fd);
  return result;
}

}  // namespace

StatusOr<DeleteCompactedStats> DeleteCompactedSegments(Db* db,
                                                       const DeleteCompactedOptions& options) {
  DeleteCompactedStats stats;
  std::map<std::string, Source> sources;
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st,
                             db->Prepare("SELECT path, offset, size, finished FROM sources "
                                         "WHERE format = 'segment'"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      sources[std::string(st.Text(0))] = Source{static_cast<uint64_t>(st.Int(1)),
                                                static_cast<uint64_t>(st.Int(2)), st.Int(3) != 0};
    }
  }
  // Rows of finished files that are gone (a crash after their unlink): delete them below.
  std::vector<std::string> forget;
  for (const auto& [path, s] : sources) {
    struct stat st;
    if (s.finished && UnderInputs(path, options.inputs) && ::lstat(path.c_str(), &st) != 0 &&
        errno == ENOENT) {
      forget.push_back(path);
    }
  }

  std::vector<SegmentFileRef> files;
  for (const std::string& dir : options.inputs) {
    StatusOr<std::vector<SegmentFileRef>> f = ListSegmentFiles(dir);
    if (!f.ok()) {
      if (f.status().IsNotFound()) continue;  // nothing (left) to delete there
      return f.status();
    }
    files.insert(files.end(), f->begin(), f->end());
  }
  // The candidates: taken whole, up to the size the file still has.
  std::vector<const SegmentFileRef*> candidates;
  for (const SegmentFileRef& f : files) {
    auto it = sources.find(f.path);
    if (it == sources.end() || !it->second.finished) continue;
    const Source& s = it->second;
    if (f.size == 0 || s.offset != f.size || s.size != f.size) {
      stats.kept++;
      continue;
    }
    candidates.push_back(&f);
  }
  if (!candidates.empty()) {
    // The commits that took these files must survive a power loss before the files go.
    TRACEDB_RETURN_IF_ERROR(SyncDatabase(db));
    TRACEDB_RETURN_IF_ERROR(FsyncDir(DirOf(db->path())));
  }
  const std::string this_host = HostName();
  std::map<std::string, uint64_t> bytes_by_rank_dir;
  ScanBuffers buffers;  // one for every file (engine/util/read_buffer.h)
  for (const SegmentFileRef* f : candidates) {
    // Asked before reading: a writer seen gone (or a closed file) cannot grow afterwards.
    const WriterState writer = ProbeSegmentWriter(f->path);
    if (writer == WriterState::kAlive) {
      stats.kept++;
      continue;
    }
    StatusOr<SegmentMetaScan> scan = ScanSegmentMeta(f->path, &buffers);
    if (!scan.ok()) {
      // Unreadable files were recorded finished with nothing taken: keep them for a person.
      stats.kept++;
      if (stats.problems.size() < 32) stats.problems.push_back(scan.status().message());
      continue;
    }
    const bool dead_here =
        writer == WriterState::kGone && scan->meta && scan->meta->host == this_host;
    if (!(scan->scan.closed || dead_here || options.finish)) {
      stats.kept++;
      continue;
    }
    const Status gone = UnlinkInside(f->path, options.inputs, f->size);
    if (!gone.ok()) {
      // Changed under us: the next pass decides. Anything else is said.
      if (gone.code() != Status::Code::kAborted && stats.problems.size() < 32) {
        stats.problems.push_back(gone.message());
      }
      stats.kept++;
      continue;
    }
    stats.files++;
    stats.bytes += f->size;
    bytes_by_rank_dir[DirOf(f->path)] += f->size;
    forget.push_back(f->path);
  }
  // The files are gone: their rows go too, so that a later file of the same name is new.
  if (!forget.empty() || stats.files > 0) {
    TRACEDB_RETURN_IF_ERROR(db->Begin());
    Status s = [&]() -> Status {
      TRACEDB_ASSIGN_OR_RETURN(
          Stmt del, db->Prepare("DELETE FROM sources WHERE path = ?1 AND format = 'segment'"));
      for (const std::string& p : forget) TRACEDB_RETURN_IF_ERROR(del.Bind(1, p).Run());
      if (stats.files > 0) {
        TRACEDB_RETURN_IF_ERROR(EnsureTable(db, "stats"));
        TRACEDB_ASSIGN_OR_RETURN(
            Stmt add, db->Prepare("INSERT INTO stats(name, rank, value) VALUES(?1, -1, ?2) "
                                  "ON CONFLICT(name, rank) DO UPDATE SET value = value + ?2"));
        TRACEDB_RETURN_IF_ERROR(
            add.Bind(1, "deleted_segment_files").Bind(2, static_cast<int64_t>(stats.files)).Run());
        TRACEDB_RETURN_IF_ERROR(
            add.Bind(1, "deleted_segment_bytes").Bind(2, static_cast<int64_t>(stats.bytes)).Run());
      }
      return Status::Ok();
    }();
    if (!s.ok()) {
      db->Rollback();
      return s;
    }
    TRACEDB_RETURN_IF_ERROR(db->Commit());
  }
  return stats;
}

}  // namespace tracedb::engine
