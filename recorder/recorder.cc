// The recorder's C ABI (tracedb/recorder.h): session state, the hot recording path, step windows,
// automatic start from TRACEDB_DIR, exit, signal and fork handling.
//
// Hot path: one relaxed load of tracedb_active_ (inline, in the caller), the thread-local buffer
// pointer, the thread's `busy` flag set (a plain store and a compiler barrier), an acquire load of
// tracedb_active_ again, a clock read, 16-byte stores into the thread's chunk, a release store of
// the chunk's count, `busy` cleared. Once per chunk (4096 slots) a new chunk is taken from the
// pool (lock-free). Everything else (attach, start, stop, flush, step, interning) takes a mutex
// and is meant to be called rarely.
//
// Stop and in-flight producers: `busy` and tracedb_active_ form a Dekker pair. A producer stores
// busy = 1, then loads active; tracedb_stop stores active = 0, runs membarrier(2) (a full fence
// on every running thread of the process, so producers need no fence of their own), then waits
// until every thread's busy is 0. So a producer either sees active = 0 and records nothing, or is
// seen busy and its event is in the session's last drain. Where membarrier is unavailable the
// producers fence themselves (g_producer_fence).
// Thread safety: every function may be called from any thread at any time; the recording calls
// also from signal handlers (see recorder.h).
#define TRACEDB_BUILDING_LIBRARY  // the real functions, not the inline-check macros
#include "tracedb/recorder.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "recorder/catalog.h"
#include "recorder/chunk_pool.h"
#include "recorder/clock.h"
#include "recorder/flight_ring.h"
#include "recorder/flusher.h"
#include "recorder/rank_env.h"
#include "recorder/thread_buffer.h"

namespace tracedb::recorder {
namespace {

using engine::EventKind;

// How long tracedb_stop waits for threads inside a recording call (a TRACEDB_ON_FULL wait
// included).
constexpr int64_t kStopWaitNs = 5'000'000'000;

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

// The session's chunks. Written under g_mu before tracedb_active_ is set (release) and after
// every producer is idle; read by producers after their acquire load of tracedb_active_.
ChunkPool* g_pool = nullptr;
bool g_on_full_wait = false;  // TRACEDB_ON_FULL=wait: producers wait for a free chunk
int64_t g_on_full_wait_ns = 0;
// Producers fence themselves when membarrier(2) is unavailable (see the file comment).
std::atomic<bool> g_producer_fence{false};
bool g_membarrier = false;  // guarded by g_mu

// Shared sentinel of threads without a buffer (out of memory): permanently "busy", so that the
// hot path's reentrancy branch catches it. A function-local static, built on first use: the
// load-time constructor may run before any dynamic initialiser of this library, and not every
// compiler can constant-initialise its std::string member (clang 14 with libstdc++ 12 cannot).
ThreadBuffer& NoBuf() noexcept {
  static ThreadBuffer b;
  return b;
}
pthread_key_t g_thread_key;
std::once_flag g_init_once;

__attribute__((tls_model("initial-exec"))) thread_local ThreadBuffer* tls_buffer = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local bool tls_attaching = false;

void OnThreadExit(void* p) {
  auto* b = static_cast<ThreadBuffer*>(p);
  tls_buffer = nullptr;
  if (b != nullptr && b != &NoBuf()) b->retired.store(true, std::memory_order_release);
}

inline bool Active() noexcept { return __atomic_load_n(&tracedb_active_, __ATOMIC_RELAXED) != 0; }

inline bool ActiveAcquire() noexcept {
  return __atomic_load_n(&tracedb_active_, __ATOMIC_ACQUIRE) != 0;
}

__attribute__((noinline)) ThreadBuffer* AttachThread() noexcept {
  if (tls_attaching) return nullptr;  // a signal handler interrupted this thread's attach
  tls_attaching = true;
  ThreadBuffer* b = Catalog::Get().AttachThread(static_cast<uint32_t>(::syscall(SYS_gettid)));
  if (b == nullptr) {
    b = &NoBuf();
    NoBuf().busy.store(1, std::memory_order_relaxed);  // never recorded into
  } else {
    pthread_setspecific(g_thread_key, b);
  }
  tls_buffer = b;
  tls_attaching = false;
  return b;
}

// Handles a thread whose buffer is busy: a signal handler interrupted one of its recording
// calls (the event is dropped and counted), or the thread has no buffer.
__attribute__((noinline)) void DropBusy(ThreadBuffer* b) noexcept {
  if (b == nullptr) {
    if (Active()) g_nobuf_dropped.fetch_add(1, std::memory_order_relaxed);
  } else if (b == &NoBuf()) {
    if (Active()) g_nobuf_dropped.fetch_add(1, std::memory_order_relaxed);
  } else if (Active()) {
    b->reentry_dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

// Enters a recording call: returns the thread's buffer with busy set, or nullptr when the event
// is not to be recorded (stopped: not counted; reentered or no buffer: counted).
inline ThreadBuffer* Enter() noexcept {
  ThreadBuffer* b = tls_buffer;
  if (__builtin_expect(b == nullptr, 0)) b = AttachThread();
  if (__builtin_expect(b == nullptr || b->busy.load(std::memory_order_relaxed) != 0, 0)) {
    DropBusy(b);
    return nullptr;
  }
  b->busy.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (__builtin_expect(g_producer_fence.load(std::memory_order_relaxed), 0)) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  if (__builtin_expect(!ActiveAcquire(), 0)) {
    b->busy.store(0, std::memory_order_release);
    return nullptr;
  }
  return b;
}

inline void Leave(ThreadBuffer* b) noexcept { b->busy.store(0, std::memory_order_release); }

// Producers' side of the stop barrier: a full fence on every thread of the process.
void HeavyBarrier() noexcept {
  if (g_membarrier) {
    if (::syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return;
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// TRACEDB_ON_FULL=wait: waits up to TRACEDB_ON_FULL_WAIT_MS for the flusher to give a chunk back;
// gives up at once when the session stops.
Chunk* WaitForChunk(ChunkPool* pool) noexcept {
  const int64_t deadline = NowNs() + g_on_full_wait_ns;
  for (;;) {
    Flusher::RequestDrain();  // the flusher writes what is full, and frees chunks
    timespec ts = {0, 50 * 1000};
    nanosleep(&ts, nullptr);
    if (Chunk* c = pool->Acquire(); c != nullptr) return c;
    if (!ActiveAcquire() || NowNs() >= deadline) return nullptr;
  }
}

// Registers for membarrier(2); else producers fence themselves. Called once at load (before any
// thread records) and in a forked child. REQUIRES: g_mu held, or no other thread.
void SetUpBarrier() noexcept {
  g_membarrier = ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  g_producer_fence.store(!g_membarrier, std::memory_order_relaxed);
}

inline uint16_t LaneOf(uint32_t lane) noexcept { return lane <= 0xffff ? lane : 0; }
inline uint8_t CatOf(uint32_t cat) noexcept {
  return cat < engine::kNumCategories ? static_cast<uint8_t>(cat) : 0;
}

// The general recording path: one Record, an optional payload slot, optional argument slots.
// kNow as `ts`: the clock is read once the call has entered (so that an event is never stamped
// before the session that records it started).
constexpr int64_t kNow = INT64_MIN;
inline void Emit(EventKind kind, uint32_t name, uint32_t cat, uint32_t lane, int64_t ts,
                 bool has_payload, uint64_t payload, const tracedb_args* args) noexcept {
  ThreadBuffer* b = Enter();
  if (b == nullptr) return;
  const uint32_t n = 1 + (has_payload ? 1 : 0) + (args ? 3 : 0);
  const uint32_t h = Reserve(b, n);
  if (h == kNoSlot) {
    CountDrop(b);
    Leave(b);
    return;
  }
  Record* slots = b->slots;
  Record& r = SlotAt(slots, h);
  if (ts == kNow) ts = NowNs();
  r.ts = ts;
  r.name = name;
  r.lane = LaneOf(lane);
  r.kind = static_cast<uint8_t>(kind) | (has_payload ? kRecPayload : 0) | (args ? kRecArgs : 0);
  r.cat = CatOf(cat);
  uint32_t i = h + 1;
  if (has_payload) ExtAt(slots, i++).a = payload;
  if (args) {
    ExtSlot& e1 = ExtAt(slots, i);
    e1.a = args->bytes;
    e1.b = static_cast<uint32_t>(args->peer) |
           (static_cast<uint64_t>(static_cast<uint32_t>(args->tag)) << 32);
    ExtSlot& e2 = ExtAt(slots, i + 1);
    e2.a = args->seq;
    e2.b = args->comm | (static_cast<uint64_t>(args->fields & engine::EventArgs::kAllFields) << 32);
    ExtSlot& e3 = ExtAt(slots, i + 2);
    e3.a = args->flow;
    e3.b = 0;
    i += 3;
  }
  Publish(b, i);
  Leave(b);
}

// The lean path of tracedb_begin/end/instant: one Record.
inline void EmitSimple(EventKind kind, uint32_t name) noexcept {
  ThreadBuffer* b = Enter();
  if (b == nullptr) return;
  const uint32_t h = Reserve(b, 1);
  if (__builtin_expect(h == kNoSlot, 0)) {
    CountDrop(b);
    Leave(b);
    return;
  }
  Record& r = SlotAt(b->slots, h);
  r.ts = NowNs();
  r.name = name;
  r.lane = 0;
  r.kind = static_cast<uint8_t>(kind);
  r.cat = 0;
  Publish(b, h + 1);
  Leave(b);
}

}  // namespace

uint32_t NextChunk(ThreadBuffer* b) noexcept {
  ChunkPool* pool = g_pool;  // published before tracedb_active_ (acquired in Enter)
  if (pool == nullptr) return kNoSlot;
  Chunk* c = pool->Acquire();
  if (c == nullptr && g_on_full_wait) c = WaitForChunk(pool);
  if (c == nullptr) return kNoSlot;  // the current chunk stays: the thread retries next time
  if (b->chunk == nullptr) {
    b->first.store(c, std::memory_order_release);
  } else {
    // Link first, then seal with the final count: the flusher frees a sealed chunk once drained.
    b->chunk->next.store(c, std::memory_order_relaxed);
    b->chunk->committed.store(b->pos | kSealed, std::memory_order_release);
    Flusher::NotifyChunkFull();
  }
  b->chunk = c;
  b->slots = c->slots;
  b->pos = 0;
  b->limit = kChunkSlots;
  return 0;
}

namespace {

// REQUIRES: g_mu held.
void UpdateActive() {
  const bool in_window = !g_window || (g_step >= g_window_lo && g_step <= g_window_hi);
  __atomic_store_n(&tracedb_active_, (g_started && in_window) ? 1 : 0, __ATOMIC_SEQ_CST);
}

int64_t EnvOr(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  long long v;
  if (!EnvInt64(name, &v) || v < lo || v > hi) return fallback;
  return v;
}

void AtExit() { tracedb_stop(); }

// SIGTERM / SIGINT / SIGHUP, and the fatal signals of a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGABRT), installed at the first start only where the application left the default action: a
// last write of everything buffered (bounded wait), then the default action (the handler is
// installed with SA_RESETHAND; re-raised, the signal is delivered on return; a fault re-executes
// and meets the default action). A crashing rank so keeps its last events and open spans.
constexpr int kTerminateFlushMs = 3000;
void OnTerminateSignal(int sig) {
  const int saved_errno = errno;
  Flusher::RequestTerminateFlush(kTerminateFlushMs);
  ::raise(sig);
  errno = saved_errno;
}

// Triggers (tracedb_trigger, SIGUSR1): at most one a second; a storm is ignored.
constexpr int64_t kMinTriggerGapNs = 1000000000;
constexpr double kDefaultSlowStepFactor = 2.0;  // TRACEDB_SLOW_STEP's default
std::atomic<int64_t> g_last_trigger_ns{INT64_MIN / 2};
std::atomic<uint32_t> g_sigusr1_name{0};  // "tracedb.trigger:SIGUSR1", interned at start
bool g_flight = false;                    // guarded by g_mu

}  // namespace

// Claims the right to trigger now (false within kMinTriggerGapNs of the last). Lock-free, so
// that a signal handler may call it. Declared in flusher.h (the slow-step trigger uses it).
bool ClaimTrigger() noexcept {
  const int64_t now = NowNs();
  int64_t last = g_last_trigger_ns.load(std::memory_order_relaxed);
  do {
    if (now - last < kMinTriggerGapNs) return false;
  } while (!g_last_trigger_ns.compare_exchange_weak(last, now, std::memory_order_relaxed));
  return true;
}

namespace {

void OnTriggerSignal(int) {
  const int saved_errno = errno;
  if (ClaimTrigger()) {
    const uint32_t name = g_sigusr1_name.load(std::memory_order_relaxed);
    if (name != 0) tracedb_instant_ex(name, TRACEDB_CAT_USER, 0, nullptr);
    Flusher::RequestTrigger();
  }
  errno = saved_errno;
}

// Flight mode: SIGUSR1 triggers, where the application left the default action (which would
// kill the process).
void InstallTriggerHandler() {
  struct sigaction old;
  if (sigaction(SIGUSR1, nullptr, &old) != 0) return;
  if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnTriggerSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
}

void InstallTerminateHandlers() {
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    struct sigaction old;
    if (sigaction(sig, nullptr, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) continue;  // the app's
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = OnTerminateSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigaction(sig, &sa, nullptr);
  }
}

void ForkPrepare() {
  g_mu.lock();
  if (g_flusher != nullptr) g_flusher->LockForFork();
  Catalog::Get().LockForFork();
}
void ForkParent() {
  Catalog::Get().UnlockAfterFork();
  if (g_flusher != nullptr) g_flusher->UnlockAfterFork();
  g_mu.unlock();
}
void ForkChild() {
  // Only this thread exists in the child. The parent's flusher thread is gone; its file and its
  // buffered events belong to the parent, and so do its chunks (the child's copy is dropped).
  Catalog::Get().ResetInChild(tls_buffer != &NoBuf() ? tls_buffer : nullptr);
  Catalog::Get().UnlockAfterFork();
  if (g_flusher != nullptr) {
    g_flusher->AbandonInChild();  // closes the inherited segment descriptor
    g_flusher = nullptr;          // leaked on purpose: it holds parent-only thread state
  }
  delete g_pool;
  g_pool = nullptr;
  g_started = false;
  UpdateActive();
  SetUpBarrier();  // the registration belongs to the parent's address space
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
    SetUpBarrier();
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
  ChunkPool* pool = nullptr;
  try {
    FlusherConfig cfg;
    cfg.dir = dir;
    g_rank = DetectRank();
    g_rank_known = true;
    cfg.rank = g_rank;
    cfg.flush_interval_ns = EnvOr("TRACEDB_FLUSH_MS", 1000, 1, 3600000) * 1000000;
    cfg.segment_bytes = static_cast<uint64_t>(EnvOr("TRACEDB_SEGMENT_MB", 64, 1, 1 << 20)) << 20;
    const uint64_t budget = static_cast<uint64_t>(EnvOr("TRACEDB_BUFFER_MB", 64, 1, 1 << 20)) << 20;
    const char* on_full = std::getenv("TRACEDB_ON_FULL");
    g_on_full_wait = on_full != nullptr && std::strcmp(on_full, "wait") == 0;
    g_on_full_wait_ns = EnvOr("TRACEDB_ON_FULL_WAIT_MS", 100, 0, 3600000) * 1000000;
    const int64_t lo = EnvOr("TRACEDB_START_STEP", -1, 0, INT64_MAX);
    const int64_t hi = EnvOr("TRACEDB_END_STEP", -1, 0, INT64_MAX);
    g_window = lo >= 0 || hi >= 0;
    g_window_lo = lo >= 0 ? lo : 0;
    g_window_hi = hi >= 0 ? hi : INT64_MAX;
    cfg.start_step = lo;
    cfg.end_step = hi;
    g_flight = false;
    if (const char* flight = std::getenv("TRACEDB_FLIGHT"); flight != nullptr && *flight) {
      cfg.flight_ns = ParseDurationNs(flight);
      if (cfg.flight_ns < 0) {
        std::fprintf(stderr,
                     "tracedb: TRACEDB_FLIGHT=%s is no duration (30s, 500ms, 2m); recording "
                     "everything\n",
                     flight);
        cfg.flight_ns = 0;
      }
      g_flight = cfg.flight_ns > 0;
    }
    if (const char* hang = std::getenv("TRACEDB_HANG_TIMEOUT"); hang != nullptr && *hang) {
      cfg.hang_timeout_ns = ParseDurationNs(hang);
      if (cfg.hang_timeout_ns < 0) {
        std::fprintf(stderr, "tracedb: TRACEDB_HANG_TIMEOUT=%s is no duration; no watchdog\n",
                     hang);
        cfg.hang_timeout_ns = 0;
      }
      cfg.hang_trigger_name = Catalog::Get().Intern("tracedb.trigger:hang");
    }
    if (g_flight) {
      // The slow-step trigger (docs/flight.md): K times the median of the recent steps.
      cfg.slow_step_factor = kDefaultSlowStepFactor;
      if (const char* k = std::getenv("TRACEDB_SLOW_STEP"); k != nullptr && *k) {
        char* end = nullptr;
        const double v = std::strtod(k, &end);
        if (end != k && *end == '\0' && (v == 0 || (v > 1 && v <= 1e6))) {
          cfg.slow_step_factor = v;
        } else {
          std::fprintf(stderr,
                       "tracedb: TRACEDB_SLOW_STEP=%s is neither 0 (off) nor a factor above 1; "
                       "using %g\n",
                       k, kDefaultSlowStepFactor);
        }
      }
      if (cfg.slow_step_factor > 0) {
        cfg.slow_step_trigger_name = Catalog::Get().Intern("tracedb.trigger:slow_step");
      }
    }
    pool = ChunkPool::Create(budget);
    if (pool == nullptr) return TRACEDB_ERR_IO;
    cfg.pool = pool;
    // A reserve of touched chunks, so that producers seldom page-fault: 4 MiB, or a quarter of
    // a smaller budget.
    cfg.prefault_chunks = std::min<uint32_t>(64, std::max<uint32_t>(1, pool->chunks() / 4));
    auto* f = new Flusher();
    tracedb::Status s = f->Start(cfg);
    if (!s.ok()) {
      delete f;
      delete pool;
      return TRACEDB_ERR_IO;
    }
    g_flusher = f;
  } catch (...) {
    delete pool;
    return TRACEDB_ERR_IO;
  }
  g_pool = pool;
  g_started = true;
  UpdateActive();  // publishes g_pool and the reset buffers to producers
  static std::once_flag exit_once;
  std::call_once(exit_once, [] {
    std::atexit(AtExit);
    InstallTerminateHandlers();
  });
  if (g_flight) {
    g_sigusr1_name.store(Catalog::Get().Intern("tracedb.trigger:SIGUSR1"),
                         std::memory_order_relaxed);
    static std::once_flag usr1_once;
    std::call_once(usr1_once, InstallTriggerHandler);
  }
  return TRACEDB_OK;
}

int tracedb_stop(void) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_started) return TRACEDB_ERR_STATE;
  g_started = false;
  UpdateActive();
  // Every producer that saw the session active finishes its event before the last drain.
  HeavyBarrier();
  const bool idle = Catalog::Get().WaitIdle(kStopWaitNs);
  g_flusher->Stop();
  const bool failed = g_flusher->failed();
  delete g_flusher;
  g_flusher = nullptr;
  if (idle) {
    Catalog::Get().ResetSession();
    delete g_pool;
  }
  // else: a thread stayed inside a recording call (a signal handler that never returned): its
  // chunk may still be written, so the pool is left mapped (leaked) rather than unmapped.
  g_pool = nullptr;
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
  if (b == &NoBuf()) return;
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
  if (Active()) Emit(EventKind::kBegin, name, cat, lane, kNow, false, 0, args);
}
void tracedb_end_ex(uint32_t name, uint32_t cat, uint32_t lane, const tracedb_args* args) noexcept {
  if (Active()) Emit(EventKind::kEnd, name, cat, lane, kNow, false, 0, args);
}
void tracedb_instant_ex(uint32_t name, uint32_t cat, uint32_t lane,
                        const tracedb_args* args) noexcept {
  if (Active()) Emit(EventKind::kInstant, name, cat, lane, kNow, false, 0, args);
}
void tracedb_counter_ex(uint32_t name, uint32_t cat, uint32_t lane, double value) noexcept {
  if (!Active()) return;
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  Emit(EventKind::kCounter, name, cat, lane, kNow, true, bits, nullptr);
}
void tracedb_complete_ex(uint32_t name, uint32_t cat, uint32_t lane, int64_t ts_ns, int64_t dur_ns,
                         const tracedb_args* args) noexcept {
  if (!Active()) return;
  Emit(EventKind::kComplete, name, cat, lane, ts_ns != kNow ? ts_ns : kNow + 1, true,
       static_cast<uint64_t>(dur_ns > 0 ? dur_ns : 0), args);
}

void tracedb_step(int64_t step) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  g_step = step;
  UpdateActive();
  if (Active()) {
    Emit(EventKind::kStep, g_step_name, TRACEDB_CAT_STEP, 0, kNow, true,
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

int tracedb_trigger(const char* reason) noexcept {
  if (reason == nullptr) return TRACEDB_ERR_ARG;
  uint32_t name;
  bool flight;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_started) return TRACEDB_ERR_STATE;
    flight = g_flight;
  }
  if (!ClaimTrigger()) return TRACEDB_ERR_RATE;
  try {
    std::string n = "tracedb.trigger:";
    n.append(reason, strnlen(reason, 200));
    name = Catalog::Get().Intern(n);
  } catch (...) {
    return TRACEDB_ERR_IO;
  }
  tracedb_instant_ex(name, TRACEDB_CAT_USER, 0, nullptr);
  if (flight) Flusher::RequestTrigger();
  return TRACEDB_OK;
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
