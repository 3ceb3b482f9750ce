// OrderedStream: feeds events that arrive already in their per-track order (Horovod and Bluefog
// timelines, written by one thread from a queue: begin/end pairs in file order) straight to the
// database through a BuilderPipe, so that such files stream with constant memory while parsing
// and writing run on two cores. It keeps, per track, the names of the spans still open, which
// gives the innermost open span (Horovod's rank ticks are only ticks inside NEGOTIATE_*) and the
// count of ends without a begin and begins never ended.
// Thread safety: one thread at a time (the pipe's writer thread aside; see builder_pipe.h).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/db/trace_writer.h"
#include "engine/util/status.h"
#include "query/import/builder_pipe.h"

namespace tracedb::query {

class OrderedStream {
 public:
  // REQUIRES: nothing else uses `writer` until Finish().
  explicit OrderedStream(engine::TraceWriter* writer) : pipe_(writer) {}

  // Local ids of names and tracks (see BuilderPipe).
  uint32_t Name(std::string_view s) { return pipe_.Name(s); }
  uint32_t Track(const engine::TrackSpec& spec) { return pipe_.Track(spec); }

  // ts and dur in ns; `json` is a JSON object text or empty.
  void Begin(uint32_t track, int64_t ts, uint32_t name, std::string_view json = {});
  // Closes the innermost open span of `track` (its JSON merged in); an end with nothing open is
  // counted as unmatched and dropped.
  void End(uint32_t track, int64_t ts, std::string_view json = {});
  void Complete(uint32_t track, int64_t ts, int64_t dur, uint32_t name, std::string_view json = {});
  void Instant(uint32_t track, int64_t ts, uint32_t name, const engine::EventArgs* args);

  // The name of the innermost open span of `track`, or 0.
  uint32_t Innermost(uint32_t track) const {
    return track < open_.size() && !open_[track].empty() ? open_[track].back() : 0;
  }

  // Waits until everything is written; the writer's first error.
  Status Finish() { return pipe_.Finish(); }

  uint64_t rows() const { return rows_; }
  int64_t min_ts() const { return pipe_.min_ts(); }
  int64_t max_end() const { return pipe_.max_end(); }
  // Ends without a begin, plus the spans still open (never ended: their end is lost).
  uint64_t unmatched() const;

 private:
  std::vector<uint32_t>& Open(uint32_t track) {
    if (track >= open_.size()) open_.resize(track + 1);
    return open_[track];
  }

  BuilderPipe pipe_;
  std::vector<std::vector<uint32_t>> open_;  // per local track: names of the open spans
  uint64_t rows_ = 0;
  uint64_t unmatched_ends_ = 0;
};

}  // namespace tracedb::query
