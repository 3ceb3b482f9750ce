// GpuClockMap: maps GPU timestamps (the globaltimer that NCCL's kernel-channel events and CUPTI
// read) onto the recorder's clock (tracedb_now), from pairs observed by the host.
//
// A host thread that sees a GPU timestamp g at host time h knows that the GPU event happened no
// later than h, so the true offset (host - gpu) is at most h - g. The map keeps the smallest
// h - g seen: the tightest bound, which converges to the true offset plus the shortest observation
// delay (the same min-delay rule as a clock-sync ping-pong). docs/gpu-capture.md "Clocks".
// Thread safety: Observe and Map may be called from any thread at once (one relaxed atomic).
#pragma once

#include <atomic>
#include <cstdint>

namespace tracedb::gpu {

class GpuClockMap {
 public:
  // Records that GPU time `gpu_ns` was observed (had already happened) at host time `host_ns`.
  void Observe(int64_t host_ns, int64_t gpu_ns) noexcept {
    const int64_t offset = host_ns - gpu_ns;
    int64_t cur = offset_.load(std::memory_order_relaxed);
    while (offset < cur && !offset_.compare_exchange_weak(cur, offset, std::memory_order_relaxed)) {
    }
  }
  // True once at least one pair was observed.
  bool calibrated() const noexcept { return offset_.load(std::memory_order_relaxed) != kNone; }
  // Host - GPU offset in ns (kNone before any observation).
  int64_t offset() const noexcept { return offset_.load(std::memory_order_relaxed); }
  // `gpu_ns` on the host clock; `fallback` when not calibrated.
  int64_t Map(int64_t gpu_ns, int64_t fallback) const noexcept {
    const int64_t o = offset_.load(std::memory_order_relaxed);
    return o == kNone ? fallback : gpu_ns + o;
  }

  static constexpr int64_t kNone = INT64_MAX;

 private:
  std::atomic<int64_t> offset_{kNone};
};

}  // namespace tracedb::gpu
