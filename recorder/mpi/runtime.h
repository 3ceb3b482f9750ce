// The MPI interposer's process-wide state and the small helpers every generated wrapper uses:
// the on/off switch, lazily interned routine names, flow ids, byte counts from datatypes and
// statuses, and handle-to-key conversion.
//
// A wrapper does nothing but call PMPI_* while Tracking() is false: before MPI_Init, after
// MPI_Finalize, and in jobs where no rank records (TRACEDB_DIR unset everywhere). See
// docs/mpi-capture.md for what is recorded and why.
// Thread safety: every function here may be called from any thread.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "tracedb/recorder.h"

// The MPI_* symbols the interposer defines; everything else in the library is hidden.
#define TRACEDB_MPI_EXPORT __attribute__((visibility("default")))

namespace tracedb::mpi {

// Set at the end of MPI_Init when some rank of the job records (then every rank keeps
// communicator ids and collective sequence numbers, so that ids agree everywhere); cleared in
// MPI_Finalize.
extern std::atomic<bool> g_tracking;
inline bool Tracking() noexcept { return g_tracking.load(std::memory_order_relaxed); }

// This process in MPI_COMM_WORLD. Valid while Tracking().
struct WorldInfo {
  int rank = 0;
  int size = 1;
  MPI_Group group = MPI_GROUP_NULL;  // the group of MPI_COMM_WORLD
};
extern WorldInfo g_world;

// A routine name, interned on first use (tracedb_intern takes a lock; this does it once).
class LazyName {
 public:
  constexpr explicit LazyName(const char* name) : name_(name) {}
  uint32_t id() noexcept {
    const uint32_t v = id_.load(std::memory_order_relaxed);
    return v != 0 ? v : Intern();
  }
  const char* name() const { return name_; }

 private:
  uint32_t Intern() noexcept;
  const char* name_;
  std::atomic<uint32_t> id_{0};
};

// Names of the events that are not routine calls (docs/mpi-capture.md, "Flows").
extern LazyName g_request_start_name;     // "mpi_request_start"
extern LazyName g_request_complete_name;  // "mpi_request_complete"

// Records one MPI event: a complete span [t0, t1] in category MPI on the thread's own track.
inline void Emit(LazyName& name, int64_t t0, int64_t t1, const tracedb_args* a) noexcept {
  tracedb_complete_ex(name.id(), TRACEDB_CAT_MPI, 0, t0, t1 - t0, a);
}

// A fresh flow id, unique within this process (1, 2, 3, …).
uint64_t NewFlow() noexcept;

// Size of one element of `type` in bytes (0 when MPI cannot tell).
uint64_t TypeBytes(MPI_Datatype type) noexcept;
inline uint64_t Bytes(int count, MPI_Datatype type) noexcept {
  return count > 0 ? static_cast<uint64_t>(count) * TypeBytes(type) : 0;
}
inline uint64_t Bytes(MPI_Aint size) noexcept { return size > 0 ? static_cast<uint64_t>(size) : 0; }
// Bytes a completed receive (or a probe) reported in `st`.
uint64_t StatusBytes(const MPI_Status* st) noexcept;

// Handle values as table keys: MPICH handles are ints, Open MPI handles are pointers.
template <class Handle>
inline uintptr_t Key(Handle h) noexcept {
  if constexpr (std::is_pointer_v<Handle>) {
    return reinterpret_cast<uintptr_t>(h);
  } else {
    return static_cast<uintptr_t>(static_cast<uint32_t>(h));
  }
}

// Argument setters: each sets the value and its TRACEDB_ARG_* bit.
inline void SetBytes(tracedb_args* a, uint64_t bytes) noexcept {
  a->fields |= TRACEDB_ARG_BYTES;
  a->bytes = bytes;
}
inline void SetPeer(tracedb_args* a, int peer) noexcept {
  a->fields |= TRACEDB_ARG_PEER;
  a->peer = peer;
}
inline void SetTag(tracedb_args* a, int tag) noexcept {
  a->fields |= TRACEDB_ARG_TAG;
  a->tag = tag;
}
inline void SetFlow(tracedb_args* a, uint64_t flow) noexcept {
  a->fields |= TRACEDB_ARG_FLOW;
  a->flow = flow;
}

}  // namespace tracedb::mpi
