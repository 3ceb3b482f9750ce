// Retention for long jobs (`tracedb archive`): drops the event blocks older than what the
// policy keeps, optionally recompresses older blocks with LZ4-HC, and shrinks the file.
//
// What is kept: every event that ends at or after the cutoff. With `keep_last_ns` the cutoff is
// the newest event's end minus that span (one cutoff for the whole job); with `keep_steps` N it
// is, per rank, the start of that rank's step (last step - N + 1) in `steps`; with both, the
// earlier of the two (an event is kept when either policy keeps it). A block is dropped only
// when every event in it ended before its rank's cutoff, so some older events stay (those in a
// block that straddles the cutoff). The summary tables (name_stats, steps, stats, clocks,
// ranks, tracks, the MPI profile tables) are not touched: name_summary, step_times and the
// other summaries still answer for the whole job. `stats` gains archive_dropped_events and
// archive_dropped_blocks per rank; meta `archive.cutoff_ns.<rank>` records the latest cutoff.
//
// Recompression re-encodes the payload of blocks whose events all ended more than
// `recompress_older_than_ns` before the newest event's end (-1: every block) with
// LZ4_compress_HC; the block header keeps
// codec 1 (LZ4), since LZ4-HC output is an LZ4 block that LZ4_decompress_safe reads, with the
// same uncompressed size and CRC. A block is rewritten only when the HC payload is smaller.
// meta `archive.recompressed_below` = every block id below it was considered, so a re-run
// looks only at newer blocks.
//
// Validity: the drops and recompression are one SQLite transaction; VACUUM is another (SQLite
// writes the new content through its rollback journal), so a crash at any point leaves either
// the old or the new database. Concurrent compaction waits on SQLite's lock (busy timeout).
// docs/database-format.md "Archive (retention)". Thread safety: one call per database at a time.
#pragma once

#include <cstdint>
#include <string>

#include "engine/util/status.h"

namespace tracedb::engine {

struct ArchiveOptions {
  int64_t keep_last_ns = -1;  // keep events that end within this span of the newest; -1: no
  int64_t keep_steps = -1;    // keep events of the last N >= 1 steps (per rank); -1: no
  bool recompress = false;
  int64_t recompress_older_than_ns = -1;  // ns before the newest event's end; -1: all
  int hc_level = 12;                      // LZ4HC level (1..12)
  bool vacuum = true;                     // shrink the file afterwards
  int busy_timeout_ms = 600000;           // wait this long for a running compaction
};

struct ArchiveReport {
  uint64_t events_before = 0;
  uint64_t events_after = 0;
  uint64_t blocks_before = 0;
  uint64_t blocks_dropped = 0;
  uint64_t blocks_recompressed = 0;  // rewritten (HC was smaller)
  uint64_t blocks_considered = 0;    // looked at for recompression
  uint64_t block_bytes_before = 0;   // sum of blocks.data sizes
  uint64_t block_bytes_after = 0;
  uint64_t file_bytes_before = 0;  // the database file on disk
  uint64_t file_bytes_after = 0;
  int64_t cutoff_min_ns = 0;  // the earliest per-rank cutoff applied (0: nothing to drop)
  int64_t cutoff_max_ns = 0;
  bool vacuumed = false;
};

// Applies `options` to the trace database at `path`. InvalidArgument when it is not a trace
// database, or when keep_steps is asked of a database without steps.
StatusOr<ArchiveReport> ArchiveDb(const std::string& path, const ArchiveOptions& options);

}  // namespace tracedb::engine
