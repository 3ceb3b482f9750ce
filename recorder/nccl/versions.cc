// libnccl-profiler-tracedb.so's exported symbols: ncclProfiler_v5, _v4 and _v3 (NCCL 2.24 to
// 2.28). Each version's descriptors and state arguments (recorder/nccl/profiler_abi.h) are
// translated into the one internal form of plugin_core.h. docs/gpu-capture.md.
// Thread safety: as plugin_core.h (the adapters keep no state).
#include "recorder/nccl/plugin_core.h"
#include "recorder/nccl/profiler_abi.h"

#define TRACEDB_NCCL_EXPORT __attribute__((visibility("default")))

namespace tracedb::nccl {
namespace {

// ---- v5 ----

Result InitV5(void** context, uint64_t comm_id, int* mask, const char* comm_name, int nnodes,
              int nranks, int rank, DebugLogger) {
  return InitContext(5, true, comm_id, comm_name, nnodes, nranks, rank, mask, context);
}

Result StartV5(void* context, void** handle, EventDescrV5* in) {
  if (handle == nullptr) return kSuccess;
  *handle = nullptr;
  if (in == nullptr) return kSuccess;
  Descr d;
  d.type = in->type;
  d.parent = in->parentObj;
  d.rank = in->rank;
  switch (in->type) {
    case kCollApi:
      d.func = in->collApi.func;
      d.count = in->collApi.count;
      d.datatype = in->collApi.datatype;
      d.root_or_peer = in->collApi.root;
      break;
    case kP2pApi:
      d.func = in->p2pApi.func;
      d.count = in->p2pApi.count;
      d.datatype = in->p2pApi.datatype;
      break;
    case kColl:
      d.has_seq = true;
      d.seq = in->coll.seqNumber;
      d.func = in->coll.func;
      d.count = in->coll.count;
      d.root_or_peer = in->coll.root;
      d.datatype = in->coll.datatype;
      d.channels = in->coll.nChannels;
      d.warps = in->coll.nWarps;
      d.algo = in->coll.algo;
      d.proto = in->coll.proto;
      d.parent_group = in->coll.parentGroup;
      break;
    case kP2p:
      d.func = in->p2p.func;
      d.count = in->p2p.count;
      d.datatype = in->p2p.datatype;
      d.root_or_peer = in->p2p.peer;
      d.channels = in->p2p.nChannels;
      d.parent_group = in->p2p.parentGroup;
      break;
    case kProxyOp:
      d.pid = in->proxyOp.pid;
      d.channel = in->proxyOp.channelId;
      d.peer = in->proxyOp.peer;
      d.n_steps = in->proxyOp.nSteps;
      d.is_send = in->proxyOp.isSend;
      break;
    case kProxyStep:
      d.step = in->proxyStep.step;
      break;
    case kKernelCh:
      d.channel = in->kernelCh.channelId;
      d.ptimer = in->kernelCh.pTimer;
      break;
    case kNetPlugin:
      d.net_id = in->netPlugin.id;
      break;
    default:
      break;
  }
  return StartEvent(context, handle, d);
}

Result StateV4(void* handle, EventState state, EventStateArgsV4* in) {
  StateArgs s;
  if (in != nullptr) {
    switch (HandleKind(handle)) {
      case kProxyStep:
        s.has_trans = true;
        s.trans = in->proxyStep.transSize;
        break;
      case kProxyCtrl:
        s.has_appended = true;
        s.appended = in->proxyCtrl.appendedProxyOps;
        break;
      case kKernelCh:
        s.has_timer = true;
        s.ptimer = in->kernelCh.pTimer;
        break;
      default:
        break;
    }
  }
  return RecordEventState(handle, state, s);
}

// ---- v4 ----

Result InitV4(void** context, int* mask, const char* comm_name, uint64_t comm_hash, int nnodes,
              int nranks, int rank, DebugLogger) {
  return InitContext(4, true, comm_hash, comm_name, nnodes, nranks, rank, mask, context);
}

Result StartV4(void* context, void** handle, EventDescrV4* in) {
  if (handle == nullptr) return kSuccess;
  *handle = nullptr;
  if (in == nullptr) return kSuccess;
  Descr d;
  d.type = in->type;
  d.parent = in->parentObj;
  d.rank = in->rank;
  switch (in->type) {
    case kColl:
      d.has_seq = true;
      d.seq = in->coll.seqNumber;
      d.func = in->coll.func;
      d.count = in->coll.count;
      d.root_or_peer = in->coll.root;
      d.datatype = in->coll.datatype;
      d.channels = in->coll.nChannels;
      d.warps = in->coll.nWarps;
      d.algo = in->coll.algo;
      d.proto = in->coll.proto;
      break;
    case kP2p:
      d.func = in->p2p.func;
      d.count = in->p2p.count;
      d.datatype = in->p2p.datatype;
      d.root_or_peer = in->p2p.peer;
      d.channels = in->p2p.nChannels;
      break;
    case kProxyOp:
      d.pid = in->proxyOp.pid;
      d.channel = in->proxyOp.channelId;
      d.peer = in->proxyOp.peer;
      d.n_steps = in->proxyOp.nSteps;
      d.is_send = in->proxyOp.isSend;
      break;
    case kProxyStep:
      d.step = in->proxyStep.step;
      break;
    case kKernelCh:
      d.channel = in->kernelCh.channelId;
      d.ptimer = in->kernelCh.pTimer;
      break;
    case kNetPlugin:
      d.net_id = in->netPlugin.id;
      break;
    default:
      break;
  }
  return StartEvent(context, handle, d);
}

// ---- v3 ----

// The communicator is learnt from the first task descriptor.
Result InitV3(void** context, int* mask) {
  return InitContext(3, false, 0, nullptr, 0, 0, -1, mask, context);
}

Result StartV3(void* context, void** handle, EventDescrV3* in) {
  if (handle == nullptr) return kSuccess;
  *handle = nullptr;
  if (in == nullptr) return kSuccess;
  Descr d;
  d.type = in->type;
  d.parent = in->parentObj;
  d.rank = in->rank;
  switch (in->type) {
    case kColl:
      d.comm_name = in->coll.name;
      d.comm_hash = in->coll.commHash;
      d.has_seq = true;
      d.seq = in->coll.seqNumber;
      d.func = in->coll.func;
      d.count = in->coll.count;
      d.root_or_peer = in->coll.root;
      d.datatype = in->coll.datatype;
      d.channels = in->coll.nMaxChannels;
      d.warps = in->coll.nWarps;
      d.algo = in->coll.algo;
      d.proto = in->coll.proto;
      break;
    case kP2p:
      d.comm_name = in->p2p.name;
      d.comm_hash = in->p2p.commHash;
      d.func = in->p2p.func;
      d.count = in->p2p.count;
      d.datatype = in->p2p.datatype;
      d.root_or_peer = in->p2p.peer;
      break;
    case kProxyOp:
      d.pid = in->proxyOp.pid;
      d.channel = in->proxyOp.channelId;
      d.peer = in->proxyOp.peer;
      d.n_steps = in->proxyOp.nSteps;
      d.is_send = in->proxyOp.isSend;
      break;
    case kProxyStep:
      d.step = in->proxyStep.step;
      break;
    case kKernelCh:
      d.channel = in->kernelCh.channelId;
      break;
    case kNetPlugin:
      d.net_id = in->netPlugin.id;
      break;
    default:
      break;
  }
  return StartEvent(context, handle, d);
}

Result StateV3(void* handle, EventState state, EventStateArgsV3* in) {
  StateArgs s;
  if (in != nullptr) {
    switch (HandleKind(handle)) {
      case kProxyOp:
        s.has_trans = true;
        s.trans = in->proxyOp.transSize;
        break;
      case kProxyCtrl:
        s.has_appended = true;
        s.appended = in->proxyCtrl.appendedProxyOps;
        break;
      default:
        break;
    }
  }
  return RecordEventState(handle, state, s);
}

Result StateV5(void* handle, EventState state, EventStateArgsV5* in) {
  return StateV4(handle, state, in);
}

}  // namespace
}  // namespace tracedb::nccl

using namespace tracedb::nccl;

extern "C" {
TRACEDB_NCCL_EXPORT ProfilerV5 ncclProfiler_v5 = {"tracedb", InitV5,  StartV5,
                                                  StopEvent, StateV5, FinalizeContext};
TRACEDB_NCCL_EXPORT ProfilerV4 ncclProfiler_v4 = {"tracedb", InitV4,  StartV4,
                                                  StopEvent, StateV4, FinalizeContext};
TRACEDB_NCCL_EXPORT ProfilerV3 ncclProfiler_v3 = {"tracedb", InitV3,  StartV3,
                                                  StopEvent, StateV3, FinalizeContext};
}
