// tracedb._tracedb_torch: PyTorch capture through an at::RecordFunction observer (libtorch 1.13).
//
// One global callback restricted to RecordScope::USER_SCOPE sees
//   - every c10d Work: ProcessGroupGloo (and NCCL, MPI, UCC) open a RecordFunction titled
//     "gloo:all_reduce", "gloo:send", ... with the input tensors (gloo's asynchronous work: when a
//     worker thread starts it), and end it from Work::finish() when it completes. Recorded as a
//     begin when it starts and an end when it completes (so that an operation that never
//     completes, a hang, is an open span), cat "comm", with bytes (the inputs' numel x element
//     size), the process group (`comm`), a per-group sequence number (`seq`, collectives only)
//     and the peer (p2p) or root (rooted collectives) as a group rank. DDP's Reducer issues its
//     bucket allreduces from C++, so they are seen the same way. Each operation in flight holds
//     one of the lanes "c10d 0", "c10d 1", ... so that overlapping asynchronous operations never
//     nest; a lane belongs to the thread that first wrote on it (its begins and ends then reach
//     compaction in the order written; TakeLane).
//   - torch.autograd.profiler.record_function scopes: "DistributedDataParallel.forward" becomes a
//     "forward" span; the first zero_grad or DDP forward (in grad mode) after an optimizer step
//     starts the next training step (tracedb_step: 0, 1, ...);
//     "Optimizer.step#SGD.step" becomes "optimizer.step", "Optimizer.zero_grad#..."
//     "optimizer.zero_grad"; any other user scope is recorded under its own name (cat "user").
// The process group and the peer are not in the RecordFunction, and gloo opens it only when a
// worker thread starts executing the operation (AsyncWork runs its "before" callback there, with
// the issuing thread's ThreadLocalState: at::wrapPropagateTLSState). So tracedb/torch.py's
// wrappers of the torch.distributed functions push a c10::ThreadLocalDebugInfo entry of our own
// kind around each call (Push/Pop) with the group and the peer; it reaches the worker thread with
// the rest of the state. Operations issued without one (DDP's Reducer, other C++ callers) belong
// to the default group given to Install().
// Sequence numbers follow the issue order, wherever an operation was issued from: the callback
// asks for ids (needsIds), which RecordFunction takes from a process-wide counter when it is
// constructed, i.e. at issue, in the issuing thread. When gloo's two worker threads start two
// operations of a group out of issue order, the later-issued one, still in flight, gives its
// number up to the earlier one (NumberInIssueOrder); the end carries the final number, which
// compaction keeps over the begin's. One case cannot be repaired: an operation that starts only
// after a later-issued one of its group has completed (its end, with the number it took, is
// written). Gloo's two
// workers make it rare, but a worker descheduled between taking an operation and starting it
// (a loaded machine) does it; such starts are counted (stats()["late_starts"]), and the numbers
// of the operations involved are then out of issue order.
//
// Thread safety: the callbacks run on any thread; the per-group counters and the lane pool are
// guarded by one mutex (held for a few instructions, once per communication operation); the
// pushed context is thread-local (and propagated by PyTorch itself to gloo's worker threads).
// Install/Remove are called with the GIL held.
// What is recorded and why: docs/python.md, "PyTorch capture".
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/util/hash.h"
#include "tracedb/recorder.h"

namespace {

constexpr int32_t kNoPeer = INT32_MIN;

// Our own kind of ThreadLocalDebugInfo entry: a value outside c10's DebugInfoKind list, so that
// no PyTorch code that looks up its own kinds ever finds (and casts) ours.
constexpr auto kCommInfoKind = static_cast<c10::DebugInfoKind>(0xA7);

// What a torch.distributed call pushed for the operation(s) it issues.
struct CommInfo : c10::DebugInfoBase {
  uint32_t comm = 0;
  int32_t peer = kNoPeer;
  int64_t issue_ts = 0;   // ns: when the call that issues one operation began (0: not such a call)
  bool suppress = false;  // tracedb's own traffic (clock sync) is not recorded
};

std::atomic<bool> g_installed{false};
at::CallbackHandle g_handle = 0;
std::atomic<uint32_t> g_default_comm{0};
std::atomic<int64_t> g_step{0};
// Set after optimizer.step (and at start): the next zero_grad or DDP forward in grad mode starts
// the next training step, whichever order the loop calls them in.
std::atomic<bool> g_step_pending{true};
std::atomic<uint64_t> g_ops{0};          // communication operations recorded (for tests)
std::atomic<uint64_t> g_renumbered{0};   // operations started out of issue order, renumbered
std::atomic<uint64_t> g_no_handle{0};    // collectives without a RecordFunction handle
std::atomic<uint64_t> g_late_starts{0};  // started after a later-issued one completed

struct Ctx;
// Per process group: the next collective sequence number, and the collectives started and not
// yet completed, by RecordFunction handle (issue order). Guarded by g_mu.
struct GroupSeq {
  uint64_t next = 0;
  std::map<uint64_t, Ctx*> in_flight;
  uint64_t max_done = 0;  // the largest handle completed (its number is written)
};
std::mutex g_mu;
std::unordered_map<uint32_t, GroupSeq> g_seq;
constexpr int kMaxLanes = 64;
uint32_t g_lane_ids[kMaxLanes] = {0};
uint64_t g_lanes_busy = 0;  // bit i: lane i holds an operation in flight (or is retired)
uint32_t g_lane_owner[kMaxLanes] = {0};  // the thread (ThreadToken) that writes lane i; 0: none
std::atomic<uint32_t> g_next_token{1};
std::atomic<uint64_t> g_retired_lanes{0};  // lanes an operation ended on from another thread

// A small number naming the calling thread, for lane ownership (never 0).
uint32_t ThreadToken() {
  thread_local uint32_t token = g_next_token.fetch_add(1, std::memory_order_relaxed);
  return token;
}

// Interned names, per thread (tracedb_intern takes a lock); looked up without building a string.
uint32_t Name(const char* s) {
  thread_local std::unordered_map<std::string, uint32_t, tracedb::engine::StringViewHash,
                                  std::equal_to<>>
      cache;
  auto it = cache.find(std::string_view(s));
  if (it != cache.end()) return it->second;
  const uint32_t id = tracedb_intern(s);
  cache.emplace(s, id);
  return id;
}

enum class OpKind : uint8_t { kCollective, kRooted, kP2p, kScope };

struct Ctx : at::ObserverContext {
  int64_t ts = 0;
  uint32_t name = 0;
  uint32_t cat = TRACEDB_CAT_USER;
  int lane_slot = -1;      // -1: no lane, one complete event on the ending thread's track
  uint32_t owner = 0;      // the thread that wrote the begin on the lane (ThreadToken)
  uint64_t handle = 0;     // RecordFunction handle: issue order (0: none, not renumbered)
  tracedb_args args = {};  // args.seq: written under g_mu until the operation completes
};

// Gives `ctx` (just started) the next sequence number of its group, then restores issue order
// among the group's operations in flight: if some issued after it started before it, the numbers
// they took are handed out again by handle. REQUIRES: g_mu held.
void NumberInIssueOrder(Ctx* ctx) {
  GroupSeq& g = g_seq[ctx->args.comm];
  ctx->args.seq = g.next++;
  if (ctx->handle == 0) {
    g_no_handle.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (ctx->handle < g.max_done) g_late_starts.fetch_add(1, std::memory_order_relaxed);
  auto it = g.in_flight.emplace(ctx->handle, ctx).first;
  if (std::next(it) == g.in_flight.end()) return;  // the usual case: issued last, started last
  g_renumbered.fetch_add(1, std::memory_order_relaxed);
  std::vector<uint64_t> seqs;
  for (auto j = it; j != g.in_flight.end(); ++j) seqs.push_back(j->second->args.seq);
  std::sort(seqs.begin(), seqs.end());
  size_t x = 0;
  for (auto j = it; j != g.in_flight.end(); ++j) j->second->args.seq = seqs[x++];
}

// "gloo:all_reduce" -> true (a c10d Work's profiling title).
bool IsC10dTitle(const char* n) {
  return std::strncmp(n, "gloo:", 5) == 0 || std::strncmp(n, "nccl:", 5) == 0 ||
         std::strncmp(n, "mpi:", 4) == 0 || std::strncmp(n, "ucc:", 4) == 0;
}

OpKind KindOf(const char* title) {
  const char* op = std::strchr(title, ':') + 1;
  if (std::strncmp(op, "send", 4) == 0 || std::strncmp(op, "recv", 4) == 0) return OpKind::kP2p;
  if (std::strcmp(op, "broadcast") == 0 || std::strcmp(op, "reduce") == 0 ||
      std::strcmp(op, "gather") == 0 || std::strcmp(op, "scatter") == 0) {
    return OpKind::kRooted;
  }
  return OpKind::kCollective;
}

uint64_t InputBytes(const at::RecordFunction& fn) {
  uint64_t bytes = 0;
  for (const c10::IValue& v : fn.inputs()) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined()) bytes += static_cast<uint64_t>(t.numel()) * t.element_size();
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) {
        if (t.defined()) bytes += static_cast<uint64_t>(t.numel()) * t.element_size();
      }
    }
  }
  return bytes;
}

// A free lane of the calling thread (else one no thread has written yet). Every event of a lane
// comes from its owner thread, so the lane's begins and ends reach compaction in the order they
// were written (each thread's buffer is written in order; buffers of different threads are not
// ordered against each other). -1: more than kMaxLanes needed at once.
int TakeLane() {
  const uint32_t me = ThreadToken();
  std::lock_guard<std::mutex> lock(g_mu);
  int fresh = -1;
  for (int i = 0; i < kMaxLanes; ++i) {
    if (g_lanes_busy & (uint64_t{1} << i)) continue;
    if (g_lane_owner[i] == me) {
      g_lanes_busy |= uint64_t{1} << i;
      return i;
    }
    if (fresh < 0 && g_lane_owner[i] == 0) fresh = i;
  }
  if (fresh < 0) return -1;
  if (g_lane_ids[fresh] == 0) {
    const std::string lane = "c10d " + std::to_string(fresh);
    g_lane_ids[fresh] = tracedb_lane(lane.c_str());
    if (g_lane_ids[fresh] == 0) return -1;
  }
  g_lane_owner[fresh] = me;
  g_lanes_busy |= uint64_t{1} << fresh;
  return fresh;
}

// Frees lane `slot` after its operation's end was written by thread `writer`. An end written by
// another thread than the lane's owner (a Work waited for on another thread) cannot be ordered
// against the owner's later events on the lane: the lane is retired (stays busy for good).
void ReleaseLane(int slot, uint32_t writer) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_lane_owner[slot] != writer) {
    g_retired_lanes.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  g_lanes_busy &= ~(uint64_t{1} << slot);
}

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  if (!TRACEDB_ACTIVE()) return nullptr;
  const char* n = fn.name();
  if (n == nullptr) return nullptr;
  auto ctx = std::make_unique<Ctx>();
  int64_t issued = 0;  // the issue time, when known (a torch.distributed call around it)
  if (IsC10dTitle(n)) {
    auto* info = static_cast<CommInfo*>(c10::ThreadLocalDebugInfo::get(kCommInfoKind));
    if (info != nullptr && info->suppress) return nullptr;
    if (info != nullptr) issued = info->issue_ts;
    const OpKind kind = KindOf(n);
    const uint32_t comm = info != nullptr ? info->comm : g_default_comm.load();
    ctx->name = Name(n);
    ctx->cat = TRACEDB_CAT_COMM;
    ctx->args.fields = TRACEDB_ARG_BYTES | TRACEDB_ARG_COMM;
    ctx->args.bytes = InputBytes(fn);
    ctx->args.comm = comm;
    if (kind != OpKind::kCollective && info != nullptr && info->peer != kNoPeer) {
      ctx->args.fields |= TRACEDB_ARG_PEER;
      ctx->args.peer = info->peer;
    }
    if (kind != OpKind::kP2p) {
      ctx->args.fields |= TRACEDB_ARG_SEQ;
      ctx->handle = fn.handle();
      std::lock_guard<std::mutex> lock(g_mu);
      NumberInIssueOrder(ctx.get());
    }
    ctx->lane_slot = TakeLane();
    g_ops.fetch_add(1, std::memory_order_relaxed);
    if (ctx->lane_slot >= 0) {
      // Written now, so that an operation that never completes (a hang) is an open span of the
      // trace, and the hang watchdog sees it; the end, at completion, carries the final
      // arguments (the sequence number may still be handed over: NumberInIssueOrder).
      ctx->owner = ThreadToken();
      ctx->ts = tracedb_now();
      tracedb_args begin_args;
      {
        std::lock_guard<std::mutex> lock(g_mu);
        begin_args = ctx->args;
      }
      tracedb_begin_ex(ctx->name, ctx->cat, g_lane_ids[ctx->lane_slot], &begin_args);
      return ctx;
    }
  } else if (std::strcmp(n, "DistributedDataParallel.forward") == 0) {
    if (c10::GradMode::is_enabled() && g_step_pending.exchange(false)) {
      tracedb_step(g_step.fetch_add(1));
    }
    ctx->name = Name("forward");
    ctx->cat = TRACEDB_CAT_COMPUTE;
  } else if (std::strncmp(n, "Optimizer.step#", 15) == 0) {
    g_step_pending = true;
    ctx->name = Name("optimizer.step");
    ctx->cat = TRACEDB_CAT_COMPUTE;
  } else if (std::strncmp(n, "Optimizer.zero_grad#", 20) == 0) {
    if (g_step_pending.exchange(false)) tracedb_step(g_step.fetch_add(1));
    ctx->name = Name("optimizer.zero_grad");
    ctx->cat = TRACEDB_CAT_COMPUTE;
  } else {
    ctx->name = Name(n);
  }
  ctx->ts = issued > 0 ? issued : tracedb_now();
  return ctx;
}

void OnEnd(const at::RecordFunction&, at::ObserverContext* base) {
  auto* ctx = static_cast<Ctx*>(base);
  if (ctx == nullptr) return;
  const int64_t now = tracedb_now();
  if (ctx->args.fields & TRACEDB_ARG_SEQ) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (ctx->handle != 0) {
      GroupSeq& g = g_seq[ctx->args.comm];
      g.in_flight.erase(ctx->handle);
      g.max_done = std::max(g.max_done, ctx->handle);
    }
  }
  if (ctx->lane_slot < 0) {
    tracedb_complete_ex(ctx->name, ctx->cat, 0, ctx->ts, now - ctx->ts,
                        ctx->args.fields ? &ctx->args : nullptr);
    return;
  }
  tracedb_args end_args;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    end_args = ctx->args;
  }
  tracedb_end_ex(ctx->name, ctx->cat, g_lane_ids[ctx->lane_slot], &end_args);
  ReleaseLane(ctx->lane_slot, ThreadToken());
}

// install(default_comm): registers the observer (idempotent).
PyObject* Install(PyObject*, PyObject* arg) {
  const unsigned long comm = PyLong_AsUnsignedLong(arg);
  if (comm == static_cast<unsigned long>(-1) && PyErr_Occurred()) return nullptr;
  g_default_comm.store(static_cast<uint32_t>(comm));
  if (!g_installed.exchange(true)) {
    try {
      g_handle = at::addGlobalCallback(at::RecordFunctionCallback(OnStart, OnEnd)
                                           .needsInputs(true)
                                           .needsIds(true)
                                           .scopes({at::RecordScope::USER_SCOPE}));
    } catch (const std::exception& e) {
      g_installed = false;
      PyErr_Format(PyExc_RuntimeError, "tracedb: cannot register the RecordFunction observer: %s",
                   e.what());
      return nullptr;
    }
  }
  Py_RETURN_NONE;
}

PyObject* Remove(PyObject*, PyObject*) {
  if (g_installed.exchange(false)) at::removeCallback(g_handle);
  Py_RETURN_NONE;
}

// push(comm, peer=None, issue=False, suppress=False): the context of the operations this thread
// issues until pop(); `peer` is a group rank; `issue`: the call issues one operation, which starts
// now (gloo only starts executing it later, on a worker thread).
PyObject* Push(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"comm", "peer", "issue", "suppress", nullptr};
  unsigned long comm = 0;
  PyObject* peer = Py_None;
  int issue = 0, suppress = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "k|Opp", const_cast<char**>(kw), &comm, &peer,
                                   &issue, &suppress)) {
    return nullptr;
  }
  auto info = std::make_shared<CommInfo>();
  info->comm = static_cast<uint32_t>(comm);
  if (peer != Py_None) {
    const long v = PyLong_AsLong(peer);
    if (v == -1 && PyErr_Occurred()) return nullptr;
    info->peer = static_cast<int32_t>(v);
  }
  info->suppress = suppress != 0;
  if (issue) info->issue_ts = tracedb_now();
  c10::ThreadLocalDebugInfo::_push(kCommInfoKind, std::move(info));
  Py_RETURN_NONE;
}

PyObject* Pop(PyObject*, PyObject*) {
  if (c10::ThreadLocalDebugInfo::get(kCommInfoKind) == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "tracedb: pop() without push()");
    return nullptr;
  }
  c10::ThreadLocalDebugInfo::_pop(kCommInfoKind);
  Py_RETURN_NONE;
}

// _number_check([("start"|"end", handle), ...]) -> {handle: seq}: runs the numbering of one
// group (a fresh one) on a made-up order of starts and ends, and returns the number each
// operation had when it ended. For tests of the renumbering, which real runs rarely exercise.
PyObject* NumberCheck(PyObject*, PyObject* events) {
  static uint32_t test_comm = 0xFFFF0000u;
  const uint32_t comm = test_comm++;
  PyObject* fast = PySequence_Fast(events, "a sequence of (op, handle)");
  if (fast == nullptr) return nullptr;
  std::map<uint64_t, std::unique_ptr<Ctx>> live;
  PyObject* out = PyDict_New();
  for (Py_ssize_t i = 0; out != nullptr && i < PySequence_Fast_GET_SIZE(fast); ++i) {
    const char* op = nullptr;
    unsigned long long handle = 0;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "sK", &op, &handle)) {
      Py_CLEAR(out);
      break;
    }
    std::lock_guard<std::mutex> lock(g_mu);
    if (std::strcmp(op, "start") == 0) {
      auto ctx = std::make_unique<Ctx>();
      ctx->args.comm = comm;
      ctx->handle = handle;
      NumberInIssueOrder(ctx.get());
      live[handle] = std::move(ctx);
    } else if (auto it = live.find(handle); it != live.end()) {
      g_seq[comm].in_flight.erase(handle);
      g_seq[comm].max_done = std::max<uint64_t>(g_seq[comm].max_done, handle);
      PyObject* k = PyLong_FromUnsignedLongLong(handle);
      PyObject* v = PyLong_FromUnsignedLongLong(it->second->args.seq);
      if (k == nullptr || v == nullptr || PyDict_SetItem(out, k, v) < 0) Py_CLEAR(out);
      Py_XDECREF(k);
      Py_XDECREF(v);
      live.erase(it);
    }
  }
  Py_DECREF(fast);
  std::lock_guard<std::mutex> lock(g_mu);
  g_seq.erase(comm);
  return out;
}

PyObject* Stats(PyObject*, PyObject*) {
  return Py_BuildValue("{sKsLsKsKsKsKsO}", "ops", static_cast<unsigned long long>(g_ops.load()),
                       "steps", static_cast<long long>(g_step.load()), "renumbered",
                       static_cast<unsigned long long>(g_renumbered.load()), "no_handle",
                       static_cast<unsigned long long>(g_no_handle.load()), "late_starts",
                       static_cast<unsigned long long>(g_late_starts.load()), "retired_lanes",
                       static_cast<unsigned long long>(g_retired_lanes.load()), "installed",
                       g_installed.load() ? Py_True : Py_False);
}

PyMethodDef kMethods[] = {
    {"install", Install, METH_O, "install(default_comm): register the RecordFunction observer."},
    {"remove", Remove, METH_NOARGS, "remove(): unregister it."},
    {"push", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Push)),
     METH_VARARGS | METH_KEYWORDS,
     "push(comm, peer=None, issue=False, suppress=False): context of the next operations."},
    {"pop", Pop, METH_NOARGS, "pop(): ends the innermost push()."},
    {"_number_check", NumberCheck, METH_O, "_number_check(events) -> {handle: seq} (tests)."},
    {"stats", Stats, METH_NOARGS,
     "stats() -> dict: operations, steps, renumbered, no_handle, late_starts and retired_lanes."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "tracedb._tracedb_torch",
                       "PyTorch capture: a RecordFunction observer (see tracedb.torch).", -1,
                       kMethods};

}  // namespace

extern "C" PyMODINIT_FUNC PyInit__tracedb_torch(void) { return PyModule_Create(&kModule); }
