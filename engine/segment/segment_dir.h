// A job's trace directory: DIR/rank-<r>/seg-<pid>-<seq>.tds files written by the recorder.
// Lists the segment files of every rank and summarises them (events, drops, bytes, damage).
// Thread safety: stateless functions.
// Format: docs/segment-format.md, "Directory layout".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/segment/segment_format.h"
#include "engine/util/status.h"

namespace tracedb::engine {

struct SegmentFileRef {
  int32_t rank = 0;
  uint32_t pid = 0;
  uint32_t seq = 0;
  std::string path;
  uint64_t size = 0;
};

// The segment files under `dir` (a job directory with rank-*/ subdirectories, or one rank
// directory), ordered by rank, pid, seq. NotFound when `dir` does not exist or holds none.
// With `keep`, only the rank directories of the ranks it accepts are read (a shard of a job of
// thousands of ranks lists its own ranks, not every rank's files once per shard); when that leaves
// none, the listing is the unfiltered one (so that "holds none" means the same with a filter).
StatusOr<std::vector<SegmentFileRef>> ListSegmentFiles(
    const std::string& dir, const std::function<bool(int32_t rank)>& keep = nullptr);

// How segment events are counted, one definition for `tracedb info` (SummarizeSegmentDir) and
// `tracedb compact` (CompactStats, the `sources.events` column): what the program emitted, one
// per span, instant, counter or complete event. A begin/end pair is ONE event (the span the DB
// holds as one row): an end marker is counted apart (`ends`), as is a step marker
// (EventKind::kStep, `steps`). Only what the reader returns is counted: blocks that fail their
// CRC and a torn tail are in neither.
struct SegmentEventCount {
  uint64_t events = 0;
  uint64_t ends = 0;
  uint64_t steps = 0;
  // Counts `e`; true when it is an event, false for an end or a step marker.
  bool Add(const SegmentEvent& e) {
    if (e.kind == EventKind::kStep) {
      ++steps;
      return false;
    }
    if (e.kind == EventKind::kEnd) {
      ++ends;
      return false;
    }
    ++events;
    return true;
  }
};

struct RankSummary {
  int32_t rank = 0;
  std::string host;
  std::vector<uint32_t> pids;
  uint64_t files = 0;
  uint64_t events = 0;
  uint64_t events_by_kind[6] = {0, 0, 0, 0, 0, 0};  // indexed by EventKind
  uint64_t dropped = 0;
  uint64_t bytes = 0;
  int64_t first_ts = 0;  // ns, recorder clock (0 when no events)
  int64_t last_ts = 0;
  uint64_t sync_points = 0;
};

struct DirSummary {
  uint64_t ranks = 0;
  uint64_t files = 0;
  uint64_t events = 0;  // begin, end, instant, counter and complete events (not step markers)
  uint64_t steps = 0;   // step markers
  uint64_t dropped = 0;
  uint64_t bytes = 0;  // the segment files' size on disk
  uint64_t corrupt_blocks = 0;
  uint64_t torn_tails = 0;
  uint64_t torn_bytes = 0;
  uint64_t open_files = 0;  // files without an END block (still being written, or writer died)
  uint64_t dead_writer_files = 0;  // of those, files whose writer is gone (its lock is free)
  uint64_t unreadable_files = 0;
  std::vector<std::string> problems;  // "<file>: <problem>", capped
  std::map<int32_t, RankSummary> per_rank;
};

// What a recording made in `dir`: the segment files rank-<r>/seg-<pid>-<seq>.tds (regular files
// in real directories, not symbolic links) and `also` (names at the top, e.g. a lock file).
// `foreign` gets the first few other entries (the user's files), relative to `dir`.
struct SegmentDirContents {
  uint64_t segment_files = 0;
  std::vector<std::string> foreign;  // capped at 8
  bool empty() const { return segment_files == 0 && foreign.empty(); }
};
SegmentDirContents InspectSegmentDir(const std::string& dir,
                                     const std::vector<std::string>& also = {});
// Removes only what a recording made in `dir` (as InspectSegmentDir counts it), then each rank
// directory and `dir` itself once empty; never follows a symbolic link and never removes another
// file. Returns what was left (foreign entries), empty when `dir` is gone.
std::vector<std::string> RemoveRecordedSegments(const std::string& dir);

// Scans every segment file under `dir`. Damaged files and blocks are counted, not fatal.
StatusOr<DirSummary> SummarizeSegmentDir(const std::string& dir);

}  // namespace tracedb::engine
