// The generic Chrome trace-event mapping that the chrome, kineto and byteps importers share:
// phases B/E/X/i/I/R/C/M/s/t/f/b/e/n (and legacy S/T/F) become spans, instants, counters and
// flow rows on tracks named from the M records; events are ordered per track with an
// EventSorter (X events sorted by (ts, -dur) so that nesting is exact) and fed to a
// TraceBuilder once the whole file is read, when every M record and top-level member
// (otherData, distributedInfo, baseTimeNanoseconds) is known. A format adds what it knows
// through a ChromeFlavor. Conventions: docs/importers.md.
// Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/db/trace_writer.h"
#include "engine/util/status.h"
#include "query/import/import_common.h"
#include "query/import/importer.h"
#include "query/import/json/event_reader.h"

namespace tracedb::query::chrome {

// An owned pid or tid as the file wrote it.
struct FileId {
  bool present = false;
  bool is_int = false;
  int64_t num = 0;
  std::string text;  // the decoded string, or the digits
};

// What the file says about the events of one local track, for naming it.
struct TrackFacts {
  enum class Type : uint8_t { kThread, kAsync, kCounter, kGlobal, kProcess };
  Type type = Type::kThread;
  FileId pid, tid;
  std::string label;           // kAsync: "<cat> <id>"; kCounter: "<name> <series>"
  std::string process_name;    // from M process_name
  std::string process_labels;  // from M process_labels
  std::string thread_name;     // from M thread_name
  std::string tracedb_kind;    // from M thread_name's args, in tracedb's own export
  // tracedb's own export: the track's tid, pid and local_id in the exported database (-1: NULL)
  bool tracedb_ids = false;
  int64_t tracedb_tid = -1, tracedb_pid = -1, tracedb_local_id = -1;
  int64_t sort_index = 0;  // thread_sort_index, else process_sort_index
  bool gpu = false;        // a ChromeFlavor saw device events on it
};

// Extra facts a flavor attaches to one event.
struct EventFacts {
  engine::EventArgs args;       // typed arguments (mask 0: none)
  std::optional<int64_t> step;  // the event starts training step N
  bool gpu = false;             // the event runs on a device
};

class ChromeFlavor {
 public:
  virtual ~ChromeFlavor() = default;
  // The format name recorded in ranks.source and sources.format.
  virtual const char* format() const = 0;
  // Looks at a span, instant or flow event before it is buffered.
  virtual void Annotate(const json::TraceEvent& ev, EventFacts* facts) const {}
  // May change the track a local track becomes; `spec` holds the generic choice.
  virtual void NameTrack(const TrackFacts& facts, engine::TrackSpec* spec) const {}
};

struct ChromeOptions {
  int32_t rank_hint = -1;  // used when the content names no rank
  int32_t local_rank = 0;  // for the ranks row
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// Imports one Chrome-JSON file through `flavor`: its rows, steps and (for a file of several
// ranks) ranks rows; *outcome says what it found (rank -1: several), and the reader's first
// errors go to *warnings. The caller records the file (RecordFile). REQUIRES: a batch is open on
// `writer`.
Status ImportChromeFile(const std::string& path, const ChromeFlavor& flavor,
                        const ChromeOptions& options, engine::TraceWriter* writer,
                        FileOutcome* outcome, std::vector<std::string>* warnings);

// The whole Importer::Import of a one-file format: ImportChromeFile with the input's rank hint
// and progress, then the file recorded (RecordFile) and *result filled.
Status ImportChromeInput(const ImportInput& input, const ChromeFlavor& flavor,
                         engine::TraceWriter* writer, ImportResult* result);

// A flow id: the integer, a "0x…" hex or decimal string's value, else a 64-bit hash of the text.
uint64_t FlowId(const json::JsonId& id);

}  // namespace tracedb::query::chrome
