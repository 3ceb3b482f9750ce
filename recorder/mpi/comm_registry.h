// Communicator and window ids for the MPI interposer, and per-communicator collective sequence
// numbers.
//
// Id scheme (docs/mpi-capture.md, "Communicator ids"): MPI_COMM_WORLD is 0; 1 means "a
// communicator the interposer did not see being created" (MPI_Comm_spawn, MPI_Comm_accept, …).
// Every other communicator or window gets id = 2 + (counter * W + leader) mod (2^32 - 2), where
// W is the world size, `leader` the smallest world rank among the members and `counter` the
// leader's own count of communicators and windows it has joined (MPI_COMM_SELF is counter 0).
// Members agree on (leader, counter) with one PMPI_Allreduce(MPI_2INT, MPI_MINLOC) inside the
// new communicator (MPI_Comm_idup: a PMPI_Iallreduce on the parent, completed with the idup;
// intercommunicators: inside a temporary PMPI_Intercomm_merge). Ids are therefore identical on
// every member and distinct job-wide until counter * W reaches 2^32.
//
// Each id is declared to the recorder with tracedb_comm_define (members as world ranks).
// Lookups go through a small per-thread cache that a generation counter invalidates whenever a
// handle is freed, so the hot path takes no lock.
// Thread safety: every function is thread-safe. Registration performs collective PMPI calls and
// must be made by every member, in the same order, as MPI requires of the creating call.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "recorder/mpi/runtime.h"

namespace tracedb::mpi {

inline constexpr uint32_t kWorldComm = 0;
inline constexpr uint32_t kUnknownComm = 1;

// A communicator or window as the interposer knows it.
struct HandleState {
  uint32_t id = kUnknownComm;
  int32_t size = 0;              // local group size
  int32_t rank = 0;              // this process's rank in the local group
  int32_t remote_size = 0;       // intercommunicators: size of the remote group; else 0
  int32_t outdegree = -1;        // out-neighbours of a topology communicator; -1 without topology
  std::atomic<uint64_t> seq{0};  // collectives issued on it by this process
  HandleState* next_free = nullptr;
};

// Handle value -> HandleState, for one kind of handle.
class HandleRegistry {
 public:
  // nullptr when `key` was never registered (or has been erased).
  HandleState* Find(uintptr_t key) noexcept;
  // Registers (or re-registers) `key`; the state's seq starts at 0. nullptr when out of memory.
  HandleState* Insert(uintptr_t key, const HandleState& init) noexcept;
  void Erase(uintptr_t key) noexcept;

 private:
  HandleState* FindSlow(uintptr_t key) noexcept;
  std::mutex mu_;
  std::unordered_map<uintptr_t, HandleState*> map_;
  HandleState* free_ = nullptr;   // erased states, kept for reuse (never deleted)
  std::atomic<uint64_t> gen_{1};  // bumped by every Erase and replacing Insert
};

extern HandleState g_world_state;
extern HandleRegistry g_comms;
extern HandleRegistry g_wins;

inline HandleState* FindComm(MPI_Comm c) noexcept {
  if (c == MPI_COMM_WORLD) return &g_world_state;
  return g_comms.Find(Key(c));
}
inline HandleState* FindWin(MPI_Win w) noexcept { return g_wins.Find(Key(w)); }

// The collective sequence number of the call being made on `hs` (0 when unknown). A load and a
// store, not an atomic increment: MPI forbids two threads from issuing collectives on one
// communicator (or window) concurrently (MPI-3.1 section 5.13), so there is nothing to race with.
inline uint64_t NextSeq(HandleState* hs) noexcept {
  if (hs == nullptr) return 0;
  const uint64_t s = hs->seq.load(std::memory_order_relaxed);
  hs->seq.store(s + 1, std::memory_order_relaxed);
  return s;
}
inline void SetComm(tracedb_args* a, const HandleState* hs) noexcept {
  a->fields |= TRACEDB_ARG_COMM;
  a->comm = hs != nullptr ? hs->id : kUnknownComm;
}
inline void SetSeq(tracedb_args* a, const HandleState* hs, uint64_t seq) noexcept {
  if (hs == nullptr) return;  // an unknown communicator has no comparable sequence
  a->fields |= TRACEDB_ARG_SEQ;
  a->seq = seq;
}

// Sizes the byte-count helpers need, from the registry or (unknown communicator) from MPI.
struct CommShape {
  int size = 0;
  int rank = 0;
  int remote_size = 0;  // > 0: intercommunicator
  int outdegree = 0;
};
CommShape ShapeOf(const HandleState* hs, MPI_Comm c) noexcept;

// At the end of MPI_Init, on every rank: fills g_world and registers MPI_COMM_WORLD and
// MPI_COMM_SELF.
void RegisterPredefined() noexcept;
// A communicator just created by a wrapped call (MPI_COMM_NULL: nothing to do). Collective over
// its members (and, for an intercommunicator, over both groups).
void RegisterComm(MPI_Comm c) noexcept;
void UnregisterComm(MPI_Comm c) noexcept;
// A window just created on `comm`; collective over `comm`.
void RegisterWin(MPI_Win w, MPI_Comm comm) noexcept;
void UnregisterWin(MPI_Win w) noexcept;

// MPI_Comm_idup: the id agreement is started on the parent right after PMPI_Comm_idup and the
// new communicator is registered when the idup request completes.
struct PendingIdup {
  int in[2];
  int out[2];
  MPI_Request agree;
  MPI_Comm* newcomm;  // the caller's variable, written by MPI by the time the request completes
  bool agreeing;      // false for an intercommunicator parent (the new one stays unknown)
};
// nullptr when out of memory.
PendingIdup* BeginIdup(MPI_Comm parent, MPI_Comm* newcomm) noexcept;
// Completes the agreement, registers the new communicator when `register_it`, frees `p`.
void FinishIdup(PendingIdup* p, bool register_it) noexcept;

// For tests: the id of (leader, counter) in a world of `world_size` ranks.
uint32_t PackCommId(int leader, int counter, int world_size) noexcept;

}  // namespace tracedb::mpi
