// Output files, one way for every command: a file is written under a temporary name of its own
// beside the final one (PATH.partial-XXXXXX, same filesystem), fsynced, renamed into place and
// its directory fsynced, so a failed, interrupted or crashed write never leaves a short file under
// the final name; on failure the temporary file is removed. An output that exists and is not a
// regular file (/dev/null, /dev/stdout, a FIFO) is written in place: renaming over it would
// replace the device itself. Also the removal of a SQLite database with its sidecar files.
// Users: the exporters (query/export/output_file.h), `report html`, the shard catalog's build,
// `top` and `import` (a database they made and then drop). Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "engine/util/status.h"

namespace tracedb::engine {

// Creates a fresh PATH.partial-XXXXXX beside `path`, open for writing (O_CLOEXEC), with the mode
// a new file gets (0666 less the umask): *temp its name, *fd its descriptor.
Status CreateTemporaryBeside(const std::string& path, std::string* temp, int* fd);

// fsyncs the directory that holds `path`, which makes a rename in it durable. A filesystem that
// refuses fsync on a directory (EINVAL, EROFS) is not an error: the file itself was synced.
Status SyncDirOf(const std::string& path);

// Renames `temp` (already synced) to `path`, then syncs the directory.
Status RenameDurably(const std::string& temp, const std::string& path);

// fsyncs the complete file `temp` and renames it durably to `path` (RenameDurably). On failure
// `temp` is removed; `path` is as it was unless only the directory's sync failed.
Status InstallFile(const std::string& temp, const std::string& path);

// Writes `data` to `path` as above (or in place when `path` is not a regular file). A signal
// (SIGINT, SIGTERM, SIGHUP) while writing removes the temporary file, saying so under `who`
// ("tracedb report"). Errors name the file.
Status WriteFileAtomically(const std::string& path, std::string_view data, const std::string& who);

// Removes the SQLite database `path` with its -journal, -wal and -shm files, the sidecars first
// (a hot journal left behind could be played into a new database of the same name); missing
// ones are fine. Returns "" or what could not be removed ("cannot remove P: reason; ...").
std::string RemoveDbFiles(const std::string& path);

}  // namespace tracedb::engine
