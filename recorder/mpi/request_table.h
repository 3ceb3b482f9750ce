// RequestTable: what the MPI interposer remembers about each outstanding request (MPI_Request)
// or matched message (MPI_Message) between the call that creates it and the call that completes
// it: its flow id and the arguments of the initiating call.
//
// Keys are the handle values (ints in MPICH, pointers in Open MPI, both widened to uintptr_t).
// One key may be present several times at once: Open MPI hands out one static "already
// complete" request for every operation on MPI_PROC_NULL, so entries with equal keys are taken
// oldest first. Persistent requests stay in the table from MPI_*_init to MPI_Request_free and are
// switched between inactive and active by MPI_Start and their completion.
//
// No allocation on the common path: 64 shards, each an open-addressing array that grows by
// doubling (malloc; when that fails the entry is not tracked and the caller records the call
// without a flow). Nothing here throws.
// Thread safety: every member function is thread-safe (one mutex per shard).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace tracedb::mpi {

struct PendingIdup;  // comm_registry.h: a communicator whose id is agreed when MPI_Comm_idup ends

struct ReqInfo {
  enum Flags : uint32_t {
    kRecv = 1,        // bytes/peer/tag of the completion come from the status
    kPersistent = 2,  // created by MPI_*_init: survives completion, freed by MPI_Request_free
    kActive = 4,      // started and not yet completed
  };
  uint64_t flow = 0;   // flow id of the current operation (0: not recorded)
  uint64_t bytes = 0;  // bytes of the initiating call (for kRecv: the posted capacity)
  int32_t peer = 0;    // destination, source or root as given to the initiating call
  int32_t tag = 0;
  uint32_t comm = 0;    // communicator (or window) id
  uint32_t fields = 0;  // TRACEDB_ARG_* bits of the above that carry a value
  uint32_t flags = 0;
  PendingIdup* idup = nullptr;  // owned by the entry until its completion is handled
};

class RequestTable {
 public:
  RequestTable() = default;
  ~RequestTable();
  RequestTable(const RequestTable&) = delete;
  RequestTable& operator=(const RequestTable&) = delete;

  // Adds an entry. False when memory is short (the entry is not added) or `key` is 0.
  bool Insert(uintptr_t key, const ReqInfo& info);
  // The oldest active entry of `key` has completed: copies it to `out`, then removes it
  // (persistent entries stay, inactive). False when there is none.
  bool Complete(uintptr_t key, ReqInfo* out);
  // MPI_Start on a persistent request: activates its entry with `flow` and copies it to `out`.
  // False when `key` has no persistent entry.
  bool Start(uintptr_t key, uint64_t flow, ReqInfo* out);
  // MPI_Request_free / consumed message: removes the oldest entry of `key`, active or not.
  bool Remove(uintptr_t key, ReqInfo* out);
  // Entries currently held (all shards; a snapshot).
  uint64_t Size() const { return size_.load(std::memory_order_relaxed); }

 private:
  static constexpr int kShards = 64;
  static constexpr uintptr_t kEmpty = 0;
  static constexpr uintptr_t kTombstone = 1;
  struct Slot {
    uintptr_t key;
    uint64_t order;  // insertion order, to take equal keys oldest first
    ReqInfo info;
  };
  struct alignas(64) Shard {
    std::mutex mu;
    Slot* slots = nullptr;
    uint32_t capacity = 0;  // a power of two, or 0
    uint32_t live = 0;
    uint32_t tombstones = 0;
  };
  enum class Want { kActive, kPersistent, kAny };

  static uint64_t Hash(uintptr_t key);
  Shard& ShardOf(uintptr_t key) { return shards_[(Hash(key) >> 58) & (kShards - 1)]; }
  // REQUIRES: s.mu held. Index of the oldest matching entry, or -1.
  static int64_t FindOldest(const Shard& s, uintptr_t key, Want want);
  // REQUIRES: s.mu held. Rebuilds the shard's array with `capacity` slots; false when out of
  // memory.
  static bool Rehash(Shard* s, uint32_t capacity);
  void Erase(Shard* s, int64_t index);

  Shard shards_[kShards];
  std::atomic<uint64_t> order_{0};
  std::atomic<uint64_t> size_{0};
};

}  // namespace tracedb::mpi
