// The version-independent core of the NCCL profiler plugin: one descriptor and one set of calls
// that versions.cc maps ncclProfiler_v5/_v4/_v3 onto. What is recorded: docs/gpu-capture.md.
// Thread safety: every function may be called from any thread at once (NCCL calls from the
// application threads and its proxy threads); see plugin.cc.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "recorder/nccl/profiler_abi.h"

namespace tracedb::nccl {

// An event descriptor of any version. Strings are NCCL's (static) and only read during the call.
struct Descr {
  uint64_t type = 0;
  void* parent = nullptr;
  int rank = -1;
  // tasks
  const char* comm_name = nullptr;  // v3
  uint64_t comm_hash = 0;           // v3
  bool has_seq = false;
  uint64_t seq = 0;
  const char* func = nullptr;
  size_t count = 0;
  int root_or_peer = -1;
  const char* datatype = nullptr;
  int channels = 0;
  int warps = 0;
  const char* algo = nullptr;
  const char* proto = nullptr;
  void* parent_group = nullptr;  // v5 tasks
  // proxy
  pid_t pid = 0;
  int channel = 0;
  int peer = -1;
  int n_steps = 0;
  int is_send = 0;
  int step = 0;
  uint64_t ptimer = 0;
  int64_t net_id = 0;
};

// A state record's arguments, of any version.
struct StateArgs {
  bool has_trans = false;
  uint64_t trans = 0;
  bool has_appended = false;
  int appended = 0;
  bool has_timer = false;
  uint64_t ptimer = 0;
};

// Creates a communicator's context and sets *mask (from TRACEDB_NCCL_EVENTS and the recorder's
// state). v4/v5 name the communicator (has_comm); v3 does not, and the context learns it from
// its first task descriptor. kInternalError (NCCL then disables the plugin) on bad settings.
Result InitContext(int version, bool has_comm, uint64_t comm_id, const char* comm_name, int nnodes,
                   int nranks, int rank, int* mask, void** context);
// Starts an event: *handle is null when it is not recorded (recording off, pool full, unknown
// type). Always kSuccess.
Result StartEvent(void* context, void** handle, const Descr& d);
// Stops and records an event; a null or foreign handle is ignored.
Result StopEvent(void* handle);
Result RecordEventState(void* handle, EventState state, const StateArgs& s);
Result FinalizeContext(void* context);
// The EventType of a live handle, 0 when it is not one of the plugin's events.
uint64_t HandleKind(void* handle);

}  // namespace tracedb::nccl
