// Removal of segment files whose events the trace database holds durably
// (`tracedb compact --delete-compacted`), so that a long job's trace directory stays bounded.
//
// A file is removed only when all of these hold:
//   - its `sources` row says it was taken whole (finished) up to its current size, which has
//     not changed since (nothing was appended after the commit that took it);
//   - no writer can append to it any more: it ends with an END block (its writer closed it and
//     moved on to its next file), or its writer lock is free and its META names this host (the
//     writer died), or the caller says the job is over (`finish`); a lock still held keeps it;
//   - the commit that recorded it is on disk: the database file and its directory are fsynced
//     first (with journal_mode=DELETE a commit is the journal's unlink, which a power loss
//     could undo otherwise).
// After the unlinks, the files' `sources` rows are deleted in one transaction (so that a new
// file that reuses the name, e.g. after PID reuse, is compacted as new) and the stats
// `deleted_segment_files` / `deleted_segment_bytes` grow. A crash between an unlink and that
// transaction leaves rows of missing files, which the next call deletes.
// docs/database-format.md "Deleting compacted segments".
// Thread safety: one call per database at a time; REQUIRES no transaction open on `db`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::engine {

struct DeleteCompactedOptions {
  std::vector<std::string> inputs;  // trace directories, as given to Compact()
  bool finish = false;              // the job is over: a finished file needs no writer check
};

struct DeleteCompactedStats {
  uint64_t files = 0;  // segment files removed
  uint64_t bytes = 0;  // their size
  uint64_t kept = 0;   // finished files kept (writer still holds it, grew, unknown writer)
  std::vector<std::string> problems;
};

StatusOr<DeleteCompactedStats> DeleteCompactedSegments(Db* db,
                                                       const DeleteCompactedOptions& options);

}  // namespace tracedb::engine
