// Clock calibration. See clock.h.
#include "recorder/clock.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "engine/util/parse_number.h"

namespace tracedb::recorder {

ClockState g_clock;
std::atomic<bool> g_clock_ready{false};

namespace {

bool CpuHasInvariantTsc() {
#if defined(__aarch64__)
  return true;  // the generic timer runs at a constant rate (ARMv8 requires it)
#elif !defined(__x86_64__)
  return false;
#endif
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return false;
  char line[4096];
  bool constant = false, nonstop = false;
  while (std::fgets(line, sizeof(line), f)) {
    if (std::strncmp(line, "flags", 5) != 0) continue;
    constant = std::strstr(line, " constant_tsc") != nullptr;
    nonstop = std::strstr(line, " nonstop_tsc") != nullptr;
    break;
  }
  std::fclose(f);
  return constant && nonstop;
}

// One (tsc, monotonic ns) pair from the narrowest of several bracketing reads.
void SamplePair(uint64_t* tsc, int64_t* ns) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 16; ++i) {
    const uint64_t t1 = ReadCounter();
    const int64_t m = MonotonicNs();
    const uint64_t t2 = ReadCounter();
    if (t2 - t1 < best) {
      best = t2 - t1;
      *tsc = t1 + (t2 - t1) / 2;
      *ns = m;
    }
  }
}

void Calibrate() {
  const char* env = std::getenv("TRACEDB_CLOCK");
  const bool want_tsc = env == nullptr || std::strcmp(env, "monotonic") != 0;
  if (!kHaveCounter || !want_tsc || !CpuHasInvariantTsc()) return;
  uint64_t t0, t1;
  int64_t n0, n1;
  SamplePair(&t0, &n0);
  timespec wait = {0, 10 * 1000 * 1000};  // 10 ms: rate error ~ a few ppm
  while (nanosleep(&wait, &wait) != 0) {
  }
  SamplePair(&t1, &n1);
  if (t1 <= t0 || n1 <= n0) return;
  double hz = static_cast<double>(t1 - t0) * 1e9 / static_cast<double>(n1 - n0);
#if defined(__aarch64__)
  uint64_t freq;
  asm volatile("mrs %0, cntfrq_el0" : "=r"(freq));
  // The architected frequency is exact where firmware set it; the measurement is the fallback.
  if (freq >= 1000000 && std::abs(static_cast<double>(freq) - hz) < 0.01 * hz) {
    hz = static_cast<double>(freq);
  }
  if (hz < 1e6 || hz > 1e11) return;  // implausible: keep CLOCK_MONOTONIC
#else
  if (hz < 1e8 || hz > 1e11) return;  // implausible: keep CLOCK_MONOTONIC
#endif
  ClockState c;
  c.use_tsc = true;
  c.tsc0 = t1;
  c.ns0 = n1;
  c.tsc_hz = static_cast<uint64_t>(hz);
  c.mult = static_cast<uint64_t>(1e9 * 4294967296.0 / hz);
  g_clock = c;
}

}  // namespace

void InitClock() noexcept {
  if (g_clock_ready.load(std::memory_order_acquire)) return;
  static std::once_flag once;
  std::call_once(once, [] {
    Calibrate();
    // Simulates a host whose realtime clock is off (as NTP leaves hosts a few ms apart), so
    // that tests on one machine can check alignment by MPI clock sync.
    if (const char* v = std::getenv("TRACEDB_REALTIME_OFFSET_NS"); v != nullptr && *v) {
      int64_t offset = 0;  // not a whole number: no offset (engine/util/parse_number.h's policy)
      if (engine::ParseInt64(v, &offset)) g_clock.realtime_offset_ns = offset;
    }
    g_clock_ready.store(true, std::memory_order_release);
  });
}

engine::AnchorPoint ReadAnchor() noexcept {
  engine::AnchorPoint best;
  int64_t best_width = INT64_MAX;
  for (int i = 0; i < 8; ++i) {
    timespec a, b;
    clock_gettime(CLOCK_REALTIME, &a);
    const int64_t c = NowNs();
    clock_gettime(CLOCK_REALTIME, &b);
    const int64_t ra = static_cast<int64_t>(a.tv_sec) * 1000000000 + a.tv_nsec;
    const int64_t rb = static_cast<int64_t>(b.tv_sec) * 1000000000 + b.tv_nsec;
    if (rb - ra < best_width) {
      best_width = rb - ra;
      best.realtime_ns = ra + (rb - ra) / 2 + g_clock.realtime_offset_ns;
      best.clock_ns = c;
      best.uncertainty_ns = (rb - ra) / 2 + 1;
    }
  }
  return best;
}

}  // namespace tracedb::recorder
