// The Chrome trace exporter: writes a slice of a trace database as Chrome's Trace Event JSON
// (the object form), which chrome://tracing, the Perfetto UI and speedscope open. One entry
// point, ExportChrome().
//
// It streams: event blocks are chosen with the zone maps (`blocks` by rank and time range,
// `block_names` for names and categories), decoded one at a time and formatted straight into a
// large output buffer, so memory does not grow with the trace. Large exports can be split into
// several complete files, each under a size limit, and gzip-compressed.
// Thread safety: one call at a time per Db.
// Format and mapping: docs/export.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::query {

// One end of the time window. Times are ns on the job's common clock.
struct ChromeTimeBound {
  enum class Kind {
    kNone,        // unbounded
    kEpochNs,     // value: ns since the Unix epoch
    kSinceStart,  // value: ns after the job's first event
    kAfterFrom,   // (`to` only) value: ns after the `from` bound, rank by rank
    kStep,        // value: a training step number (per rank, through the `steps` table)
  };
  Kind kind = Kind::kNone;
  int64_t value = 0;
  std::string text;  // as the user wrote it, for otherData (optional)
};

struct ChromeExportStats;

struct ChromeExportOptions {
  // The output: FILE.json, or FILE.json.gz for gzip. Split parts are FILE.1.json,
  // FILE.2.json… (before ".gz" when compressed).
  std::string output;
  // Recorded in otherData.source_db; db->path() when empty.
  std::string source_label;

  // Filters; an event is exported when it passes all of them.
  std::vector<std::pair<int64_t, int64_t>> ranks;  // inclusive rank ranges; empty: every rank
  ChromeTimeBound from, to;        // window [from, to): spans that overlap it are kept
  std::vector<std::string> names;  // fnmatch(3) globs on the event name; empty: every name
  std::vector<std::string> cats;   // exact categories; empty: every category
  std::string ranks_text;          // the rank filter as written, for otherData (optional)

  // Splitting: each file's JSON (uncompressed) stays within this many bytes; 0: one file.
  uint64_t max_file_bytes = 0;
  // gzip level for a ".gz" output (1 fastest .. 9 smallest).
  int gzip_level = 1;
  // Timestamps are µs after the job's first event (otherData.ts_origin_ns, the same for every
  // export of a database, so exports line up), which JSON readers' doubles hold to the ns for
  // 100+ days. true: µs since the Unix epoch, which doubles hold only to about 0.25 µs, so
  // viewers may mis-nest spans shorter than that.
  bool epoch_ts = false;

  // Flow arrows between events given by id ((track << 32) | k), from -> to, drawn in addition
  // to the request flows (events of one rank sharing a nonzero `flow` argument).
  std::vector<std::pair<int64_t, int64_t>> extra_flows;
  std::string extra_flow_name = "message";  // their name (category "flow")
  // Request flows whose first end is waiting for its second, held per rank at most; beyond,
  // the oldest half is dropped and counted in flows_unmatched.
  size_t max_open_flows = 1u << 20;

  // Called between blocks, about every 64 blocks, with the counts so far.
  std::function<void(const ChromeExportStats&)> progress;
};

struct ChromeExportStats {
  // Every event of the database falls in exactly one of the first four counts.
  uint64_t events_written = 0;      // spans, instants and counters written
  uint64_t events_filtered = 0;     // left out by the filters (zone maps or row tests)
  uint64_t events_corrupt = 0;      // in blocks that failed to decode (skipped)
  uint64_t counters_nonfinite = 0;  // counter samples that are NaN or infinite (no JSON form)
  uint64_t events_total() const {
    return events_written + events_filtered + events_corrupt + counters_nonfinite;
  }

  uint64_t blocks_total = 0;
  uint64_t blocks_decoded = 0;
  uint64_t blocks_corrupt = 0;
  uint64_t metadata_events = 0;      // process/thread names and sort indexes (every file)
  uint64_t flows_written = 0;        // request flows (s + f pairs)
  uint64_t flows_unmatched = 0;      // request flow ends whose partner was not exported
  uint64_t flows_cut = 0;            // pairs whose ends fell in two split files (not drawn)
  uint64_t extra_flows_written = 0;  // pairs of ChromeExportOptions::extra_flows drawn
  uint64_t extra_flows_missing = 0;  // pairs with an end not exported (or cut by a split)
  uint64_t bad_json_args = 0;        // JSON args that were not an object: written as a string
  uint64_t oversize_files = 0;       // files over max_file_bytes (one event larger than it)

  std::vector<std::string> files;  // paths written, in order
  uint64_t json_bytes = 0;         // uncompressed, all files
  uint64_t disk_bytes = 0;         // on disk, all files
  int64_t job_start_ns = 0;        // the job's first event
};

// Exports the events of `db` selected by `o` to o.output (and split parts). Returns
// InvalidArgument for unusable options (and for a database this build cannot read), IOError
// naming the path for an output that cannot be written. Blocks that fail to decode are skipped
// and counted. *stats is filled as far as the export got.
Status ExportChrome(engine::Db* db, const ChromeExportOptions& o, ChromeExportStats* stats);

// The path of split part `part` (0: o.output itself): "t.json" -> "t.1.json",
// "t.json.gz" -> "t.1.json.gz", "t" -> "t.1".
std::string ChromePartPath(const std::string& output, uint64_t part);

}  // namespace tracedb::query
