// Pieces every importer shares: ranks from file names, and the bookkeeping each imported file
// leaves in the database (its ranks row, its sources row, its import_* stats). Thread safety: one
// thread at a time (like the TraceWriter it wraps).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/db/trace_writer.h"
#include "engine/util/status.h"
#include "query/import/importer.h"
#include "query/import/json/event_reader.h"

namespace tracedb::query {

// The number that ends a file's base name, extensions aside ("timeline3.json" -> 3,
// "rank-12.json.gz" -> 12); -1 when there is none.
int32_t RankFromFileName(std::string_view path);

// What an importer found in one file, for the database and for ImportResult.
struct FileOutcome {
  std::string path;
  std::string format;
  int32_t rank = 0;
  int32_t world_size = 0;
  int32_t local_rank = 0;
  uint64_t events = 0;           // rows written
  uint64_t skipped = 0;          // malformed records
  uint64_t truncated = 0;        // bytes of a cut tail
  uint64_t unmatched = 0;        // ends without a begin, and begins never ended
  uint64_t ignored = 0;          // well-formed events of a kind this format does not import
  int64_t first_ts = INT64_MAX;  // ns: the earliest event; > last_end when there is none
  int64_t last_end = INT64_MIN;  // ns: the latest end of an event
};

// Writes the ranks row (source = format, clock_method "file"; not when f.rank is -1), the
// sources row (finished = 1) and the import_skipped / import_truncated / import_unmatched /
// import_ignored stats of a file.
Status RecordFile(engine::TraceWriter* writer, const FileOutcome& f);

// Adds `f` to `result` (`first`: the input's first file; rank becomes -1 once files of two
// ranks were added), with warnings for what it lost.
void AddToResult(const FileOutcome& f, bool first, ImportResult* result);

// The reader's first errors, and the byte source's warning, as warnings.
void AddReaderWarnings(const json::EventReader& reader, std::vector<std::string>* warnings);

// True when `path` (made absolute) is already in the sources table as finished.
StatusOr<bool> AlreadyImported(engine::TraceWriter* writer, const std::string& path);

// The absolute, normalised form of `path` (as stored in the sources table).
std::string SourcePath(const std::string& path);

// Merges member "key": value (value already JSON text) into a JSON object text (or empty).
void AddJsonMember(std::string* object, std::string_view key, std::string_view value_json);

// Appends the compact form of a raw args value to *out when it is a non-empty object; keeps it
// as {"args": <text as a string>} when it is not valid JSON.
void AppendArgsJson(std::string_view raw_args, std::string* out);

}  // namespace tracedb::query
