// OrderedStream: feeds events that arrive already in their per-track order (Horovod and Bluefog
// timelines, written by one thread from a queue: begin/end pairs in file order) straight to a
// TraceBuilder, so that such files stream with constant memory. It keeps, per track, the names
// of the spans still open, which gives the innermost open span (Horovod's rank ticks are only
// ticks inside NEGOTIATE_*) and the count of ends without a begin and begins never ended.
// Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/status.h"
#include "engine/trace_builder.h"
#include "engine/trace_writer.h"

namespace tracedb::query {

class OrderedStream {
 public:
  explicit OrderedStream(engine::TraceWriter* writer) : builder_(writer) {}

  // ts and dur in ns; `json` is a JSON object text or empty.
  Status Begin(uint32_t track, int64_t ts, uint32_t name, std::string_view json = {});
  // Closes the innermost open span of `track` (its JSON merged in); an end with nothing open is
  // counted as unmatched and dropped.
  Status End(uint32_t track, int64_t ts, std::string_view json = {});
  Status Complete(uint32_t track, int64_t ts, int64_t dur, uint32_t name,
                  std::string_view json = {});
  Status Instant(uint32_t track, int64_t ts, uint32_t name, const engine::EventArgs* args);

  // The name of the innermost open span of `track`, or 0.
  uint32_t Innermost(uint32_t track) const {
    return track < open_.size() && !open_[track].empty() ? open_[track].back() : 0;
  }

  uint64_t rows() const { return rows_; }
  // Ends without a begin, plus the spans still open (never ended: their end is lost).
  uint64_t unmatched() const;

 private:
  std::vector<uint32_t>& Open(uint32_t track) {
    if (track >= open_.size()) open_.resize(track + 1);
    return open_[track];
  }

  engine::TraceBuilder builder_;
  std::vector<std::vector<uint32_t>> open_;  // per track id: names of the open spans
  uint64_t rows_ = 0;
  uint64_t unmatched_ends_ = 0;
};

}  // namespace tracedb::query
