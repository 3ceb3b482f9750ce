// The interface every importer implements, one module per format (query/import/<format>/…),
// and the registry that lists them (registry.cc). `tracedb import` detects each input's format
// with Detect() and hands it to that importer, which writes through engine::TraceWriter and
// engine::TraceBuilder inside the batch the caller opened.
//
// Conventions shared by all importers (docs/importers.md):
//   - timestamps and durations become integer ns on the file's clock (µs × 1000, keeping the
//     fractional digits Kineto writes); ranks come from the file's content, else its name, else
//     the order of the inputs;
//   - one bad record is skipped and counted in stats("import_skipped", rank); a truncated file
//     keeps every complete record and counts stats("import_truncated", rank);
//   - an unreadable file is an error naming the file and the byte offset.
// Thread safety: an Importer is stateless between Import() calls.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/db/trace_writer.h"
#include "engine/util/status.h"

namespace tracedb::query {

struct ImportInput {
  std::string path;        // a file (possibly .gz) or, for formats that use one, a directory
  int32_t rank_hint = -1;  // rank implied by the file name or the input order; -1 when unknown
  // Optional: called now and then with the bytes of the file read so far and its size on disk
  // (the shell prints progress for big files).
  std::function<void(uint64_t bytes_done, uint64_t bytes_total)> progress;
};

struct ImportResult {
  int32_t rank = -1;             // the rank the file was imported as (-1: several, or none)
  std::vector<int32_t> ranks;    // every rank whose own data the input holds, ascending
  int32_t world_size = 0;        // the job's size as the input states it; 0: not stated
  int64_t first_ts = INT64_MAX;  // ns, the input's clock: its earliest event (> last_end: none)
  int64_t last_end = INT64_MIN;  // ns: the latest end of one of its events
  uint64_t events = 0;           // rows written (into `rows_table`)
  // Where those rows went: "events" (the timeline) for the trace formats; the MPI profile tables
  // for mpitrace and mpiP, whose summaries hold no timeline events.
  std::string rows_table = "events";
  uint64_t skipped = 0;          // bad records skipped
  uint64_t truncated_bytes = 0;  // bytes of an incomplete tail
  std::vector<std::string> warnings;
};

class Importer {
 public:
  virtual ~Importer() = default;
  // The --format name: "chrome", "horovod", "byteps", "bluefog", "kineto", "mpitrace", "mpip".
  virtual const char* name() const = 0;
  // How sure (0-100) the importer is that a file named `path` whose first bytes (decompressed,
  // up to 64 KiB) are `head` is in its format; 0 when it is not.
  virtual int Detect(std::string_view path, std::string_view head) const = 0;
  // Imports one input. REQUIRES: a batch is open on `writer`.
  virtual Status Import(const ImportInput& input, engine::TraceWriter* writer,
                        ImportResult* result) = 0;
};

// Every importer, in the order Detect() ties are broken.
const std::vector<Importer*>& Importers();
// The importer named `name`, or nullptr.
Importer* FindImporter(std::string_view name);
// The importer whose Detect() scores (path, head) highest, or nullptr when none claims it.
Importer* DetectImporter(std::string_view path, std::string_view head);

}  // namespace tracedb::query
