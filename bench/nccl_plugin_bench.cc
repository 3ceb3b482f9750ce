// NCCL profiler plugin benchmark (measures; not a test). Loads libnccl-profiler-tracedb.so with
// dlopen, as NCCL does, and times ncclProfiler_v5 calls in the harness, recording into a
// temporary directory. One "event" is what NCCL pays per profiled event: startEvent + stopEvent
// (+ the recordEventState calls the event type gets). Prints medians over repetitions of batches
// (the flush between batches is not timed) for:
//   - a collective task (Coll, child of a Group): its issue instant;
//   - a ProxyOp (span on its channel lane, parent: the task);
//   - a ProxyStep with one state record (transfer size);
//   - a KernelCh with its stop timer (GPU-timed span, clock mapping);
//   - a CollApi on the calling thread (begin/end);
//   - a whole collective as NCCL reports it with the default mask (GroupApi, CollApi,
//     KernelLaunch, Group, Coll, 2 channels x (send + recv ProxyOp, KernelCh)): per event;
//   - the same calls while the recorder is stopped (what remains outside the step window);
// and beside them the recorder's own span (tracedb_begin + tracedb_end) and two clock reads, with
// the ratios to the 100 ns target.
//
// Usage: nccl_plugin_bench PLUGIN.so [--reps N] [--batch N] [--dir DIR]
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "recorder/nccl/profiler_abi.h"
#include "tracedb/recorder.h"

using namespace tracedb::nccl;

namespace {

using Clock = std::chrono::steady_clock;
ProfilerV5* P = nullptr;
void* ctx = nullptr;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ns per event: `body(i)` performs `events_per_call` events; run `batch` calls per repetition.
double Measure(int reps, int batch, int events_per_call, const std::function<void(int)>& body) {
  std::vector<double> per;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < batch; ++i) body(i);
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    per.push_back(ns / (static_cast<double>(batch) * events_per_call));
    tracedb_flush();
  }
  return Median(per);
}

void* Start(EventDescrV5* d) {
  void* h = nullptr;
  P->startEvent(ctx, &h, d);
  return h;
}

EventDescrV5 Descr(uint64_t type, void* parent) {
  EventDescrV5 d;
  memset(&d, 0, sizeof(d));
  d.type = type;
  d.parentObj = parent;
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLUGIN.so [--reps N] [--batch N] [--dir DIR]\n", argv[0]);
    return 2;
  }
  int reps = 9;
  int batch = 16384;
  std::string dir = "/tmp/tracedb-nccl-bench-" + std::to_string(getpid());
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  P = static_cast<ProfilerV5*>(dlsym(lib, "ncclProfiler_v5"));
  if (P == nullptr) {
    fprintf(stderr, "no ncclProfiler_v5 in %s\n", argv[1]);
    return 2;
  }
  if (tracedb_start(dir.c_str()) != TRACEDB_OK) {
    fprintf(stderr, "cannot record into %s\n", dir.c_str());
    return 2;
  }
  int mask = 0;
  if (P->init(&ctx, 0x1234567890abcdefull, &mask, "bench", 1, 8, 0, nullptr) != kSuccess) {
    fprintf(stderr, "init failed\n");
    return 2;
  }

  // Warm up: lanes and names are created on first use.
  EventDescrV5 group_d = Descr(kGroup, nullptr);
  void* group = Start(&group_d);
  EventDescrV5 coll_d = Descr(kColl, group);
  coll_d.coll.func = "AllReduce";
  coll_d.coll.count = 1 << 20;
  coll_d.coll.datatype = "ncclFloat32";
  coll_d.coll.algo = "RING";
  coll_d.coll.proto = "SIMPLE";
  coll_d.coll.nChannels = 2;
  coll_d.coll.root = -1;
  void* task = Start(&coll_d);
  const pid_t pid = getpid();

  const double coll = Measure(reps, batch, 1, [&](int i) {
    coll_d.coll.seqNumber = static_cast<uint64_t>(i);
    P->stopEvent(Start(&coll_d));
  });
  const double proxy_op = Measure(reps, batch, 1, [&](int i) {
    EventDescrV5 d = Descr(kProxyOp, task);
    d.proxyOp = {pid, static_cast<uint8_t>(i & 1), 1, 4, 1 << 17, 1};
    P->stopEvent(Start(&d));
  });
  EventDescrV5 op_d = Descr(kProxyOp, task);
  op_d.proxyOp = {pid, 0, 1, 4, 1 << 17, 1};
  void* op = Start(&op_d);
  const double proxy_step = Measure(reps, batch, 1, [&](int i) {
    EventDescrV5 d = Descr(kProxyStep, op);
    d.proxyStep.step = i;
    void* h = Start(&d);
    EventStateArgsV5 a;
    a.proxyStep.transSize = 1 << 17;
    P->recordEventState(h, kProxyStepSendWait, &a);
    P->stopEvent(h);
  });
  const double kernel_ch = Measure(reps, batch, 1, [&](int i) {
    EventDescrV5 d = Descr(kKernelCh, task);
    const uint64_t gpu = 1700000000000000000ull + static_cast<uint64_t>(i) * 10000;
    d.kernelCh = {static_cast<uint8_t>(i & 1), gpu};
    void* h = Start(&d);
    EventStateArgsV5 a;
    a.kernelCh.pTimer = gpu + 5000;
    P->recordEventState(h, kKernelChStop, &a);
    P->stopEvent(h);
  });
  const double coll_api = Measure(reps, batch, 1, [&](int) {
    EventDescrV5 d = Descr(kCollApi, nullptr);
    d.collApi.func = "AllReduce";
    d.collApi.count = 1 << 20;
    d.collApi.datatype = "ncclFloat32";
    d.collApi.root = -1;
    P->stopEvent(Start(&d));
  });
  // A whole collective with the default mask: 5 host events + 2 channels x 3 = 11 events.
  auto whole = [&](int i) {
    EventDescrV5 ga = Descr(kGroupApi, nullptr);
    void* gapi = Start(&ga);
    EventDescrV5 ca = Descr(kCollApi, gapi);
    ca.collApi.func = "AllReduce";
    ca.collApi.count = 1 << 20;
    ca.collApi.datatype = "ncclFloat32";
    ca.collApi.root = -1;
    void* capi = Start(&ca);
    P->stopEvent(capi);
    EventDescrV5 kl = Descr(kKernelLaunch, gapi);
    P->stopEvent(Start(&kl));
    EventDescrV5 gd = Descr(kGroup, nullptr);
    void* g = Start(&gd);
    EventDescrV5 cd = coll_d;
    cd.parentObj = capi;
    cd.coll.parentGroup = g;
    cd.coll.seqNumber = static_cast<uint64_t>(i);
    void* t = Start(&cd);
    P->stopEvent(t);
    P->stopEvent(g);
    P->stopEvent(gapi);
    for (int ch = 0; ch < 2; ++ch) {
      for (int send = 0; send < 2; ++send) {
        EventDescrV5 d = Descr(kProxyOp, t);
        d.proxyOp = {pid, static_cast<uint8_t>(ch), 1, 4, 1 << 17, send};
        P->stopEvent(Start(&d));
      }
      EventDescrV5 k = Descr(kKernelCh, t);
      const uint64_t gpu = 1700000000000000000ull + static_cast<uint64_t>(i) * 10000;
      k.kernelCh = {static_cast<uint8_t>(ch), gpu};
      void* h = Start(&k);
      EventStateArgsV5 a;
      a.kernelCh.pTimer = gpu + 5000;
      P->recordEventState(h, kKernelChStop, &a);
      P->stopEvent(h);
    }
  };
  const double per_event_whole = Measure(reps, batch / 11, 11, whole);

  // The recorder's own floor: a span, and two clock reads.
  const uint32_t span_name = tracedb_intern("bench span");
  const double span = Measure(reps, batch, 1, [&](int) {
    tracedb_begin(span_name);
    tracedb_end(span_name);
  });
  const double two_clocks = Measure(reps, batch, 1, [&](int) {
    timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_MONOTONIC, &b);
    asm volatile("" : : "r"(&a), "r"(&b) : "memory");
  });

  tracedb_counters counters;
  tracedb_get_counters(&counters);
  P->stopEvent(op);
  P->stopEvent(task);
  P->stopEvent(group);
  tracedb_stop();
  // Stopped: the plugin refuses events (null handle) after one check.
  const double stopped = Measure(reps, batch, 1, [&](int i) {
    coll_d.coll.seqNumber = static_cast<uint64_t>(i);
    P->stopEvent(Start(&coll_d));
  });
  P->finalize(ctx);
  std::filesystem::remove_all(dir);

  printf(
      "NCCL profiler plugin, ns per event (startEvent + stopEvent [+ state]), medians of %d x %d\n",
      reps, batch);
  printf("  %-44s %8.1f ns\n", "Coll (issue instant)", coll);
  printf("  %-44s %8.1f ns\n", "ProxyOp (span)", proxy_op);
  printf("  %-44s %8.1f ns\n", "ProxyStep + state (span)", proxy_step);
  printf("  %-44s %8.1f ns\n", "KernelCh + stop timer (GPU-timed span)", kernel_ch);
  printf("  %-44s %8.1f ns\n", "CollApi (begin/end on the thread)", coll_api);
  printf("  %-44s %8.1f ns\n", "whole collective, default mask, per event", per_event_whole);
  printf("  %-44s %8.1f ns\n", "recorder stopped (outside the window)", stopped);
  printf("peers in the same run\n");
  printf("  %-44s %8.1f ns\n", "recorder span (tracedb_begin + tracedb_end)", span);
  printf("  %-44s %8.1f ns\n", "two clock_gettime(CLOCK_MONOTONIC)", two_clocks);
  const double worst = std::max({coll, proxy_op, proxy_step, kernel_ch, coll_api, per_event_whole});
  printf("ratios\n");
  printf("  worst event / 100 ns target               %8.2f\n", worst / 100.0);
  printf("  whole collective per event / 100 ns target %8.2f\n", per_event_whole / 100.0);
  printf("  whole collective per event / recorder span %8.2f\n", per_event_whole / span);
  printf("events written %llu, dropped %llu\n", static_cast<unsigned long long>(counters.written),
         static_cast<unsigned long long>(counters.dropped));
  return 0;
}
