// FlightRing implementation. See flight_ring.h.
#include "recorder/flight_ring.h"

#include <cstdlib>
#include <cstring>

namespace tracedb::recorder {

void FlightRing::Push(int64_t now_ns, uint64_t events, std::string* payload) {
  Block& b = blocks_.emplace_back();
  b.drained_ns = now_ns;
  b.events = events;
  b.payload.swap(*payload);
  bytes_ += b.payload.size();
  while (!blocks_.empty() && blocks_.front().drained_ns < now_ns - window_ns_) {
    bytes_ -= blocks_.front().payload.size();
    forgotten_events_ += blocks_.front().events;
    blocks_.pop_front();
  }
}

int64_t ParseDurationNs(const char* text) {
  if (text == nullptr || *text == '\0') return -1;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || !(v > 0) || v > 1e7) return -1;
  double scale = 1e9;  // seconds
  if (std::strcmp(end, "") == 0 || std::strcmp(end, "s") == 0) {
    scale = 1e9;
  } else if (std::strcmp(end, "ms") == 0) {
    scale = 1e6;
  } else if (std::strcmp(end, "m") == 0 || std::strcmp(end, "min") == 0) {
    scale = 60e9;
  } else if (std::strcmp(end, "h") == 0) {
    scale = 3600e9;
  } else {
    return -1;
  }
  const double ns = v * scale;
  return ns >= 1 && ns < 9e18 ? static_cast<int64_t>(ns) : -1;
}

}  // namespace tracedb::recorder
