// BuilderPipe: runs an engine::TraceBuilder (and the TraceWriter behind it: block encoding, LZ4,
// SQLite) on a thread of its own, fed by the importer's parsing thread through a bounded queue
// of command batches, so that parsing and writing use two cores.
//
// The parsing thread never touches the TraceWriter: names and tracks get local ids here, defined
// to the writer by the pipe's thread when it reaches them. Memory is bounded: at most
// kMaxBatchesInFlight batches of kBatchCommands commands are queued; the producer waits when the
// writer falls behind. The thread starts with the first full batch; an input that fits in one
// batch is written by Finish() on the caller's thread.
//
// Thread safety: the producer methods (Name, Track, Begin, …, Finish) are for one thread; the
// writer must not be used by anyone else between construction and Finish() (or destruction).
// Errors of the writer surface from Finish().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/db/event_block.h"
#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "engine/util/hash.h"
#include "engine/util/status.h"

namespace tracedb::query {

class BuilderPipe {
 public:
  static constexpr size_t kBatchCommands = 8192;
  static constexpr size_t kFirstBatchCommands = 256;
  static constexpr size_t kMaxBatchesInFlight = 16;

  explicit BuilderPipe(engine::TraceWriter* writer);
  ~BuilderPipe();  // Finish()es if not done (its status is then lost)
  BuilderPipe(const BuilderPipe&) = delete;
  BuilderPipe& operator=(const BuilderPipe&) = delete;

  // A local id for string `s` (names and categories), stable for the pipe's life. Never 0.
  uint32_t Name(std::string_view s);
  // A category id: 0 for none.
  uint32_t Cat(std::string_view s) { return s.empty() ? 0 : Name(s); }
  // A local id for a track (the writer finds or creates it; see TraceWriter::Track).
  uint32_t Track(const engine::TrackSpec& spec);

  // As TraceBuilder's, with local ids; ts and dur in ns. `args` may be null.
  void Begin(uint32_t track, int64_t ts, uint32_t name, uint32_t cat, const engine::EventArgs* args,
             std::string_view json);
  void End(uint32_t track, int64_t ts, const engine::EventArgs* args, std::string_view json);
  void Complete(uint32_t track, int64_t ts, int64_t dur, uint32_t name, uint32_t cat,
                const engine::EventArgs* args, std::string_view json);
  void Instant(uint32_t track, int64_t ts, uint32_t name, uint32_t cat,
               const engine::EventArgs* args, std::string_view json,
               engine::RowKind kind = engine::RowKind::kInstant);
  void Counter(uint32_t track, int64_t ts, uint32_t name, uint32_t cat, double value);

  // The earliest ts and the latest end (ts + dur) of everything sent so far; min_ts() > max_end()
  // when nothing was sent.
  int64_t min_ts() const { return min_ts_; }
  int64_t max_end() const { return max_end_; }

  // Sends what is buffered, waits until the writer has taken everything, and stops the thread.
  // Returns the first error of the writer or builder. After it, the writer is the caller's again.
  Status Finish();

 private:
  void See(int64_t ts, int64_t end) {
    if (ts < min_ts_) min_ts_ = ts;
    if (end > max_end_) max_end_ = end;
  }
  int64_t min_ts_ = INT64_MAX;
  int64_t max_end_ = INT64_MIN;
  enum class Op : uint8_t { kName, kTrack, kBegin, kEnd, kComplete, kInstant, kCounter };
  struct Cmd {
    Op op;
    engine::RowKind kind;
    bool has_args;
    uint32_t track, name, cat;
    int64_t ts, dur;
    double value;
    engine::EventArgs args;
    uint32_t text_off, text_len;  // JSON args, or the string of kName; kTrack: index in tracks
  };
  struct Batch {
    std::vector<Cmd> cmds;
    std::string text;
    std::vector<engine::TrackSpec> tracks;
  };

  Cmd& Add(Op op, std::string_view text);
  void Send();  // hands the current batch to the writer thread
  void Run();   // the writer thread
  Status Apply(const Batch& b);

  engine::TraceWriter* w_;
  std::unordered_map<std::string, uint32_t, engine::StringViewHash, std::equal_to<>> names_;
  uint32_t next_track_ = 1;
  std::unique_ptr<Batch> cur_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Batch>> full_;   // guarded by mu_
  std::vector<std::unique_ptr<Batch>> free_;  // guarded by mu_
  bool closing_ = false;                      // guarded by mu_
  Status status_;                             // the writer thread's first error; guarded by mu_
  std::thread thread_;
  bool finished_ = false;

  // The writer thread's (or, without one, Finish()'s): local id -> writer id.
  std::vector<uint32_t> name_ids_{0};
  std::vector<uint32_t> track_ids_{0};
  std::unique_ptr<engine::TraceBuilder> builder_;
};

}  // namespace tracedb::query
