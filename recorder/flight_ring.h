// FlightRing: flight-recorder mode's memory (TRACEDB_FLIGHT, docs/flight.md). The flusher encodes
// and compresses EVENTS blocks as always, but keeps them here instead of writing them: the last
// DURATION of them (by the time they were drained), dropping older ones. A trigger writes the
// ring out. The blocks are LZ4-compressed columns, so the ring costs a few bytes per event.
// Thread safety: owned by the flusher thread.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

namespace tracedb::recorder {

class FlightRing {
 public:
  struct Block {
    int64_t drained_ns = 0;  // recorder clock: when the flusher drained it
    uint64_t events = 0;
    std::string payload;  // an EVENTS block payload, ready to append
  };

  explicit FlightRing(int64_t window_ns = 0) : window_ns_(window_ns) {}
  bool enabled() const { return window_ns_ > 0; }
  int64_t window_ns() const { return window_ns_; }

  // Keeps `payload` (moved from), then forgets blocks drained before now - window.
  void Push(int64_t now_ns, uint64_t events, std::string* payload);
  // Hands every kept block, oldest first, to `out` and empties the ring.
  template <class F>
  void TakeAll(F&& out) {
    for (Block& b : blocks_) out(b);
    blocks_.clear();
    bytes_ = 0;
  }
  size_t bytes() const { return bytes_; }
  uint64_t forgotten_events() const { return forgotten_events_; }

 private:
  int64_t window_ns_;
  std::deque<Block> blocks_;
  size_t bytes_ = 0;
  uint64_t forgotten_events_ = 0;  // aged out of the ring, never written
};

// Parses a duration: "30s", "500ms", "2m", "1h", or a plain number of seconds. Returns ns, or
// -1 when `text` is not one (or is not positive).
int64_t ParseDurationNs(const char* text);

}  // namespace tracedb::recorder
