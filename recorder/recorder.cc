// The recorder's C ABI (tracedb/recorder.h): session state, the hot recording path, step windows,
// automatic start from TRACEDB_DIR, exit and fork handling.
//
// Hot path: one relaxed load of tracedb_active_, the thread-local buffer pointer, a clock read,
// 16-byte stores into the ring and a release store of its head. Everything else (attach, start,
// stop, flush, step, interning) takes a mutex and is meant to be called rarely. Thread safety:
// every function may be called from any thread at any time.
#define TRACEDB_BUILDING_LIBRARY  // the real functions, not the inline-check macros
#include "tracedb/recorder.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "recorder/catalog.h"
#include "recorder/clock.h"
#include "recorder/flusher.h"
#include "recorder/rank_env.h"
#include "recorder/thread_buffer.h"

namespace tracedb::recorder {
namespace {

using engine::EventKind;

// Session state, guarded by g_mu.
constinit std::mutex g_mu;
Flusher* g_flusher = nullptr;
bool g_started = false;
bool g_window = false;
int64_t g_window_lo = 0;
int64_t g_window_hi = 0;
int64_t g_step = INT64_MIN;  // INT64_MIN: tracedb_step never called
uint32_t g_step_name = 0;
constinit RankInfo g_rank;
bool g_rank_known = false;

constinit ThreadBuffer g_nobuf;  // shared sentinel for threads without a buffer (capacity 0)
pthread_key_t g_thread_key;
std::once_flag g_init_once;

__attribute__((tls_model("initial-exec"))) thread_local ThreadBuffer* tls_buffer = nullptr;

void OnThreadExit(void* p) {
  auto* b = static_cast<ThreadBuffer*>(p);
  tls_buffer = nullptr;
  if (b != nullptr && b->capacity != 0) b->retired.store(true, std::memory_order_release);
}

__attribute__((noinline)) ThreadBuffer* AttachThread() noexcept {
  ThreadBuffer* b = Catalog::Get().AttachThread(static_cast<uint32_t>(::syscall(SYS_gettid)));
  if (b == nullptr) {
    tls_buffer = &g_nobuf;
    return &g_nobuf;
  }
  tls_buffer = b;
  pthread_setspecific(g_thread_key, b);
  return b;
}

inline ThreadBuffer* Buffer() noexcept {
  ThreadBuffer* b = tls_buffer;
  if (__builtin_expect(b != nullptr, 1)) return b;
  return AttachThread();
}

inline uint16_t LaneOf(uint32_t lane) noexcept { return lane <= 0xffff ? lane : 0; }
inline uint8_t CatOf(uint32_t cat) noexcept {
  return cat < engine::kNumCategories ? static_cast<uint8_t>(cat) : 0;
}

// The general recording path: one Record, an optional payload slot, optional argument slots.
inline void Emit(EventKind kind, uint32_t name, uint32_t cat, uint32_t lane, int64_t ts,
                 bool has_payload, uint64_t payload, const tracedb_args* args) noexcept {
  ThreadBuffer* b = Buffer();
  const uint32_t n = 1 + (has_payload ? 1 : 0) + (args ? 3 : 0);
  const uint64_t h = Reserve(b, n);
  if (h == UINT64_MAX) {
    CountDrop(b);
    return;
  }
  Record& r = SlotAt(b, h);
  r.ts = ts;
  r.name = name;
  r.lane = LaneOf(lane);
  r.kind = static_cast<uint8_t>(kind) | (has_payload ? kRecPayload : 0) | (args ? kRecArgs : 0);
  r.cat = CatOf(cat);
  uint64_t i = h + 1;
  if (has_payload) ExtAt(b, i++).a = payload;
  if (args) {
    ExtSlot& e1 = ExtAt(b, i);
    e1.a = args->bytes;
    e1.b = static_cast<uint32_t>(args->peer) |
           (static_cast<uint64_t>(static_cast<uint32_t>(args->tag)) << 32);
    ExtSlot& e2 = ExtAt(b, i + 1);
    e2.a = args->seq;
    e2.b = args->comm | (static_cast<uint64_t>(args->fields & engine::EventArgs::kAllFields) << 32);
    ExtSlot& e3 = ExtAt(b, i + 2);
    e3.a = args->flow;
    e3.b = 0;
    i += 3;
  }
  Publish(b, i);
}

// The lean path of tracedb_begin/end/instant: one Record.
inline void EmitSimple(EventKind kind, uint32_t name) noexcept {
  ThreadBuffer* b = Buffer();
  const uint64_t h = Reserve(b, 1);
  if (__builtin_expect(h == UINT64_MAX, 0)) {
    CountDrop(b);
    return;
  }
  Record& r = SlotAt(b, h);
  r.ts = NowNs();
  r.name = name;
  r.lane = 0;
  r.kind = static_cast<uint8_t>(kind);
  r.cat = 0;
  Publish(b, h + 1);
}

inline bool Active() noexcept { return __atomic_load_n(&tracedb_active_, __ATOMIC_RELAXED) != 0; }

// REQUIRES: g_mu held.
void UpdateActive() {
  const bool in_window = !g_window || (g_step >= g_window_lo && g_step <= g_window_hi);
  __atomic_store_n(&tracedb_active_, (g_started && in_window) ? 1 : 0, __ATOMIC_RELAXED);
}

int64_t EnvOr(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  long long v;
  if (!EnvInt64(name, &v) || v < lo || v > hi) return fallback;
  return v;
}

void AtExit() { tracedb_stop(); }

void ForkPrepare() {
  g_mu.lock();
  Catalog::Get().LockForFork();
}
void ForkParent() {
  Catalog::Get().UnlockAfterFork();
  g_mu.unlock();
}
void ForkChild() {
  // Only this thread exists in the child. The parent's flusher thread is gone; its file and its
  // buffered events belong to the parent.
  Catalog::Get().ResetInChild(tls_buffer != &g_nobuf ? tls_buffer : nullptr);
  Catalog::Get().UnlockAfterFork();
  if (g_flusher != nullptr) {
    g_flusher->AbandonInChild();
    g_flusher = nullptr;  // leaked on purpose: it holds parent-only thread state
  }
  g_started = false;
  UpdateActive();
  g_mu.unlock();
  if (std::getenv("TRACEDB_FOLLOW_FORK") != nullptr) {
    if (const char* dir = std::getenv("TRACEDB_DIR"); dir != nullptr && *dir != '\0') {
      tracedb_start(dir);
    }
  }
}

void InitOnce() {
  std::call_once(g_init_once, [] {
    pthread_key_create(&g_thread_key, OnThreadExit);
    pthread_atfork(ForkPrepare, ForkParent, ForkChild);
    g_step_name = Catalog::Get().Intern("step");
  });
}

__attribute__((constructor)) void AutoStart() {
  InitOnce();
  const char* dir = std::getenv("TRACEDB_DIR");
  if (dir == nullptr || *dir == '\0') return;
  if (int rc = tracedb_start(dir); rc != TRACEDB_OK) {
    std::fprintf(stderr, "tracedb: cannot record to TRACEDB_DIR=%s (code %d); not recording\n", dir,
                 rc);
  }
}

}  // namespace
}  // namespace tracedb::recorder

using namespace tracedb::recorder;  // NOLINT: the C ABI below is a thin shell over it

extern "C" {

// The hot-path gate, read inline by recorder.h's macros: started and inside the step window.
int tracedb_active_ = 0;

int tracedb_start(const char* dir) noexcept {
  if (dir == nullptr || *dir == '\0') return TRACEDB_ERR_ARG;
  InitOnce();
  InitClock();
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_started) return TRACEDB_ERR_STATE;
  try {
    FlusherConfig cfg;
    cfg.dir = dir;
    g_rank = DetectRank();
    g_rank_known = true;
    cfg.rank = g_rank;
    cfg.flush_interval_ns = EnvOr("TRACEDB_FLUSH_MS", 1000, 1, 3600000) * 1000000;
    cfg.segment_bytes = static_cast<uint64_t>(EnvOr("TRACEDB_SEGMENT_MB", 64, 1, 1 << 20)) << 20;
    Catalog::Get().SetBudget(static_cast<uint64_t>(EnvOr("TRACEDB_BUFFER_MB", 64, 1, 1 << 20))
                             << 20);
    Catalog::Get().SetThreadBufferBytes(
        static_cast<uint64_t>(EnvOr("TRACEDB_THREAD_BUFFER_KB", 2048, 64, 1 << 20)) << 10);
    const int64_t lo = EnvOr("TRACEDB_START_STEP", -1, 0, INT64_MAX);
    const int64_t hi = EnvOr("TRACEDB_END_STEP", -1, 0, INT64_MAX);
    g_window = lo >= 0 || hi >= 0;
    g_window_lo = lo >= 0 ? lo : 0;
    g_window_hi = hi >= 0 ? hi : INT64_MAX;
    cfg.start_step = lo;
    cfg.end_step = hi;
    auto* f = new Flusher();
    tracedb::Status s = f->Start(cfg);
    if (!s.ok()) {
      delete f;
      return TRACEDB_ERR_IO;
    }
    g_flusher = f;
  } catch (...) {
    return TRACEDB_ERR_IO;
  }
  g_started = true;
  UpdateActive();
  static std::once_flag exit_once;
  std::call_once(exit_once, [] { std::atexit(AtExit); });
  return TRACEDB_OK;
}

int tracedb_stop(void) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_started) return TRACEDB_ERR_STATE;
  g_started = false;
  UpdateActive();
  g_flusher->Stop();
  const bool failed = Flusher::write_errors.load(std::memory_order_relaxed) != 0;
  delete g_flusher;
  g_flusher = nullptr;
  return failed ? TRACEDB_ERR_IO : TRACEDB_OK;
}

int tracedb_flush(void) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_started || g_flusher == nullptr) return TRACEDB_ERR_STATE;
  tracedb::Status s = g_flusher->Flush();
  if (s.ok()) return TRACEDB_OK;
  return s.code() == tracedb::Status::Code::kAborted ? TRACEDB_ERR_TIMEOUT : TRACEDB_ERR_IO;
}

int tracedb_enabled(void) noexcept { return Active() ? 1 : 0; }

int tracedb_rank(void) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_rank_known) {
    g_rank = DetectRank();
    g_rank_known = true;
  }
  return g_rank.rank;
}

int tracedb_world_size(void) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_rank_known) {
    g_rank = DetectRank();
    g_rank_known = true;
  }
  return g_rank.world_size;
}

uint32_t tracedb_intern(const char* name) noexcept {
  if (name == nullptr) return 0;
  return Catalog::Get().Intern(name);
}

uint32_t tracedb_lane(const char* name) noexcept {
  if (name == nullptr || *name == '\0') return 0;
  return Catalog::Get().Lane(name);
}

void tracedb_thread_name(const char* name) noexcept {
  if (name == nullptr) return;
  ThreadBuffer* b = tls_buffer;
  if (b == nullptr) b = AttachThread();
  if (b == &g_nobuf) return;
  Catalog::Get().SetThreadName(b, name);
}

void tracedb_begin(uint32_t name) noexcept {
  if (Active()) EmitSimple(EventKind::kBegin, name);
}
void tracedb_end(uint32_t name) noexcept {
  if (Active()) EmitSimple(EventKind::kEnd, name);
}
void tracedb_instant(uint32_t name) noexcept {
  if (Active()) EmitSimple(EventKind::kInstant, name);
}
void tracedb_counter(uint32_t name, double value) noexcept {
  tracedb_counter_ex(name, TRACEDB_CAT_USER, 0, value);
}
void tracedb_complete(uint32_t name, int64_t ts_ns, int64_t dur_ns) noexcept {
  tracedb_complete_ex(name, TRACEDB_CAT_USER, 0, ts_ns, dur_ns, nullptr);
}
int64_t tracedb_now(void) noexcept { return NowNs(); }

void tracedb_begin_ex(uint32_t name, uint32_t cat, uint32_t lane,
                      const tracedb_args* args) noexcept {
  if (Active()) Emit(EventKind::kBegin, name, cat, lane, NowNs(), false, 0, args);
}
void tracedb_end_ex(uint32_t name, uint32_t cat, uint32_t lane, const tracedb_args* args) noexcept {
  if (Active()) Emit(EventKind::kEnd, name, cat, lane, NowNs(), false, 0, args);
}
void tracedb_instant_ex(uint32_t name, uint32_t cat, uint32_t lane,
                        const tracedb_args* args) noexcept {
  if (Active()) Emit(EventKind::kInstant, name, cat, lane, NowNs(), false, 0, args);
}
void tracedb_counter_ex(uint32_t name, uint32_t cat, uint32_t lane, double value) noexcept {
  if (!Active()) return;
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  Emit(EventKind::kCounter, name, cat, lane, NowNs(), true, bits, nullptr);
}
void tracedb_complete_ex(uint32_t name, uint32_t cat, uint32_t lane, int64_t ts_ns, int64_t dur_ns,
                         const tracedb_args* args) noexcept {
  if (!Active()) return;
  Emit(EventKind::kComplete, name, cat, lane, ts_ns, true,
       static_cast<uint64_t>(dur_ns > 0 ? dur_ns : 0), args);
}

void tracedb_step(int64_t step) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  g_step = step;
  UpdateActive();
  if (Active()) {
    Emit(EventKind::kStep, g_step_name, TRACEDB_CAT_STEP, 0, NowNs(), true,
         static_cast<uint64_t>(step), nullptr);
  }
}

void tracedb_clock_sync(int32_t ref_rank, int64_t local_ns, int64_t offset_ns,
                        int64_t uncertainty_ns) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_started || g_flusher == nullptr) return;
  g_flusher->AddSync(tracedb::engine::SyncPoint{ref_rank, local_ns, offset_ns,
                                                uncertainty_ns < 0 ? 0 : uncertainty_ns});
}

void tracedb_comm_define(uint32_t comm, int32_t size, int32_t rank_in_comm,
                         const int32_t* members) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_started || g_flusher == nullptr || size < 0) return;
  try {
    tracedb::engine::CommInfo info;
    info.comm = comm;
    info.size = size;
    info.rank_in_comm = rank_in_comm;
    if (members != nullptr) info.members.assign(members, members + size);
    g_flusher->AddComm(std::move(info));
  } catch (...) {
  }
}

void tracedb_get_counters(tracedb_counters* out) noexcept {
  if (out == nullptr) return;
  out->written = Flusher::written_events.load(std::memory_order_relaxed);
  out->dropped =
      Catalog::Get().TotalDropped() + Flusher::discarded_events.load(std::memory_order_relaxed);
  out->flushed_bytes = Flusher::written_bytes.load(std::memory_order_relaxed);
  out->write_errors = Flusher::write_errors.load(std::memory_order_relaxed);
  out->flusher_cpu_ns = Flusher::cpu_ns.load(std::memory_order_relaxed);
}

}  // extern "C"
