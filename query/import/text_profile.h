// Helpers shared by the importers of text profiles (IBM mpitrace and mpiP, query/import/mpitrace/
// and query/import/mpip/): reading a possibly gzip-compressed file line by line in bounded
// memory (LineReader); strict number parsing; the log of skipped lines that becomes
// stats("import_skipped") and ImportResult::warnings; and the rows both importers write in the
// tables they share (sources, ranks, rank_times, stats).
// Thread safety: free functions and value types; no shared state.
// Table mapping: docs/importers-mpi-profiles.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/db/trace_writer.h"
#include "engine/util/parse_number.h"
#include "engine/util/status.h"
#include "query/import/importer.h"

namespace tracedb::query::text_profile {

// A line longer than this is cut there (its rest is dropped and counted): no profile writes one,
// and a reader's memory stays bounded whatever the file holds.
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;
// How many skipped lines are reported one by one in ImportResult::warnings.
inline constexpr size_t kMaxLineWarnings = 5;

struct Line {
  uint32_t number = 0;    // 1-based
  std::string_view text;  // without the '\n' and a trailing '\r'
};

// The lines of a text profile, one at a time, from a file (gzip-compressed or plain, read in
// 64 KiB pieces) or from text in memory. Memory is bounded by kMaxLineBytes whatever the input:
// a gzip file of a hundred million short lines costs no more than one of ten (the importers
// never hold the whole file, nor a table of its lines).
class LineReader {
 public:
  // Over a file; `*size_on_disk` receives its size in bytes. IOError names the path.
  static StatusOr<std::unique_ptr<LineReader>> Open(const std::string& path,
                                                    uint64_t* size_on_disk);
  // Over `text` (which must outlive the reader).
  explicit LineReader(std::string_view text);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line that ends with '\n' (its text valid until the next call); false at the end
  // of the input or on a read error (then status() says which).
  bool Next(Line* line);
  const Status& status() const { return status_; }
  // After Next() returned false: the bytes after the last '\n' (an incomplete last line, cut
  // at kMaxLineBytes) and its line number.
  std::string_view tail() const { return tail_; }
  uint32_t tail_number() const { return tail_number_; }
  uint64_t tail_bytes() const { return tail_bytes_; }
  // Bytes (uncompressed) up to and including the last '\n' returned.
  uint64_t complete_bytes() const { return complete_bytes_; }
  // Lines cut at kMaxLineBytes, and the first one's number.
  uint64_t long_lines() const { return long_lines_; }
  uint32_t first_long_line() const { return first_long_line_; }

 private:
  LineReader() = default;
  bool Fill();  // reads more of the file into buf_; false at its end or on an error

  void* gz_ = nullptr;  // gzFile, or null for text in memory
  std::string path_;
  std::string buf_;  // file input not consumed yet (from pos_)
  size_t pos_ = 0;
  std::string_view text_;  // in-memory input not consumed yet
  bool eof_ = false;
  Status status_;
  uint32_t number_ = 0;
  std::string_view tail_;
  uint32_t tail_number_ = 0;
  uint64_t tail_bytes_ = 0;
  uint64_t complete_bytes_ = 0;
  uint64_t long_lines_ = 0;
  uint32_t first_long_line_ = 0;
  std::string cut_;  // a long line's first kMaxLineBytes
};

// All the lines of text in memory (FirstNonBlankLine and the tests).
struct SplitText {
  std::vector<Line> lines;      // every line that ends with '\n'
  std::string_view tail;        // the bytes after the last '\n': an incomplete last line
  uint32_t tail_number = 0;     // its line number (when tail is not empty)
  uint64_t complete_bytes = 0;  // bytes up to and including the last '\n'
};
SplitText SplitLines(std::string_view text);
// The first line of `text` that is not blank, trimmed ("" when there is none); for Detect().
std::string_view FirstNonBlankLine(std::string_view text);
// Reads `lines` up to its first non-blank line, into *line. The reader's error, or, when there is
// no such line, an error naming `file` that says it is not `what` ("an mpiP report").
Status ReadFirstLine(LineReader* lines, const std::string& file, std::string_view what, Line* line);

// Whitespace (space, tab) separated fields of `s`.
std::vector<std::string_view> Fields(std::string_view s);
std::string_view Trim(std::string_view s);
// `s` with every run of spaces and tabs replaced by one space, trimmed.
std::string CollapseSpaces(std::string_view s);
// The file name after the last '/'.
std::string_view BaseName(std::string_view path);
using engine::AllDigits;  // engine/util/parse_number.h
// A rule of at least three dashes and nothing else (the profiles' table and section borders).
bool IsDashRule(std::string_view s);
// Does `s` start like an identifier (an MPI routine name such as "MPI_Bcast" or "Allreduce")?
bool IsName(std::string_view s);

// A decimal integer that is the whole of `s` (an optional leading '-').
bool ParseInt(std::string_view s, int64_t* out);
// A finite number in printf's %d, %f, %e or %g form that is the whole of `s`.
bool ParseNumber(std::string_view s, double* out);
// A non-negative finite number times `scale`, rounded to an integer that fits an int64
// (e.g. seconds × 1e9 = ns). False when negative, not finite or out of range.
bool ScaleToInt(double value, double scale, int64_t* out);

// Binds `v` to parameter `i` of `st`, or NULL when unset.
void BindOptional(engine::Stmt& st, int i, const std::optional<int64_t>& v);
void BindOptional(engine::Stmt& st, int i, const std::optional<double>& v);
void BindOptional(engine::Stmt& st, int i, const std::optional<std::string>& v);

// The skipped lines of one input, and the warnings that describe the first few.
class ProblemLog {
 public:
  explicit ProblemLog(std::string path) : path_(std::move(path)) {}
  // One malformed line, skipped: counted, and described when among the first few.
  void Skip(uint32_t line, std::string_view reason);
  // A warning that is not a skipped line (e.g. a truncated tail); always reported.
  void Warn(std::string_view message);
  uint64_t skipped() const { return skipped_; }
  const std::string& path() const { return path_; }
  // Appends the warnings to `result->warnings` (with one line that counts the lines not
  // described) and adds the count to `result->skipped`.
  void MoveTo(ImportResult* result);

 private:
  std::string path_;
  uint64_t skipped_ = 0;
  std::vector<std::string> line_warnings_;
  std::vector<std::string> other_warnings_;
};

// One row of rank_times. Unset fields stay NULL (or keep the value already stored).
struct RankTimes {
  int32_t rank = 0;
  std::optional<std::string> host;
  std::optional<int64_t> comm_ns;
  std::optional<int64_t> elapsed_ns;
  std::optional<int64_t> user_ns;
  std::optional<int64_t> system_ns;
  std::optional<int64_t> maxrss_bytes;
};

// How a rank_times row meets a row already stored for the same rank.
enum class Merge {
  kOverwrite,    // the new values win where set (a rank's own, more precise, figures)
  kFillMissing,  // the stored values win; the new ones fill NULLs (a summary table's figures)
};
// The host is taken from whichever row has one, the new row first. REQUIRES: rank_times is a
// table (engine::EnsureTable(db, "rank_times") once before the rows: a new database has an
// empty view in its place).
Status UpsertRankTimes(engine::Db* db, const RankTimes& row, std::string_view source, Merge merge);

// Adds or completes the ranks row of `rank` for a profile without a timeline
// (clock_method "none"). A row that already exists (e.g. from a recorded run) keeps its clock
// fields and source; only a missing host or world size is filled in.
Status UpsertRank(engine::Db* db, int32_t rank, const std::optional<std::string>& host,
                  int32_t world_size, std::string_view source);

// Writes (or replaces) the sources row of an imported file.
struct SourceRow {
  std::string path;
  std::string format;
  std::optional<int32_t> rank;
  std::optional<int64_t> pid;
  uint64_t offset = 0;  // bytes of complete lines taken
  uint64_t size = 0;    // the file's size on disk
  uint64_t events = 0;  // table rows written
};
Status WriteSource(engine::Db* db, const SourceRow& row);

// Adds the counters of an import to stats: import_skipped, import_truncated and
// import_sections_skipped (each only when not zero).
void AddImportStats(engine::TraceWriter* writer, int32_t rank, uint64_t skipped, bool truncated,
                    uint64_t sections_skipped);

}  // namespace tracedb::query::text_profile
