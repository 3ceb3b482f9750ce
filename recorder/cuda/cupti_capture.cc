// libtracedb_cuda.so: CUDA activity capture through CUPTI, with no code change. Loaded by the
// CUDA driver through CUDA_INJECTION64_PATH (which calls InitializeInjection), or with LD_PRELOAD
// and TRACEDB_CUDA=1 (a constructor starts it); `tracedb record --cuda` sets both up
// (recorder/cuda/record_env.h). It enables kernel (concurrent), memcpy, memset, synchronization,
// runtime and driver API activity, registers the recorder's clock as CUPTI's timestamp source (so
// GPU records arrive on tracedb's clock; without that call, a calibrated offset), and hands CUPTI
// bounded buffers: TRACEDB_CUDA_BUFFER_MB in all (default 128), 4 MB each. When none is free CUPTI
// drops records; CUPTI's dropped-record counts are summed and recorded at exit as the counter
// "cuda.dropped_records". docs/gpu-capture.md "CUDA activity".
// Thread safety: CUPTI calls the buffer callbacks from its own threads; the buffer pool takes a
// mutex (never on the application's launch path: CUPTI requests buffers ahead), and records are
// emitted under the same mutex by whichever thread completes a buffer.
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "recorder/cuda/cupti_translate.h"
#include "tracedb/recorder.h"

namespace tracedb::cuda {
namespace {

constexpr size_t kBufferBytes = 4u << 20;  // CUPTI suggests 1 to 10 MB

struct Capture {
  std::mutex mu;
  std::vector<uint8_t*> free_buffers;
  size_t buffers_made = 0;
  size_t max_buffers = 32;
  uint64_t dropped_records = 0;
  uint64_t refused_buffers = 0;
  int64_t clock_offset = 0;  // added to CUPTI timestamps (0 with the timestamp callback)
  GpuEmitter* emitter = nullptr;
  bool started = false;
};

Capture* g = nullptr;

const char* ApiName(GpuKind kind, uint32_t cbid) {
  // cuptiGetCallbackName gives "cudaLaunchKernel_v7000": the version suffix is dropped (interned
  // once per cbid through the emitter's name map).
  thread_local std::string name;
  const char* raw = nullptr;
  const CUpti_CallbackDomain domain =
      kind == GpuKind::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
  if (cuptiGetCallbackName(domain, cbid, &raw) != CUPTI_SUCCESS || raw == nullptr) return nullptr;
  name = raw;
  const size_t v = name.rfind("_v");
  if (v != std::string::npos && v + 2 < name.size() &&
      name.find_first_not_of("0123456789", v + 2) == std::string::npos) {
    name.resize(v);
  }
  return name.c_str();
}

uint64_t RecorderClock() { return static_cast<uint64_t>(tracedb_now()); }

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  if (g == nullptr) return;
  std::lock_guard<std::mutex> lock(g->mu);
  if (!g->free_buffers.empty()) {
    *buffer = g->free_buffers.back();
    g->free_buffers.pop_back();
  } else if (g->buffers_made < g->max_buffers) {
    void* p = nullptr;
    if (posix_memalign(&p, 8, kBufferBytes) == 0) {
      *buffer = static_cast<uint8_t*>(p);
      ++g->buffers_made;
    }
  }
  if (*buffer == nullptr) {
    ++g->refused_buffers;  // CUPTI drops records until a buffer comes back, and counts them
    return;
  }
  *size = kBufferBytes;
}

void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size,
                              size_t valid) {
  if (g == nullptr || buffer == nullptr) return;
  std::lock_guard<std::mutex> lock(g->mu);
  CUpti_Activity* rec = nullptr;
  GpuRecord r;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (Translate(rec, g->clock_offset, &r)) g->emitter->Emit(r);
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) {
    g->dropped_records += dropped;
  }
  g->free_buffers.push_back(buffer);
}

// CUPTI's clock minus the recorder's, from the tightest of 16 bracketing reads.
int64_t CalibrateOffset() {
  int64_t best_width = INT64_MAX;
  int64_t offset = 0;
  for (int i = 0; i < 16; ++i) {
    uint64_t cupti = 0;
    const int64_t a = tracedb_now();
    if (cuptiGetTimestamp(&cupti) != CUPTI_SUCCESS) return 0;
    const int64_t b = tracedb_now();
    if (b - a < best_width) {
      best_width = b - a;
      offset = a + (b - a) / 2 - static_cast<int64_t>(cupti);
    }
  }
  return offset;
}

void Warn(const char* what, CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  fprintf(stderr, "tracedb cuda: %s failed: %s; CUDA activity is not recorded\n", what,
          s != nullptr ? s : "unknown error");
}

void FlushAtExit() {
  if (g == nullptr || !g->started) return;
  cuptiActivityFlushAll(1);
  uint64_t dropped;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    dropped = g->dropped_records;
  }
  tracedb_counter_ex(tracedb_intern("cuda.dropped_records"), TRACEDB_CAT_CUDA, 0,
                     static_cast<double>(dropped));
}

// Starts the capture once. Returns 1 when CUPTI accepted it.
int Start() {
  static std::once_flag once;
  static int ok = 0;
  std::call_once(once, [] {
    g = new Capture;
    if (const char* mb = getenv("TRACEDB_CUDA_BUFFER_MB")) {
      char* end = nullptr;
      const unsigned long v = strtoul(mb, &end, 10);
      if (end == mb || *end != 0 || v < 4 || v > 65536) {
        fprintf(stderr,
                "tracedb cuda: TRACEDB_CUDA_BUFFER_MB='%s' is not a size in MB in [4, 65536]; "
                "using 128\n",
                mb);
      } else {
        g->max_buffers = v / 4;
      }
    }
    g->emitter = new GpuEmitter(ApiName);
    CUptiResult r = cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
    if (r != CUPTI_SUCCESS) return Warn("cuptiActivityRegisterCallbacks", r);
    // GPU timestamps on the recorder's clock (CUDA >= 11.6); else a calibrated offset.
    if (cuptiActivityRegisterTimestampCallback(RecorderClock) != CUPTI_SUCCESS) {
      g->clock_offset = CalibrateOffset();
    }
    const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                        CUPTI_ACTIVITY_KIND_MEMCPY,
                                        CUPTI_ACTIVITY_KIND_MEMSET,
                                        CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                        CUPTI_ACTIVITY_KIND_RUNTIME,
                                        CUPTI_ACTIVITY_KIND_DRIVER};
    for (CUpti_ActivityKind k : kinds) {
      r = cuptiActivityEnable(k);
      if (r != CUPTI_SUCCESS) return Warn("cuptiActivityEnable", r);
    }
    g->started = true;
    atexit(FlushAtExit);
    ok = 1;
  });
  return ok;
}

__attribute__((constructor)) void StartFromEnvironment() {
  const char* v = getenv("TRACEDB_CUDA");
  if (v != nullptr && strcmp(v, "1") == 0) Start();
}

}  // namespace
}  // namespace tracedb::cuda

// CUDA_INJECTION64_PATH entry point: the driver calls it during cuInit. Returns 1 on success.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  return tracedb::cuda::Start();
}

// For programs that link the library: starts CUDA activity capture (idempotent). 1 on success.
extern "C" __attribute__((visibility("default"))) int tracedb_cuda_start(void) {
  return tracedb::cuda::Start();
}
