// nccl_harness: drives libnccl-profiler-tracedb.so the way NCCL 2.24-2.28 does, without NCCL or
// a GPU. It dlopens the plugin, looks up ncclProfiler_v<N> and calls it as NCCL's core would:
// init per communicator, then per collective (v5) GroupApi > CollApi, KernelLaunch, the internal
// Group > Coll enqueue on the application thread, and on a separate "proxy" thread the ProxyOps
// (send and receive per channel) with their ProxySteps and state records, and the KernelCh events
// with GPU timer readings; a point-to-point send; a ProxyOp that a PXN proxy reports for another
// process (foreign pid, a parent pointer that must not be dereferenced); a ProxyCtrl event; stops
// of null handles; finalize.
//
// It writes what it handed to the plugin, one fact per line, to EXPECT_FILE, so that the test
// compares the compacted database with what was emitted, not with the plugin's own reading.
//
// usage: nccl_harness PLUGIN.so VERSION(3|4|5) EXPECT_FILE [full|pool|window|hostile|stress]
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "recorder/nccl/profiler_abi.h"
#include "tracedb/recorder.h"

using namespace tracedb::nccl;

namespace {

constexpr uint64_t kCommId = 0xABCDEF0123456789ull;
constexpr int kColls = 6;
constexpr int kChannels = 2;
constexpr int kStepsPerOp = 2;
constexpr size_t kStepBytes = 512;
constexpr int64_t kGpuAhead = 1700000000000000000ll;  // GPU globaltimer - host clock

FILE* out = nullptr;
int version = 5;
void* api = nullptr;  // ProfilerV3/V4/V5*
int rank = 0;
int nranks = 2;

// One descriptor type big enough for every version, filled per version by Call().
struct Desc {
  uint64_t type = 0;
  void* parent = nullptr;
  // tasks
  uint64_t seq = 0;
  const char* func = nullptr;
  size_t count = 0;
  int root = -1;
  int peer = -1;
  const char* datatype = nullptr;
  uint8_t channels = 0;
  uint8_t warps = 0;
  const char* algo = nullptr;
  const char* proto = nullptr;
  void* parent_group = nullptr;
  // proxy / kernel
  pid_t pid = 0;
  uint8_t channel = 0;
  int n_steps = 0;
  int chunk = 0;
  int is_send = 0;
  int step = 0;
  uint64_t ptimer = 0;
};

void* ctx = nullptr;

void* Start(const Desc& d) {
  void* h = nullptr;
  if (version == 5) {
    EventDescrV5 e;
    memset(&e, 0, sizeof(e));
    e.type = d.type;
    e.parentObj = d.parent;
    e.rank = rank;
    switch (d.type) {
      case kGroupApi:
        e.groupApi.groupDepth = 1;
        break;
      case kCollApi:
        e.collApi = {d.func, d.count, d.datatype, d.root, reinterpret_cast<void*>(0x5000), false};
        break;
      case kP2pApi:
        e.p2pApi = {d.func, d.count, d.datatype, reinterpret_cast<void*>(0x5000), false};
        break;
      case kKernelLaunch:
        e.kernelLaunch.stream = reinterpret_cast<void*>(0x5000);
        break;
      case kColl:
        e.coll = {d.seq,      d.func,     nullptr, nullptr, d.count, d.root,
                  d.datatype, d.channels, d.warps, d.algo,  d.proto, d.parent_group};
        break;
      case kP2p:
        e.p2p = {d.func, nullptr, d.datatype, d.count, d.peer, d.channels, d.parent_group};
        break;
      case kProxyOp:
        e.proxyOp = {d.pid, d.channel, d.peer, d.n_steps, d.chunk, d.is_send};
        break;
      case kProxyStep:
        e.proxyStep.step = d.step;
        break;
      case kKernelCh:
        e.kernelCh = {d.channel, d.ptimer};
        break;
      default:
        break;
    }
    static_cast<ProfilerV5*>(api)->startEvent(ctx, &h, &e);
  } else if (version == 4) {
    EventDescrV4 e;
    memset(&e, 0, sizeof(e));
    e.type = static_cast<uint8_t>(d.type);
    e.parentObj = d.parent;
    e.rank = rank;
    switch (d.type) {
      case kColl:
        e.coll = {d.seq,      d.func,     nullptr, nullptr, d.count, d.root,
                  d.datatype, d.channels, d.warps, d.algo,  d.proto};
        break;
      case kP2p:
        e.p2p = {d.func, nullptr, d.datatype, d.count, d.peer, d.channels};
        break;
      case kProxyOp:
        e.proxyOp = {d.pid, d.channel, d.peer, d.n_steps, d.chunk, d.is_send};
        break;
      case kProxyStep:
        e.proxyStep.step = d.step;
        break;
      case kKernelCh:
        e.kernelCh = {d.channel, d.ptimer};
        break;
      default:
        break;
    }
    static_cast<ProfilerV4*>(api)->startEvent(ctx, &h, &e);
  } else {
    EventDescrV3 e;
    memset(&e, 0, sizeof(e));
    e.type = static_cast<uint8_t>(d.type);
    e.parentObj = d.parent;
    e.rank = rank;
    switch (d.type) {
      case kColl:
        e.coll = {"dp",   kCommId,    d.seq,      d.func,  nullptr, nullptr, d.count,
                  d.root, d.datatype, d.channels, d.warps, d.algo,  d.proto};
        break;
      case kP2p:
        e.p2p = {"dp", kCommId, d.func, nullptr, d.datatype, d.count, d.peer};
        break;
      case kProxyOp:
        e.proxyOp = {d.pid, d.channel, d.peer, d.n_steps, d.chunk, d.is_send};
        break;
      case kProxyStep:
        e.proxyStep.step = d.step;
        break;
      case kKernelCh:
        e.kernelCh.channelId = d.channel;
        break;
      default:
        break;
    }
    static_cast<ProfilerV3*>(api)->startEvent(ctx, &h, &e);
  }
  return h;
}

void Stop(void* h) {
  if (version == 5)
    static_cast<ProfilerV5*>(api)->stopEvent(h);
  else if (version == 4)
    static_cast<ProfilerV4*>(api)->stopEvent(h);
  else
    static_cast<ProfilerV3*>(api)->stopEvent(h);
}

// A state record: transfer size (ProxyStep in v4/v5, ProxyOp running total in v3), appended
// proxy ops (ProxyCtrl), or a GPU timer (KernelCh stop).
void State(void* h, EventState s, uint64_t value, int kind) {
  if (version >= 4) {
    EventStateArgsV4 a;
    memset(&a, 0, sizeof(a));
    if (kind == kProxyStep) a.proxyStep.transSize = value;
    if (kind == kProxyCtrl) a.proxyCtrl.appendedProxyOps = static_cast<int>(value);
    if (kind == kKernelCh) a.kernelCh.pTimer = value;
    if (version == 5)
      static_cast<ProfilerV5*>(api)->recordEventState(h, s, &a);
    else
      static_cast<ProfilerV4*>(api)->recordEventState(h, s, &a);
  } else {
    EventStateArgsV3 a;
    memset(&a, 0, sizeof(a));
    if (kind == kProxyOp) a.proxyOp.transSize = value;
    if (kind == kProxyCtrl) a.proxyCtrl.appendedProxyOps = static_cast<int>(value);
    static_cast<ProfilerV3*>(api)->recordEventState(h, s, &a);
  }
}

// A tree receives from two children at once on one channel: two receive ops in flight together,
// each with a step, as NCCL's proxy reports them. They must land on two rows.
void OverlappingReceives(void* task, int seq) {
  const int ch = 5;  // a channel of its own, so that its facts are unambiguous
  void* ops[2];
  void* steps[2];
  for (int k = 0; k < 2; ++k) {
    Desc d;
    d.type = kProxyOp;
    d.parent = task;
    d.pid = getpid();
    d.channel = static_cast<uint8_t>(ch);
    d.peer = 10 + k;
    d.n_steps = 1;
    d.is_send = 0;
    ops[k] = Start(d);
    Desc sd;
    sd.type = kProxyStep;
    sd.parent = ops[k];
    sd.step = 0;
    steps[k] = Start(sd);
  }
  for (int k = 0; k < 2; ++k) {
    const size_t bytes = 100 + static_cast<size_t>(k);
    if (version >= 4) {
      State(steps[k], kProxyStepRecvWait, bytes, kProxyStep);
    } else {
      State(ops[k], kProxyOpRecvReceived, bytes, kProxyOp);
    }
    Stop(steps[k]);
    Stop(ops[k]);
    fprintf(out, "step recv %d %d 0 %zu %d\n", seq, ch, version >= 4 ? bytes : size_t{0}, k);
    fprintf(out, "proxy recv %d %d %d %zu %d\n", seq, ch, 10 + k, bytes, k);
  }
}

// The proxy thread's work for one task: per channel a send and a receive op, each with its steps,
// then the kernel channels with GPU timers.
void ProxyWork(void* task, int seq, const char* func) {
  const int peer = (rank + 1) % nranks;
  for (int ch = 0; ch < kChannels; ++ch) {
    for (int send = 1; send >= 0; --send) {
      Desc d;
      d.type = kProxyOp;
      d.parent = task;
      d.pid = getpid();
      d.channel = static_cast<uint8_t>(ch);
      d.peer = peer;
      d.n_steps = kStepsPerOp;
      d.chunk = static_cast<int>(kStepBytes);
      d.is_send = send;
      void* op = Start(d);
      size_t total = 0;
      for (int s = 0; s < kStepsPerOp; ++s) {
        Desc sd;
        sd.type = kProxyStep;
        sd.parent = op;
        sd.step = s;
        void* step = Start(sd);
        const size_t bytes = kStepBytes + static_cast<size_t>(s);
        total += bytes;
        if (version >= 4) {
          State(step, send ? kProxyStepSendWait : kProxyStepRecvWait, bytes, kProxyStep);
        } else {
          State(op, send ? kProxyOpSendTransmitted : kProxyOpRecvReceived, total, kProxyOp);
        }
        Stop(step);
        fprintf(out, "step %s %d %d %d %zu 0\n", send ? "send" : "recv", seq, ch, s,
                version >= 4 ? bytes : static_cast<size_t>(0));
      }
      if (version >= 4) State(op, kProxyOpInProgressV4, 0, kProxyOp);
      Stop(op);
      fprintf(out, "proxy %s %d %d %d %zu 0\n", send ? "send" : "recv", seq, ch, peer, total);
    }
    // The kernel channel ran in the past: its GPU timer readings (a clock kGpuAhead ns ahead
    // of the host's) end 1 us before NCCL's proxy reports them, as a real proxy sees them late.
    usleep(200);
    Desc kd;
    kd.type = kKernelCh;
    kd.parent = task;
    kd.channel = static_cast<uint8_t>(ch);
    const int64_t gpu_dur = 5000 + seq * 100 + ch * 7;
    const int64_t gpu_stop = tracedb_now() + kGpuAhead - 1000;
    const int64_t gpu_start = gpu_stop - gpu_dur;
    kd.ptimer = version >= 4 ? static_cast<uint64_t>(gpu_start) : 0;
    void* k = Start(kd);
    if (version >= 4) State(k, kKernelChStop, static_cast<uint64_t>(gpu_stop), kKernelCh);
    Stop(k);
    fprintf(out, "kernel %d %d %s %lld\n", seq, ch, func,
            version >= 4 ? static_cast<long long>(gpu_dur) : -1ll);
  }
}

int RunFull(int argc_mode) {
  const int peer = (rank + 1) % nranks;
  for (int i = 0; i < kColls; ++i) {
    tracedb_step(i);
    const char* func = i % 3 == 2 ? "Broadcast" : "AllReduce";
    const int root = i % 3 == 2 ? 1 : -1;
    const size_t count = 1024 * static_cast<size_t>(i + 1);
    void* gapi = nullptr;
    void* capi = nullptr;
    if (version == 5) {
      Desc g;
      g.type = kGroupApi;
      gapi = Start(g);
      Desc c;
      c.type = kCollApi;
      c.parent = gapi;
      c.func = func;
      c.count = count;
      c.datatype = "ncclFloat32";
      c.root = root;
      capi = Start(c);
      Stop(capi);
      State(gapi, kGroupStartApiStop, 0, kGroupApi);
      State(gapi, kGroupEndApiStart, 0, kGroupApi);
      Desc kl;
      kl.type = kKernelLaunch;
      kl.parent = gapi;
      Stop(Start(kl));
    }
    Desc g;
    g.type = kGroup;
    void* group = Start(g);
    Desc c;
    c.type = kColl;
    c.parent = version == 5 ? capi : group;
    c.parent_group = group;
    c.seq = static_cast<uint64_t>(i);
    c.func = func;
    c.count = count;
    c.root = root;
    c.datatype = "ncclFloat32";
    c.channels = kChannels;
    c.warps = 16;
    c.algo = i % 2 == 0 ? "RING" : "TREE";
    c.proto = i % 2 == 0 ? "LL128" : "SIMPLE";
    void* coll = Start(c);
    Stop(coll);  // enqueued: the real completion comes from the proxy and the kernel
    Stop(group);
    if (version == 5) Stop(gapi);
    fprintf(out, "coll %d %s %zu %d %s %s\n", i, func, count * 4, root, c.algo, c.proto);
    // The proxy thread, as NCCL's, reports this task after it was enqueued.
    std::thread proxy([&] {
      ProxyWork(coll, i, func);
      if (i % 2 == 1) OverlappingReceives(coll, i);  // the TREE collectives
    });
    proxy.join();
  }
  // A point-to-point send.
  {
    void* gapi = nullptr;
    if (version == 5) {
      Desc ga;
      ga.type = kGroupApi;
      gapi = Start(ga);
      Desc pa;
      pa.type = kP2pApi;
      pa.parent = gapi;
      pa.func = "Send";
      pa.count = 300;
      pa.datatype = "ncclInt64";
      Stop(Start(pa));
    }
    Desc g;
    g.type = kGroup;
    void* group = Start(g);
    Desc p;
    p.type = kP2p;
    p.parent = group;
    p.parent_group = group;
    p.func = "Send";
    p.count = 300;
    p.datatype = "ncclInt64";
    p.peer = peer;
    p.channels = 1;
    Stop(Start(p));
    Stop(group);
    if (version == 5) Stop(gapi);
    fprintf(out, "p2p Send %d 2400\n", peer);
  }
  // PXN: a proxy op reported on behalf of another process; its parent pointer is meaningless
  // here (an unmapped address: dereferencing it would crash the harness).
  {
    Desc d;
    d.type = kProxyOp;
    d.parent = reinterpret_cast<void*>(0x10);
    d.pid = getpid() + 100000;
    d.channel = 1;
    d.peer = peer;
    d.n_steps = 1;
    d.is_send = 1;
    void* op = Start(d);
    Stop(op);
    fprintf(out, "pxn 1\n");
  }
  // The proxy thread's own activity.
  {
    Desc d;
    d.type = kProxyCtrl;
    void* h = Start(d);
    State(h, kProxyCtrlAppend, 3, kProxyCtrl);
    Stop(h);
    fprintf(out, "ctrl ProxyAppend 3\n");
  }
  // NCCL passes the null handle of a dropped event back: ignored.
  Stop(nullptr);
  State(nullptr, kProxyStepSendWait, 1, kProxyStep);
  (void)argc_mode;
  return 0;
}

// More live events than the pool holds: the extra ones get a null handle and are counted.
int RunPool() {
  void* handles[40];
  int nonnull = 0;
  for (int i = 0; i < 40; ++i) {
    Desc d;
    d.type = kProxyCtrl;
    handles[i] = Start(d);
    if (handles[i] != nullptr) ++nonnull;
  }
  for (void* h : handles) Stop(h);
  fprintf(out, "handles %d\ndropped %d\n", nonnull, 40 - nonnull);
  return 0;
}

// Proxy threads of several communicators at once against a small pool: every thread keeps 80
// ops in flight, more than the 64 slots, so the pool refuses some whatever the scheduling. Each
// thread counts the handles it got; recorded + dropped must equal what was started.
int RunStress() {
  constexpr int kThreads = 4, kRounds = 100, kInFlight = 80;
  std::atomic<long> got{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      void* h[kInFlight];
      for (int r = 0; r < kRounds; ++r) {
        for (int i = 0; i < kInFlight; ++i) {
          Desc d;
          d.type = kProxyOp;
          d.pid = getpid();
          d.channel = static_cast<uint8_t>(t);
          d.peer = i;
          d.is_send = 1;
          h[i] = Start(d);
          (h[i] != nullptr ? got : refused).fetch_add(1);
        }
        for (int i = kInFlight; i-- > 0;) Stop(h[i]);
      }
    });
  }
  for (auto& th : threads) th.join();
  tracedb_counters counters;
  tracedb_get_counters(&counters);
  fprintf(out, "started %d\nrecorded %ld\nrefused %ld\nrecorder_dropped %llu\n",
          kThreads * kRounds * kInFlight, got.load(), refused.load(),
          static_cast<unsigned long long>(counters.dropped));
  return 0;
}

// What a buggy or newer NCCL might pass: null strings, an out-of-range channel, a misaligned
// handle, an event type this plugin does not know, timers that run backwards. Nothing crashes;
// the facts say what must be recorded.
int RunHostile() {
  Desc c;
  c.type = kColl;
  c.seq = 0;  // func, datatype, algo, proto: all null
  c.count = 1000;
  void* coll = Start(c);
  Stop(coll);
  fprintf(out, "hostile_coll_unknown 1\n");
  Desc op;
  op.type = kProxyOp;
  op.parent = static_cast<char*>(coll) + 8;  // inside the pool, but not an event
  op.pid = getpid();
  op.channel = 200;  // NCCL has at most 64 channels
  op.peer = 1;
  op.is_send = 1;
  void* h = Start(op);
  Stop(static_cast<char*>(h) + 8);  // a misaligned handle: ignored
  Stop(h);
  fprintf(out, "hostile_op_clamped 1\n");
  Desc unknown;
  unknown.type = uint64_t{1} << 20;
  fprintf(out, "hostile_unknown_type_handle %d\n", Start(unknown) != nullptr ? 1 : 0);
  if (version >= 4) {
    Desc k;
    k.type = kKernelCh;
    k.parent = coll;
    k.channel = 3;
    k.ptimer = 5000000;
    void* kh = Start(k);
    State(kh, kKernelChStop, 4000000, kKernelCh);  // stop before start: host times are used
    Stop(kh);
    fprintf(out, "hostile_kernel_backwards 1\n");
  }
  State(nullptr, kKernelChStop, 1, kKernelCh);
  if (version == 5) {
    static_cast<ProfilerV5*>(api)->startEvent(ctx, nullptr, nullptr);
    void* hh = reinterpret_cast<void*>(0x1);
    static_cast<ProfilerV5*>(api)->startEvent(ctx, &hh, nullptr);
    fprintf(out, "hostile_null_descr_handle %d\n", hh != nullptr ? 1 : 0);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s PLUGIN.so VERSION EXPECT_FILE [full|pool|window|hostile|stress]\n",
            argv[0]);
    return 2;
  }
  version = atoi(argv[2]);
  const std::string mode = argc > 4 ? argv[4] : "full";
  rank = tracedb_rank();
  nranks = tracedb_world_size();
  out = fopen(argv[3], "w");
  if (out == nullptr) {
    perror(argv[3]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  const std::string sym = "ncclProfiler_v" + std::to_string(version);
  api = dlsym(lib, sym.c_str());
  if (api == nullptr) {
    fprintf(stderr, "dlsym %s: %s\n", sym.c_str(), dlerror());
    return 2;
  }
  fprintf(out, "name %s\n", *static_cast<const char**>(api));
  int mask = 0;
  int rc;
  if (version == 5) {
    rc = static_cast<ProfilerV5*>(api)->init(&ctx, kCommId, &mask, "dp", 1, nranks, rank, nullptr);
  } else if (version == 4) {
    rc = static_cast<ProfilerV4*>(api)->init(&ctx, &mask, "dp", kCommId, 1, nranks, rank, nullptr);
  } else {
    rc = static_cast<ProfilerV3*>(api)->init(&ctx, &mask);
  }
  fprintf(out, "init %d\nmask %d\n", rc, mask);
  if (rc != 0) {
    fclose(out);
    return 0;
  }
  if (mode == "pool") {
    RunPool();
  } else if (mode == "stress") {
    RunStress();
  } else if (mode == "hostile") {
    RunHostile();
  } else if (mode == "window") {
    // TRACEDB_START_STEP/END_STEP select steps; the mask follows the window.
    for (int i = 0; i < 5; ++i) {
      tracedb_step(i);
      Desc g;
      g.type = kGroup;
      void* group = Start(g);
      fprintf(out, "window %d %d %d\n", i, mask, group != nullptr ? 1 : 0);
      Desc c;
      c.type = kColl;
      c.parent = group;
      c.seq = static_cast<uint64_t>(i);
      c.func = "AllReduce";
      c.count = 8;
      c.datatype = "ncclFloat32";
      c.algo = "RING";
      c.proto = "LL";
      Stop(Start(c));
      Stop(group);
    }
  } else {
    RunFull(0);
  }
  if (version == 5)
    static_cast<ProfilerV5*>(api)->finalize(ctx);
  else if (version == 4)
    static_cast<ProfilerV4*>(api)->finalize(ctx);
  else
    static_cast<ProfilerV3*>(api)->finalize(ctx);
  fclose(out);
  return tracedb_stop() == TRACEDB_OK ? 0 : 1;
}
