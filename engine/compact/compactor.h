// Compaction: merges every rank's segment files into one trace database, on the job's common
// clock, incrementally.
//
// For each segment file the database records how far it was taken (`sources`); a re-run reads
// only what is new. Each file's new data is committed in one transaction together with that
// progress and the open spans (several whole files share a transaction: up to 64 files, 128K
// events or one second), so killing compaction at any moment leaves a valid database that
// the next run completes without duplicates. The events of a file that is still being written are
// taken only up to its last clock anchor (the rest waits for the next anchor, so that every event
// is interpolated between anchors, never extrapolated). A file is taken whole when its writer
// closed it, when its writer is gone (the writer's flock on the file can be taken: the process
// died, docs/segment-format.md "Writer lock"; judged only for files whose META names this
// host), with `finish` set, or, only where the lock gives
// no answer (a filesystem without flock), when it was untouched for `stale_after_s`. A torn
// tail of a file taken whole is skipped and counted.
//
// Open spans (docs/database-format.md "Open spans"): a span begun and not ended stays in the
// saved state until its end comes; when its process is over (the process's last file taken
// whole and: `finish`, a dead writer, a file untouched for `stale_after_s`, or a file closed by
// a process that is gone, with no file after it), it is written as a row flagged open, ending
// when the process was last seen (its last clock anchor or event, whichever is later). A live
// process's spans are never written open, so a later pass that sees their end closes them;
// `finish` writes every span still pending open, even when no file has anything new.
//
// Clocks (docs/database-format.md "Clocks"): each process's recorder clock is mapped to realtime
// through its anchors; ranks on another host than rank 0 are further corrected by their MPI
// clock-sync points against rank 0. The common clock is rank 0's host realtime, in ns.
// Thread safety: one compaction per database at a time (SQLite's lock enforces it).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/db/trace_writer.h"
#include "engine/util/status.h"

namespace tracedb::engine {

struct CompactOptions {
  std::vector<std::string> inputs;  // trace directories (DIR with rank-*/, or one rank dir)
  bool finish = false;              // the job is over: take every file whole
  int64_t stale_after_s = 120;      // without flock: an unclosed file untouched this long is
                                    // taken whole
  // When set, only the events of ranks it accepts are compacted (a shard of the job: an MPI
  // compaction process, or one node's ranks). Rank 0's files are still read for their clock
  // anchors (the common clock), but their events, sources and stats stay out unless accepted.
  std::function<bool(int32_t rank)> take_rank;
};

struct CompactProgress {
  size_t file_index = 0;  // 1-based
  size_t files = 0;
  std::string path;
  uint64_t bytes_done = 0;  // segment bytes taken so far in this run
  uint64_t bytes_total = 0;
  uint64_t rows = 0;  // rows written so far in this run
};

struct CompactStats {
  uint64_t files = 0;              // segment files seen
  uint64_t files_read = 0;         // files with something new
  uint64_t files_waiting = 0;      // files whose tail waits for the next anchor
  uint64_t files_dead_writer = 0;  // unclosed files taken whole because their writer is gone
  uint64_t segment_events = 0;     // recorder events read, counted as `tracedb info` counts them
                                   // (SegmentEventCount: a begin/end pair once)
  uint64_t step_markers = 0;       // step markers read
  uint64_t rows = 0;               // rows added to the database
  uint64_t bytes_read = 0;         // segment bytes taken
  uint64_t corrupt_blocks = 0;
  uint64_t torn_tails = 0;
  uint64_t dropped = 0;            // events the recorder reported dropped
  uint64_t open_spans_closed = 0;  // spans written open (their process ended first)
  uint64_t unreadable_files = 0;
  std::vector<std::string> problems;
};

// Runs one compaction pass of `options.inputs` into `writer`'s database.
StatusOr<CompactStats> Compact(TraceWriter* writer, const CompactOptions& options,
                               const std::function<void(const CompactProgress&)>& progress = {});

}  // namespace tracedb::engine
