// The core of libnccl-profiler-tracedb.so, the NCCL profiler plugin: contexts, the event pool,
// lanes, and the recording of every event type through the recorder's public C ABI
// (tracedb/recorder.h). versions.cc translates NCCL's v5, v4 and v3 calls into plugin_core.h.
//
// What is recorded, on which track, and how the views read it: docs/gpu-capture.md.
// Thread safety: NCCL calls startEvent/stopEvent/recordEventState from the application threads
// and from its proxy threads at once. Events live in one fixed pool of slots taken in ring order
// (an atomic cursor and a CAS per slot): no lock and no allocation per event; a full pool gives
// NCCL a null handle and counts a drop. A freed slot is reused only when the cursor comes round
// again, so a child that names a parent which has already stopped (a ProxyOp names its Coll,
// which NCCL stops once enqueued) still reads the parent's fields; the fields a child reads are
// relaxed atomics. Parents are dereferenced only when they lie inside the pool and, for proxy
// ops, when the originating pid is ours (PXN: a remote proxy may name another process's object).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>

#include "engine/util/hash.h"
#include "recorder/cuda/gpu_clock.h"
#include "recorder/nccl/event_mask.h"
#include "recorder/nccl/plugin_core.h"
#include "recorder/nccl/profiler_abi.h"
#include "tracedb/recorder.h"

namespace tracedb::nccl {
namespace {

constexpr int kMaxChannels = 64;
// Rows per channel lane: a proxy op takes the lowest row free when it starts (a tree channel has
// ops to several peers at once); a proxy step uses row step % 8, NCCL's FIFO depth (NCCL_STEPS),
// so step s + 8 starts only after step s is done. Spans on one row's lane therefore never overlap.
constexpr int kRows = 8;
constexpr int kMaxContexts = 1024;
// Requested while recording is off (not started, or outside the step window): the group events
// alone, so that NCCL does little work and the plugin sees when recording resumes.
constexpr int kIdleMask = kGroup | kGroupApi;

enum LaneKind { kLaneSend = 0, kLaneRecv, kLaneKernel, kLaneKinds };

struct Context {
  int version = 5;
  std::atomic<uint32_t> comm{0};  // 32-bit communicator id (commHash folded), 0 until known
  uint64_t comm_hash = 0;
  int rank = -1;
  int nranks = 0;
  int nnodes = 0;
  int* mask_ptr = nullptr;
  std::atomic<uint32_t> comm_lane{0};   // "nccl <label>": one instant per task
  std::atomic<uint32_t> group_lane{0};  // "nccl <label> groups"
  std::atomic<uint32_t> net_lane{0};    // "nccl <label> net"
  std::atomic<uint32_t> ch_lanes[kMaxChannels][kLaneKinds][kRows] = {};
  std::atomic<uint8_t> op_busy[kMaxChannels][2][kRows] = {};  // proxy op rows in use
  // Step lanes per (channel, direction, the op's row, step slot); made on first use.
  std::atomic<uint32_t> step_lanes[kMaxChannels][2][kRows][kRows] = {};
  std::string label;  // commName, or "comm <hash>"; set before the lanes are made
  std::mutex label_mu;
  gpu::GpuClockMap gpu_clock;
};

// One event in flight. `state` guards the slot; the fields a child reads from its parent are
// atomics (the parent may be stopped and its slot taken again by the time the child reads).
struct Event {
  std::atomic<uint32_t> state{0};  // 0 free, 1 live
  std::atomic<uint32_t> kind{0};   // EventType bit (low 32 bits)
  std::atomic<uint64_t> flow{0};   // the task's operation id (children inherit it)
  std::atomic<uint64_t> seq{0};    // collective sequence number + 1 (0: none)
  std::atomic<uint32_t> name{0};   // task: function name id
  std::atomic<uint64_t> bytes{0};  // ProxyOp: bytes transferred by its steps
  Context* ctx = nullptr;
  int64_t start = 0;        // recorder clock, ns
  int64_t gpu_start = 0;    // KernelCh: GPU timer at start (0: none)
  int64_t gpu_stop = 0;     // KernelCh: GPU timer at stop (0: none)
  Event* parent = nullptr;  // validated parent (in the pool, same process), else null
  uint32_t lane = 0;
  uint32_t span_name = 0;
  int32_t peer = -1;
  int32_t tag = 0;
  int32_t channel = 0;
  int32_t row = -1;  // ProxyOp: the row it holds (freed at stop)
  int32_t last_state = -1;
  int32_t appended = 0;
  uint64_t step_bytes = 0;
  bool is_send = false;
  bool on_thread = false;  // API event recorded with begin/end on the calling thread
};

// Process-wide state, created by the first init.
struct Global {
  Event* pool = nullptr;
  uint64_t pool_mask = 0;
  std::atomic<uint64_t> cursor{0};
  std::atomic<uint64_t> dropped{0};          // events refused: pool full
  std::atomic<uint64_t> foreign_parents{0};  // PXN: parents owned by another process
  std::atomic<uint64_t> flow_counter{0};
  int user_mask = 0;
  std::atomic<int> window_on{-1};  // last recording state applied to the masks
  std::mutex contexts_mu;
  Context* contexts[kMaxContexts] = {};
  int live_contexts = 0;
  pid_t pid = 0;
  uint32_t n_group, n_group_api, n_kernel_launch, n_proxy_send, n_proxy_recv, n_step_send,
      n_step_recv, n_net, n_ctrl[6], n_dropped, n_foreign, n_unknown;
  uint32_t ctrl_lane = 0;
};

Global* g = nullptr;
std::mutex g_init_mu;

// ---- interned strings, cached by the address NCCL passes (its names are static strings) ----

// A small map from the address of a string NCCL passes (its names are static strings) to a value
// computed once: an interned name id, or a code of event_mask.h. Lock-free: a miss computes the
// value and publishes it with a CAS; a full neighbourhood just computes again.
struct PtrCache {
  static constexpr int kSize = 1024;
  std::atomic<const char*> key[kSize] = {};
  std::atomic<uint32_t> value[kSize] = {};  // value + 1 (0: being filled)
};
PtrCache g_names;      // "AllReduce" -> id of "AllReduce"
PtrCache g_api_names;  // "AllReduce" -> id of "ncclAllReduce"
PtrCache g_dtypes;     // "ncclFloat32" -> DatatypeCode
PtrCache g_algos;      // "RING" -> AlgoCode
PtrCache g_protos;     // "LL128" -> ProtoCode

template <typename F>
uint32_t Cached(PtrCache& cache, const char* s, F&& compute) {
  const uint64_t h = tracedb::engine::FibonacciHash(reinterpret_cast<uintptr_t>(s));
  for (int probe = 0; probe < 16; ++probe) {
    const int i = static_cast<int>((h >> 40) + probe) & (PtrCache::kSize - 1);
    const char* k = cache.key[i].load(std::memory_order_acquire);
    if (k == s) {
      const uint32_t v = cache.value[i].load(std::memory_order_acquire);
      if (v != 0) return v - 1;
      break;  // being filled by another thread
    }
    if (k == nullptr) {
      const uint32_t v = compute();
      const char* expected = nullptr;
      if (cache.key[i].compare_exchange_strong(expected, s, std::memory_order_acq_rel)) {
        cache.value[i].store(v + 1, std::memory_order_release);
      }
      return v;
    }
  }
  return compute();
}

uint32_t CachedName(PtrCache& cache, const char* s, const char* prefix) {
  if (s == nullptr) s = "unknown";
  return Cached(cache, s, [&] { return tracedb_intern((std::string(prefix) + s).c_str()); });
}
uint32_t CachedDatatype(const char* s) {
  return s == nullptr ? 0 : Cached(g_dtypes, s, [&] { return DatatypeCode(s); });
}
uint32_t CachedAlgo(const char* s) {
  return s == nullptr ? 0 : Cached(g_algos, s, [&] { return AlgoCode(s); });
}
uint32_t CachedProto(const char* s) {
  return s == nullptr ? 0 : Cached(g_protos, s, [&] { return ProtoCode(s); });
}

// ---- the pool ----

Event* Alloc() {
  for (int probe = 0; probe < 8; ++probe) {
    Event* e = &g->pool[g->cursor.fetch_add(1, std::memory_order_relaxed) & g->pool_mask];
    uint32_t expected = 0;
    if (e->state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) return e;
  }
  g->dropped.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

void Free(Event* e) { e->state.store(0, std::memory_order_release); }

// `p` as one of our events, or null (not ours, misaligned, or from another process).
Event* OwnEvent(void* p) {
  if (p == nullptr || g == nullptr) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(g->pool);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a < base || a >= base + (g->pool_mask + 1) * sizeof(Event)) return nullptr;
  if ((a - base) % sizeof(Event) != 0) return nullptr;
  return static_cast<Event*>(p);
}

// ---- lanes ----

// The communicator's name in lane names: its commName, else "comm <hash>", then " r<rank>" (a
// process may hold several ranks of one communicator, one per GPU).
void SetLabel(Context* c, const char* comm_name, uint64_t hash, int rank) {
  std::lock_guard<std::mutex> lock(c->label_mu);
  if (!c->label.empty()) return;
  char buf[64];
  if (comm_name != nullptr && comm_name[0] != 0) {
    c->label = comm_name;
  } else {
    snprintf(buf, sizeof(buf), "comm %016llx", static_cast<unsigned long long>(hash));
    c->label = buf;
  }
  snprintf(buf, sizeof(buf), " r%d", rank);
  c->label += buf;
}

uint32_t MakeLane(Context* c, std::atomic<uint32_t>* slot, const char* suffix) {
  uint32_t lane = slot->load(std::memory_order_acquire);
  if (lane != 0) return lane;
  std::string name;
  {
    std::lock_guard<std::mutex> lock(c->label_mu);
    name = "nccl " + (c->label.empty() ? std::string("comm") : c->label) + suffix;
  }
  lane = tracedb_lane(name.c_str());  // idempotent by name: a race makes the same lane
  slot->store(lane, std::memory_order_release);
  return lane;
}

int ClampChannel(int channel) {
  return channel < 0 || channel >= kMaxChannels ? kMaxChannels - 1 : channel;
}

// "nccl <label> ch<C> <kind>", with " #<row>" for rows after the first.
uint32_t ChannelLane(Context* c, int channel, LaneKind kind, int row = 0) {
  channel = ClampChannel(channel);
  std::atomic<uint32_t>* slot = &c->ch_lanes[channel][kind][row];
  if (uint32_t lane = slot->load(std::memory_order_acquire)) return lane;
  static const char* const kSuffix[kLaneKinds] = {"send", "recv", "kernel"};
  char suffix[64];
  if (row == 0) {
    snprintf(suffix, sizeof(suffix), " ch%d %s", channel, kSuffix[kind]);
  } else {
    snprintf(suffix, sizeof(suffix), " ch%d %s #%d", channel, kSuffix[kind], row);
  }
  return MakeLane(c, slot, suffix);
}

// "nccl <label> ch<C> send[ #<op row>] steps[ #<slot>]".
uint32_t StepLane(Context* c, int channel, bool send, int op_row, int slot) {
  channel = ClampChannel(channel);
  std::atomic<uint32_t>* lane = &c->step_lanes[channel][send ? 0 : 1][op_row][slot];
  if (uint32_t id = lane->load(std::memory_order_acquire)) return id;
  char suffix[80];
  int n = snprintf(suffix, sizeof(suffix), " ch%d %s", channel, send ? "send" : "recv");
  if (op_row > 0) n += snprintf(suffix + n, sizeof(suffix) - n, " #%d", op_row);
  n += snprintf(suffix + n, sizeof(suffix) - n, " steps");
  if (slot > 0) snprintf(suffix + n, sizeof(suffix) - n, " #%d", slot);
  return MakeLane(c, lane, suffix);
}

// The lowest free proxy-op row of (channel, direction); the last row when all are taken.
int TakeOpRow(Context* c, int channel, bool send) {
  std::atomic<uint8_t>* rows = c->op_busy[ClampChannel(channel)][send ? 0 : 1];
  for (int r = 0; r < kRows; ++r) {
    uint8_t expected = 0;
    if (rows[r].compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return r;
  }
  return -(kRows - 1) - 1;  // shared, not held: encoded as -row - 1
}

void ReleaseOpRow(Context* c, int channel, bool send, int row) {
  if (row >= 0)
    c->op_busy[ClampChannel(channel)][send ? 0 : 1][row].store(0, std::memory_order_release);
}

uint32_t Fold(uint64_t h) {
  uint32_t v = static_cast<uint32_t>(h ^ (h >> 32));
  return v == 0 ? 1 : v;
}

// v3 names the communicator in each task descriptor rather than in init.
void LearnComm(Context* c, const char* name, uint64_t hash, int rank) {
  if (c->comm.load(std::memory_order_acquire) != 0) return;
  SetLabel(c, name, hash, rank);
  c->comm_hash = hash;
  c->comm.store(Fold(hash), std::memory_order_release);
}

// ---- the step window: the masks follow the recorder's state ----

void ApplyWindow(bool on) {
  std::lock_guard<std::mutex> lock(g->contexts_mu);
  g->window_on.store(on ? 1 : 0, std::memory_order_relaxed);
  for (Context* c : g->contexts) {
    if (c != nullptr && c->mask_ptr != nullptr) *c->mask_ptr = on ? g->user_mask : kIdleMask;
  }
}

inline bool RecordingOn() {
  const bool on = TRACEDB_ACTIVE();
  if (static_cast<int>(on) != g->window_on.load(std::memory_order_relaxed)) ApplyWindow(on);
  return on;
}

Result Init(Context* c, int* mask) {
  c->mask_ptr = mask;
  {
    std::lock_guard<std::mutex> lock(g->contexts_mu);
    int slot = -1;
    for (int i = 0; i < kMaxContexts; ++i) {
      if (g->contexts[i] == nullptr) {
        slot = i;
        break;
      }
    }
    if (slot < 0) return kInternalError;
    g->contexts[slot] = c;
    ++g->live_contexts;
  }
  *mask = TRACEDB_ACTIVE() ? g->user_mask : kIdleMask;
  if (c->comm.load() != 0 && c->nranks > 0) {
    tracedb_comm_define(c->comm.load(), c->nranks, c->rank, nullptr);
  }
  return kSuccess;
}

// Creates the process-wide state once. Returns false (with a message on stderr) on bad settings.
bool EnsureGlobal(DebugLogger) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (g != nullptr) return true;
  int mask = kDefaultEventMask;
  std::string error;
  if (const char* env = getenv("TRACEDB_NCCL_EVENTS")) {
    if (!ParseEventMask(env, &mask, &error)) {
      fprintf(stderr, "tracedb nccl profiler: %s; plugin disabled\n", error.c_str());
      return false;
    }
  }
  uint64_t pool = 16384;
  if (const char* env = getenv("TRACEDB_NCCL_POOL")) {
    char* end = nullptr;
    const unsigned long long v = strtoull(env, &end, 10);
    if (end == env || *end != 0 || v < 16 || v > (1ull << 24)) {
      fprintf(stderr,
              "tracedb nccl profiler: TRACEDB_NCCL_POOL='%s' is not a number of events in "
              "[16, 16777216]; plugin disabled\n",
              env);
      return false;
    }
    pool = 16;
    while (pool < v) pool <<= 1;
  }
  Global* s = new (std::nothrow) Global;
  if (s == nullptr) return false;
  s->pool = new (std::nothrow) Event[pool];
  if (s->pool == nullptr) {
    delete s;
    return false;
  }
  s->pool_mask = pool - 1;
  s->user_mask = mask;
  s->pid = getpid();
  s->n_group = tracedb_intern("Group");
  s->n_group_api = tracedb_intern("ncclGroup");
  s->n_kernel_launch = tracedb_intern("ncclKernelLaunch");
  s->n_proxy_send = tracedb_intern("ProxySend");
  s->n_proxy_recv = tracedb_intern("ProxyRecv");
  s->n_step_send = tracedb_intern("ProxyStepSend");
  s->n_step_recv = tracedb_intern("ProxyStepRecv");
  s->n_net = tracedb_intern("NetPlugin");
  static const char* const kCtrl[6] = {"ProxyIdle",   "ProxyActive", "ProxySleep",
                                       "ProxyWakeup", "ProxyAppend", "ProxyCtrl"};
  for (int i = 0; i < 6; ++i) s->n_ctrl[i] = tracedb_intern(kCtrl[i]);
  s->n_dropped = tracedb_intern("nccl.dropped_events");
  s->n_foreign = tracedb_intern("nccl.foreign_parents");
  s->n_unknown = tracedb_intern("unknown");
  s->ctrl_lane = tracedb_lane("nccl proxy ctrl");
  g = s;
  return true;
}

uint64_t TaskBytes(const Descr& d, uint32_t dtype) { return d.count * DatatypeSize(dtype); }

Result StartImpl(void* context, void** handle, const Descr& d) {
  *handle = nullptr;
  Context* c = static_cast<Context*>(context);
  if (c == nullptr || g == nullptr || !RecordingOn()) return kSuccess;
  const uint64_t type = d.type;
  Event* e = Alloc();
  if (e == nullptr) return kSuccess;
  e->kind.store(static_cast<uint32_t>(type), std::memory_order_relaxed);
  e->ctx = c;
  e->parent = nullptr;
  e->on_thread = false;
  e->gpu_start = e->gpu_stop = 0;
  e->last_state = -1;
  e->appended = 0;
  e->step_bytes = 0;
  e->bytes.store(0, std::memory_order_relaxed);
  e->flow.store(0, std::memory_order_relaxed);
  e->seq.store(0, std::memory_order_relaxed);
  e->name.store(0, std::memory_order_relaxed);
  e->peer = -1;
  e->tag = 0;
  e->row = -1;

  if (type == kProxyOp && d.pid != g->pid) {
    g->foreign_parents.fetch_add(1, std::memory_order_relaxed);  // PXN: never dereference
  } else {
    e->parent = OwnEvent(d.parent);
  }
  Event* p = e->parent;
  if (p != nullptr) {
    e->flow.store(p->flow.load(std::memory_order_relaxed), std::memory_order_relaxed);
    e->seq.store(p->seq.load(std::memory_order_relaxed), std::memory_order_relaxed);
    e->name.store(p->name.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  tracedb_args a;
  a.fields = 0;
  const uint32_t comm_now = c->comm.load(std::memory_order_acquire);

  switch (type) {
    case kGroupApi:
    case kCollApi:
    case kP2pApi:
    case kKernelLaunch: {
      uint32_t name = g->n_group_api;
      if (type == kKernelLaunch) name = g->n_kernel_launch;
      if (type == kCollApi || type == kP2pApi) {
        name = CachedName(g_api_names, d.func, "nccl");
        const uint32_t dtype = CachedDatatype(d.datatype);
        a.fields |= TRACEDB_ARG_BYTES;
        a.bytes = TaskBytes(d, dtype);
        if (type == kCollApi && d.root_or_peer >= 0) {
          a.fields |= TRACEDB_ARG_PEER;
          a.peer = d.root_or_peer;
        }
      }
      if (comm_now != 0) {
        a.fields |= TRACEDB_ARG_COMM;
        a.comm = comm_now;
      }
      e->on_thread = true;
      e->span_name = name;
      tracedb_begin_ex(name, TRACEDB_CAT_NCCL, 0, &a);
      break;
    }
    case kGroup:
      e->start = tracedb_now();
      e->span_name = g->n_group;  // the lane is chosen at stop: v3 names the communicator later
      break;
    case kColl:
    case kP2p: {
      if (d.comm_name != nullptr || d.comm_hash != 0)
        LearnComm(c, d.comm_name, d.comm_hash, d.rank);
      const uint32_t comm = c->comm.load(std::memory_order_acquire);
      // Task flows are 1 << 40 + n, apart from CUDA correlation flows (2 << 40 + id) and the MPI
      // interposer's small request ids.
      const uint64_t flow =
          (uint64_t{1} << 40) | (g->flow_counter.fetch_add(1, std::memory_order_relaxed) + 1);
      const uint32_t name = CachedName(g_names, d.func, "");
      const uint32_t dtype = CachedDatatype(d.datatype);
      e->flow.store(flow, std::memory_order_relaxed);
      e->name.store(name, std::memory_order_relaxed);
      a.fields = TRACEDB_ARG_BYTES | TRACEDB_ARG_TAG | TRACEDB_ARG_FLOW;
      a.bytes = TaskBytes(d, dtype);
      a.tag = static_cast<int32_t>(
          PackTaskTag(dtype, CachedAlgo(d.algo), CachedProto(d.proto), d.channels, d.warps));
      a.flow = flow;
      if (comm != 0) {
        a.fields |= TRACEDB_ARG_COMM;
        a.comm = comm;
      }
      if (d.root_or_peer >= 0) {
        a.fields |= TRACEDB_ARG_PEER;
        a.peer = d.root_or_peer;
      }
      if (d.has_seq) {
        a.fields |= TRACEDB_ARG_SEQ;
        a.seq = d.seq;
        e->seq.store(d.seq + 1, std::memory_order_relaxed);
      }
      tracedb_instant_ex(name, TRACEDB_CAT_NCCL, MakeLane(c, &c->comm_lane, ""), &a);
      break;
    }
    case kProxyOp:
      e->start = tracedb_now();
      e->is_send = d.is_send != 0;
      e->channel = d.channel;
      e->peer = d.peer;
      e->tag = (d.channel & 0xff) | (d.n_steps & 0xffff) << 8;
      e->row = TakeOpRow(c, d.channel, e->is_send);
      e->lane = ChannelLane(c, d.channel, e->is_send ? kLaneSend : kLaneRecv,
                            e->row >= 0 ? e->row : -e->row - 1);
      e->span_name = e->is_send ? g->n_proxy_send : g->n_proxy_recv;
      break;
    case kProxyStep: {
      e->start = tracedb_now();
      const bool send = p != nullptr && p->is_send;
      e->is_send = send;
      e->channel = p != nullptr ? p->channel : kMaxChannels - 1;
      e->peer = p != nullptr ? p->peer : -1;
      e->tag = d.step;
      const int op_row = p == nullptr ? 0 : p->row >= 0 ? p->row : -p->row - 1;
      e->lane = StepLane(c, e->channel, send, op_row, (d.step % kRows + kRows) % kRows);
      e->span_name = send ? g->n_step_send : g->n_step_recv;
      break;
    }
    case kKernelCh: {
      const int64_t now = tracedb_now();
      e->start = now;
      e->channel = d.channel;
      e->tag = d.channel & 0xff;
      if (d.ptimer != 0) {
        e->gpu_start = static_cast<int64_t>(d.ptimer);
        c->gpu_clock.Observe(now, e->gpu_start);
      }
      e->lane = ChannelLane(c, d.channel, kLaneKernel);
      e->span_name = 0;  // the task's name, read at stop
      break;
    }
    case kProxyCtrl:
      e->start = tracedb_now();
      e->lane = g->ctrl_lane;
      break;
    case kNetPlugin:
      e->start = tracedb_now();
      e->lane = MakeLane(c, &c->net_lane, " net");
      e->span_name = g->n_net;
      e->tag = static_cast<int32_t>(d.net_id & 0x7fffffff);
      break;
    default:
      Free(e);  // an event type this plugin does not know (a newer NCCL): ignored
      return kSuccess;
  }
  *handle = e;
  return kSuccess;
}

void FillTaskArgs(const Event* e, tracedb_args* a) {
  a->fields = 0;
  const uint32_t comm = e->ctx->comm.load(std::memory_order_acquire);
  if (comm != 0) {
    a->fields |= TRACEDB_ARG_COMM;
    a->comm = comm;
  }
  if (const uint64_t flow = e->flow.load(std::memory_order_relaxed)) {
    a->fields |= TRACEDB_ARG_FLOW;
    a->flow = flow;
  }
  if (const uint64_t seq = e->seq.load(std::memory_order_relaxed)) {
    a->fields |= TRACEDB_ARG_SEQ;
    a->seq = seq - 1;
  }
}

Result StopImpl(void* handle) {
  Event* e = OwnEvent(handle);
  if (e == nullptr || e->state.load(std::memory_order_relaxed) != 1) return kSuccess;
  const uint32_t kind = e->kind.load(std::memory_order_relaxed);
  if (e->on_thread) {
    tracedb_end_ex(e->span_name, TRACEDB_CAT_NCCL, 0, nullptr);
    Free(e);
    return kSuccess;
  }
  tracedb_args a;
  const int64_t now = tracedb_now();
  switch (kind) {
    case kGroup:
      a.fields = 0;
      if (uint32_t comm = e->ctx->comm.load(std::memory_order_acquire)) {
        a.fields = TRACEDB_ARG_COMM;
        a.comm = comm;
      }
      tracedb_complete_ex(e->span_name, TRACEDB_CAT_NCCL,
                          MakeLane(e->ctx, &e->ctx->group_lane, " groups"), e->start,
                          now - e->start, &a);
      break;
    case kColl:
    case kP2p:
      break;  // recorded at start; its completion is its proxy ops' and kernel channels' end
    case kProxyOp:
    case kProxyStep: {
      FillTaskArgs(e, &a);
      a.fields |= TRACEDB_ARG_TAG | TRACEDB_ARG_BYTES;
      a.tag = e->tag;
      a.bytes = kind == kProxyOp ? e->bytes.load(std::memory_order_relaxed) : e->step_bytes;
      if (e->peer >= 0) {
        a.fields |= TRACEDB_ARG_PEER;
        a.peer = e->peer;
      }
      if (kind == kProxyStep && e->parent != nullptr) {
        e->parent->bytes.fetch_add(e->step_bytes, std::memory_order_relaxed);
      }
      if (kind == kProxyOp) ReleaseOpRow(e->ctx, e->channel, e->is_send, e->row);
      tracedb_complete_ex(e->span_name, TRACEDB_CAT_NCCL, e->lane, e->start, now - e->start, &a);
      break;
    }
    case kKernelCh: {
      FillTaskArgs(e, &a);
      int64_t ts = e->start;
      int64_t dur = now - e->start;
      int32_t tag = e->tag;
      if (e->gpu_start != 0 && e->gpu_stop >= e->gpu_start) {
        ts = e->ctx->gpu_clock.Map(e->gpu_start, e->start);
        dur = e->gpu_stop - e->gpu_start;
        tag |= 1 << 8;  // timed by the GPU
      }
      a.fields |= TRACEDB_ARG_TAG;
      a.tag = tag;
      uint32_t name = e->name.load(std::memory_order_relaxed);
      tracedb_complete_ex(name != 0 ? name : g->n_unknown, TRACEDB_CAT_NCCL, e->lane, ts, dur, &a);
      break;
    }
    case kProxyCtrl: {
      int which = 5;
      switch (e->last_state) {
        case kProxyCtrlIdle:
          which = 0;
          break;
        case kProxyCtrlActive:
          which = 1;
          break;
        case kProxyCtrlSleep:
          which = 2;
          break;
        case kProxyCtrlWakeup:
          which = 3;
          break;
        case kProxyCtrlAppend:
        case kProxyCtrlAppendEnd:
          which = 4;
          break;
        default:
          break;
      }
      a.fields = TRACEDB_ARG_TAG;
      a.tag = e->appended;
      tracedb_complete_ex(g->n_ctrl[which], TRACEDB_CAT_NCCL, e->lane, e->start, now - e->start,
                          &a);
      break;
    }
    case kNetPlugin:
      FillTaskArgs(e, &a);
      a.fields |= TRACEDB_ARG_TAG;
      a.tag = e->tag;
      tracedb_complete_ex(e->span_name, TRACEDB_CAT_NCCL, e->lane, e->start, now - e->start, &a);
      break;
    default:
      break;
  }
  Free(e);
  return kSuccess;
}

Result RecordStateImpl(void* handle, EventState state, const StateArgs& s) {
  Event* e = OwnEvent(handle);
  if (e == nullptr || e->state.load(std::memory_order_relaxed) != 1) return kSuccess;
  switch (e->kind.load(std::memory_order_relaxed)) {
    case kProxyOp:
      if (s.has_trans) e->bytes.store(s.trans, std::memory_order_relaxed);  // v3: running total
      break;
    case kProxyStep:
      if (s.has_trans) e->step_bytes = s.trans;
      break;
    case kProxyCtrl:
      e->last_state = state;
      if (s.has_appended) e->appended = s.appended;
      break;
    case kKernelCh:
      if (state == kKernelChStop && s.has_timer && s.ptimer != 0) {
        e->gpu_stop = static_cast<int64_t>(s.ptimer);
        e->ctx->gpu_clock.Observe(tracedb_now(), e->gpu_stop);
      }
      break;
    default:
      break;
  }
  return kSuccess;
}

Result FinalizeImpl(void* context) {
  Context* c = static_cast<Context*>(context);
  if (c == nullptr || g == nullptr) return kSuccess;
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(g->contexts_mu);
    for (Context*& slot : g->contexts) {
      if (slot == c) {
        slot = nullptr;
        last = --g->live_contexts == 0;
        break;
      }
    }
  }
  if (last) {
    // What the plugin could not record, as counters on the process's thread track.
    tracedb_counter_ex(g->n_dropped, TRACEDB_CAT_NCCL, 0,
                       static_cast<double>(g->dropped.load(std::memory_order_relaxed)));
    tracedb_counter_ex(g->n_foreign, TRACEDB_CAT_NCCL, 0,
                       static_cast<double>(g->foreign_parents.load(std::memory_order_relaxed)));
  }
  // The context is not freed: a late proxy event of this communicator may still name it.
  return kSuccess;
}

}  // namespace

Result InitContext(int version, bool has_comm, uint64_t comm_id, const char* comm_name, int nnodes,
                   int nranks, int rank, int* mask, void** context) {
  if (context == nullptr || mask == nullptr) return kInvalidArgument;
  if (!EnsureGlobal(nullptr)) return kInternalError;
  Context* c = new (std::nothrow) Context;
  if (c == nullptr) return kInternalError;
  c->version = version;
  if (has_comm) {
    c->nnodes = nnodes;
    c->nranks = nranks;
    c->rank = rank;
    c->comm_hash = comm_id;
    SetLabel(c, comm_name, comm_id, rank);
    c->comm.store(Fold(comm_id));
  }
  const Result r = Init(c, mask);
  if (r != kSuccess) {
    delete c;
    return r;
  }
  *context = c;
  return kSuccess;
}

Result StartEvent(void* context, void** handle, const Descr& d) {
  return StartImpl(context, handle, d);
}
Result StopEvent(void* handle) { return StopImpl(handle); }
Result RecordEventState(void* handle, EventState state, const StateArgs& s) {
  return RecordStateImpl(handle, state, s);
}
Result FinalizeContext(void* context) { return FinalizeImpl(context); }

uint64_t HandleKind(void* handle) {
  const Event* e = OwnEvent(handle);
  return e == nullptr ? 0 : e->kind.load(std::memory_order_relaxed);
}

}  // namespace tracedb::nccl
