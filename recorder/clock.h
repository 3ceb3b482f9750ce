// The recorder's clock: nanoseconds on a monotonic time base, read on the hot path.
//
// The counter is chosen at build time: on x86-64, rdtsc when the CPU has an invariant TSC (flags
// constant_tsc and nonstop_tsc); on aarch64, the generic timer's virtual count (cntvct_el0, whose
// frequency cntfrq_el0 gives); elsewhere none. The counter is scaled by a fixed-point factor
// calibrated once per process against CLOCK_MONOTONIC; without a usable counter the clock is
// clock_gettime(CLOCK_MONOTONIC). TRACEDB_CLOCK=monotonic forces the latter. The residual
// calibration error is a constant rate error, removed at compaction by the per-segment
// (realtime, clock) anchors and the MPI clock-sync points (docs/segment-format.md, "Clocks").
// Thread safety: InitClock() is idempotent and thread-safe; NowNs() from any thread at any time:
// the first reading of a thread that finds the clock not yet published calibrates it (or waits
// for the calibration), and the state is published with a release store that every reader
// acquires, so no thread reads a half-written calibration.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "engine/segment/segment_format.h"

namespace tracedb::recorder {

struct ClockState {
  bool use_tsc = false;
  uint64_t tsc0 = 0;  // TSC at calibration
  int64_t ns0 = 0;    // CLOCK_MONOTONIC at calibration, ns
  uint64_t mult = 0;  // ns per tick, 32.32 fixed point
  uint64_t tsc_hz = 0;
  int64_t realtime_offset_ns = 0;  // TRACEDB_REALTIME_OFFSET_NS: pretend realtime is off by this
};
extern ClockState g_clock;               // written once, before g_clock_ready
extern std::atomic<bool> g_clock_ready;  // release-stored after g_clock is final

void InitClock() noexcept;

// True when this build has a cycle counter that NowNs() can read.
inline constexpr bool kHaveCounter =
#if defined(__x86_64__) || defined(__aarch64__)
    true;
#else
    false;
#endif

inline uint64_t ReadCounter() noexcept {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return 0;
#endif
}

inline int64_t MonotonicNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int64_t NowNs() noexcept {
  if (__builtin_expect(!g_clock_ready.load(std::memory_order_acquire), 0)) InitClock();
  if (kHaveCounter && g_clock.use_tsc) {
    const int64_t d = static_cast<int64_t>(ReadCounter() - g_clock.tsc0);
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
