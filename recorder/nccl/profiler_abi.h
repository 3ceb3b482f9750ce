// The NCCL profiler plugin ABI, versions 3, 4 and 5, declared by tracedb from NCCL's documented
// interface (ext-profiler/README.md and the versioned descriptors of NCCL 2.23 to 2.28). NCCL does
// not install these headers; a plugin carries its own declarations, and they must match NCCL's
// memory layout exactly: the static_asserts at the end pin the offsets that NCCL writes.
//
// Everything here is plain data and function-pointer types, in the order NCCL lays them out.
// NCCL loads `ncclProfiler_v5`, then `_v4`, `_v3` (docs/gpu-capture.md "How NCCL loads it").
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

namespace tracedb::nccl {

// ncclResult_t: a C enum, int-sized. The plugin returns kSuccess from every call except a
// failing init (which makes NCCL disable the plugin).
enum Result : int { kSuccess = 0, kInternalError = 3, kInvalidArgument = 4 };

// ncclDebugLogger_t: NCCL's logger (level, subsystem flags, file, line, printf format).
using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line,
                             const char* fmt, ...);

// Event types: the bits of the activation mask and the `type` of a descriptor.
enum EventType : uint64_t {
  kGroup = 1u << 0,         // a group of tasks launched together (internal)
  kColl = 1u << 1,          // one collective task
  kP2p = 1u << 2,           // one point-to-point task
  kProxyOp = 1u << 3,       // the proxy's work for one task on one channel and peer
  kProxyStep = 1u << 4,     // one network transfer (step) of a proxy op
  kProxyCtrl = 1u << 5,     // the proxy thread's own activity (idle, sleep, append)
  kKernelCh = 1u << 6,      // one channel of the GPU kernel, with GPU timer readings (v4+)
  kNetPlugin = 1u << 7,     // an event defined by the network plugin
  kGroupApi = 1u << 8,      // v5: ncclGroupStart..ncclGroupEnd as the application called them
  kCollApi = 1u << 9,       // v5: one collective API call
  kP2pApi = 1u << 10,       // v5: one ncclSend/ncclRecv call
  kKernelLaunch = 1u << 11  // v5: the kernel launch of a group
};

// ncclProfilerEventState_t: one enum shared by every version (values fixed since v4).
enum EventState : int {
  kProxyOpSendPosted = 0,  // ProxyOp states, deprecated in v4
  kProxyOpSendRemFifoWait = 1,
  kProxyOpSendTransmitted = 2,
  kProxyOpSendDone = 3,
  kProxyOpRecvPosted = 4,
  kProxyOpRecvReceived = 5,
  kProxyOpRecvTransmitted = 6,
  kProxyOpRecvDone = 7,
  kProxyStepSendGpuWait = 8,
  kProxyStepSendWait = 9,
  kProxyStepRecvWait = 10,
  kProxyStepRecvFlushWait = 11,
  kProxyStepRecvGpuWait = 12,
  kProxyCtrlIdle = 13,
  kProxyCtrlActive = 14,
  kProxyCtrlSleep = 15,
  kProxyCtrlWakeup = 16,
  kProxyCtrlAppend = 17,
  kProxyCtrlAppendEnd = 18,
  kProxyOpInProgressV4 = 19,
  kProxyStepSendPeerWaitV4 = 20,
  kNetPluginUpdate = 21,
  kKernelChStop = 22,
  kGroupStartApiStop = 23,  // v5: ncclGroupStart returned
  kGroupEndApiStart = 24,   // v5: ncclGroupEnd entered
};

// ---- v3 (NCCL 2.24/2.25) ----

struct EventDescrV3 {
  uint8_t type;     // one EventType bit
  void* parentObj;  // handle of the parent event (the plugin's own), or null
  int rank;         // rank that generated the event
  union {
    struct {
      const char* name;  // communicator name
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;  // "AllReduce", ...
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;  // "ncclFloat32", ...
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;   // "RING", "TREE", ...
      const char* proto;  // "LL", "LL128", "SIMPLE"
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;  // "Send" or "Recv"
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;  // process that created the parent: compare before dereferencing parentObj
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
    } kernelCh;
    struct {
      int64_t id;  // 16 low bits: event version; next 16: network type
      void* data;
    } netPlugin;
  };
};

union EventStateArgsV3 {
  struct {
    size_t transSize;
    int steps;
  } proxyOp;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
};

struct ProfilerV3 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV3* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, EventStateArgsV3* eStateArgs);
  Result (*finalize)(void* context);
};

// ---- v4 (NCCL 2.26/2.27): the communicator moves to init; KernelCh carries GPU timers ----

struct EventDescrV4 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;  // kernel channel start, GPU globaltimer (ns)
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

union EventStateArgsV4 {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  // kernel channel stop, GPU globaltimer (ns), with kKernelChStop
  } kernelCh;
};

struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash,
                 int nNodes, int nranks, int rank, DebugLogger logfn);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV4* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, EventStateArgsV4* eStateArgs);
  Result (*finalize)(void* context);
};

// ---- v5 (NCCL 2.28): API-level events; 64-bit type; init takes the communicator id first ----

struct EventDescrV5 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      int graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;  // the Group event, as v4 gave it in parentObj
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

using EventStateArgsV5 = EventStateArgsV4;

struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                 int nNodes, int nranks, int rank, DebugLogger logfn);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV5* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, EventStateArgsV5* eStateArgs);
  Result (*finalize)(void* context);
};

// The layout NCCL writes (x86-64 / aarch64 LP64).
static_assert(offsetof(EventDescrV3, parentObj) == 8 && offsetof(EventDescrV3, rank) == 16);
static_assert(offsetof(EventDescrV3, coll) == 24);
static_assert(offsetof(EventDescrV3, coll.seqNumber) == 40 &&
              offsetof(EventDescrV3, coll.count) == 72);
static_assert(offsetof(EventDescrV3, coll.nMaxChannels) == 96 &&
              offsetof(EventDescrV3, coll.algo) == 104);
static_assert(offsetof(EventDescrV3, p2p.peer) == 72 && offsetof(EventDescrV3, proxyOp.peer) == 32);
static_assert(offsetof(EventDescrV4, coll.count) == 56 && offsetof(EventDescrV4, coll.algo) == 88);
static_assert(offsetof(EventDescrV4, kernelCh.pTimer) == 32 &&
              offsetof(EventDescrV4, p2p.nChannels) == 60);
static_assert(offsetof(EventDescrV5, coll.parentGroup) == 104 &&
              offsetof(EventDescrV5, p2p.parentGroup) == 64);
static_assert(offsetof(EventDescrV5, collApi.root) == 48 &&
              offsetof(EventDescrV5, collApi.graphCaptured) == 64);
static_assert(sizeof(EventStateArgsV3) == 16 && sizeof(EventStateArgsV4) == 8);
static_assert(sizeof(ProfilerV5) == 6 * sizeof(void*));

}  // namespace tracedb::nccl
