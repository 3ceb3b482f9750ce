// The recorder's clock: nanoseconds on a monotonic time base, read on the hot path.
//
// With an invariant TSC (CPU flags constant_tsc and nonstop_tsc) the clock is rdtsc scaled by a
// fixed-point factor calibrated once per process against CLOCK_MONOTONIC; else it is
// clock_gettime(CLOCK_MONOTONIC). TRACEDB_CLOCK=monotonic forces the latter. The residual
// calibration error is a constant rate error, removed at compaction by the per-segment
// (realtime, clock) anchors and the MPI clock-sync points (docs/segment-format.md, "Clocks").
// Thread safety: InitClock() once (it is idempotent and thread-safe); NowNs() from any thread.
#pragma once

#include <time.h>
#include <x86intrin.h>

#include <cstdint>

#include "engine/segment_format.h"

namespace tracedb::recorder {

struct ClockState {
  bool use_tsc = false;
  uint64_t tsc0 = 0;  // TSC at calibration
  int64_t ns0 = 0;    // CLOCK_MONOTONIC at calibration, ns
  uint64_t mult = 0;  // ns per tick, 32.32 fixed point
  uint64_t tsc_hz = 0;
  int64_t realtime_offset_ns = 0;  // TRACEDB_REALTIME_OFFSET_NS: pretend realtime is off by this
};
extern ClockState g_clock;

void InitClock() noexcept;

inline int64_t MonotonicNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int64_t NowNs() noexcept {
  if (g_clock.use_tsc) {
    const int64_t d = static_cast<int64_t>(__rdtsc() - g_clock.tsc0);
    return g_clock.ns0 + static_cast<int64_t>((static_cast<__int128>(d) * g_clock.mult) >> 32);
  }
  return MonotonicNs();
}

inline engine::ClockKind CurrentClockKind() noexcept {
  return g_clock.use_tsc ? engine::ClockKind::kTsc : engine::ClockKind::kMonotonic;
}

// Reads CLOCK_REALTIME and NowNs() as close together as possible: the pair of the tightest of
// a few tries, with half its width as the uncertainty.
engine::AnchorPoint ReadAnchor() noexcept;

}  // namespace tracedb::recorder
