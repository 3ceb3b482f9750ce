// EventReader: a streaming reader of Chrome trace-event JSON (the array form `[{…},…]` and the
// object form `{"traceEvents": […], …}`) that yields one event at a time with bounded memory.
//
// It reads the input (plain or gzip, see byte_source.h) in chunks into one buffer that holds at
// most the current record plus a chunk; nothing is ever read whole. Each event's fields are
// parsed in place: strings without escapes are views into the buffer, `ts`/`dur` are converted
// from decimal microseconds to integer nanoseconds exactly, and `args` is kept as its raw JSON
// text for the importer to look into. The object form's other top-level members
// (displayTimeUnit, otherData, distributedInfo, baseTimeNanoseconds, …) are kept as raw text.
//
// Tolerated, as trace writers produce them: an array never closed, trailing commas, a truncated
// last record (every complete record is returned; the cut bytes are counted), any whitespace,
// raw control characters inside strings, \uXXXX escapes with surrogate pairs. A malformed
// record is skipped and counted: reading resumes at the next `{` that starts a record at the
// event-array level (one that follows `,`, `[`, `}` or a line break), and the first few errors
// are kept as "FILE: byte offset N: reason". Input that cannot be read (missing, damaged gzip,
// not JSON at all) is an error naming the file and the offset. Offsets count decompressed bytes.
// Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/util/status.h"
#include "query/import/json/byte_source.h"

namespace tracedb::query::json {

// A pid, tid or id as written: an integer, or a string (kept as given, "0x1f" included).
struct JsonId {
  enum class Type : uint8_t { kNone, kInt, kString };
  Type type = Type::kNone;
  int64_t num = 0;        // kInt
  std::string_view text;  // kString: the decoded string; kInt: the digits; other values: raw text
  bool present() const { return type != Type::kNone; }
  bool is_int() const { return type == Type::kInt; }
};

// One event. Views stay valid until the next call of EventReader::Next().
struct TraceEvent {
  uint64_t offset = 0;  // decompressed byte offset of the record's '{'
  uint64_t size = 0;    // bytes of the record, '{' to '}'
  std::string_view ph;  // the phase, usually one character
  std::string_view name, cat;
  bool has_name = false;
  JsonId pid, tid;
  bool has_ts = false, has_dur = false;
  int64_t ts = 0;          // ns (the file's µs × 1000, fractional digits kept)
  int64_t dur = 0;         // ns
  std::string_view scope;  // "s" of instants: "g", "p" or "t"
  JsonId id;               // "id" (or the raw text of "id2")
  JsonId bind_id;          // "bind_id"
  std::string_view bp;     // flow binding point ("e" for enclosing slice)
  std::string_view args;   // raw JSON text of "args"; empty when absent

  char phase() const { return ph.size() == 1 ? ph[0] : '\0'; }
  // Back to the default state, field by field (cheaper per record than assigning TraceEvent()).
  void Clear() {
    ph = name = cat = scope = bp = args = {};
    has_name = has_ts = has_dur = false;
    ts = dur = 0;
    pid = tid = id = bind_id = JsonId();
  }
};

struct ReaderOptions {
  size_t chunk_bytes = 1 << 20;         // bytes read at a time
  size_t max_record_bytes = 64u << 20;  // a record (or top-level member) larger is malformed
  size_t max_reported_errors = 5;       // errors() keeps this many
  // Records of a plain event array are parsed on this many threads (1: the calling thread only):
  // a window of `parallel_window_bytes` is cut at record starts (SplitElements, array_split.h),
  // its parts are parsed at once, and Next() hands their events out in file order. A part that
  // meets anything but well-formed records stops there and the serial reader takes over, so the
  // events, skips and errors are those of a serial reading. Used only when at least
  // `parallel_min_bytes` are buffered.
  size_t threads = 0;  // 0: $TRACEDB_IMPORT_THREADS, else cores - 1 when over 2 cores, else 1
  size_t parallel_window_bytes = 2u << 20;
  size_t parallel_min_bytes = 1u << 20;
};

class EventReader {
 public:
  using Options = ReaderOptions;
  enum class Form : uint8_t { kUnknown, kArray, kObject };

  static StatusOr<std::unique_ptr<EventReader>> Open(const std::string& path, Options options);
  static StatusOr<std::unique_ptr<EventReader>> Open(const std::string& path) {
    return Open(path, Options());
  }
  explicit EventReader(std::unique_ptr<ByteSource> source, Options options = Options());

  // The next event into *ev: true, or false when the events are over (the rest of the input,
  // e.g. members after traceEvents, has then been read too). An error when the input cannot be
  // read or is not JSON.
  StatusOr<bool> Next(TraceEvent* ev);

  Form form() const { return form_; }
  // Top-level members of the object form other than traceEvents, in file order (raw JSON).
  // Members after the event array are known once Next() returned false.
  const std::vector<std::pair<std::string, std::string>>& members() const { return members_; }
  std::optional<std::string_view> Member(std::string_view key) const;

  uint64_t skipped() const { return skipped_; }                       // malformed records skipped
  uint64_t truncated_bytes() const { return truncated_bytes_; }       // bytes of a cut tail
  const std::vector<std::string>& errors() const { return errors_; }  // the first few skips
  // Decompressed bytes consumed, and on-disk bytes read (for progress).
  uint64_t offset() const { return base_ + static_cast<uint64_t>(pos_); }
  const ByteSource& source() const { return *source_; }

 private:
  enum class State : uint8_t { kStart, kMembers, kEvents, kDone };

  // Makes room and reads more input, keeping the bytes from `keep_from` on (which move to the
  // front of the buffer). False at the end of the input.
  StatusOr<bool> Fill(size_t keep_from);
  // Parses the top level of the object form until the event array starts or the input ends.
  Status ReadMembers();
  // Records a skipped record at decompressed offset `at` and finds where to resume.
  Status SkipBad(uint64_t at, std::string_view reason);
  void Report(uint64_t at, std::string_view reason);
  // Parses the buffered records from pos_ on in parallel into ready_ (see ReaderOptions::threads).
  void ParseAhead();

  std::unique_ptr<ByteSource> source_;
  Options options_;
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0;
  size_t pos_ = 0;     // next unconsumed byte
  size_t end_ = 0;     // bytes filled
  uint64_t base_ = 0;  // decompressed offset of buf_[0]
  bool eof_ = false;
  bool saw_events_ = false;
  State state_ = State::kStart;
  Form form_ = Form::kUnknown;
  std::vector<std::pair<std::string, std::string>> members_;
  uint64_t skipped_ = 0;
  uint64_t truncated_bytes_ = 0;
  std::vector<std::string> errors_;
  static constexpr int kScratchSlots = 10;
  std::string scratch_[kScratchSlots];  // decoded strings of the current event, one per field
  // Parsed ahead (views into buf_, which is not refilled until they are handed out, or into
  // arena_), with the buffer index after each record.
  std::vector<std::pair<TraceEvent, size_t>> ready_;
  size_t ready_next_ = 0;
  std::vector<std::deque<std::string>> arena_;  // decoded strings of ready_, per part
  uint64_t serial_until_ = 0;  // no parse-ahead before this offset (it found too little)
};

}  // namespace tracedb::query::json
