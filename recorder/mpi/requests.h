// Nonblocking and persistent requests in the MPI interposer: remembering what started them and
// recording their completion (docs/mpi-capture.md, "Flows").
//
// The initiating call (MPI_Isend, MPI_Iallreduce, MPI_Rput, MPI_Comm_idup, MPI_Start, …) carries
// a fresh flow id. The Wait/Test-family call that completes the request records it: when the call
// completes exactly one recorded request, the call's own event carries that request's flow,
// bytes, peer, tag and communicator; when it completes several, the call's event carries the
// sum of their bytes and each request gets a zero-length "mpi_request_complete" event (at the end
// of the call) with its flow. MPI_Startall starting several requests is recorded the same way,
// with "mpi_request_start" events at the start of the call. Receives get the bytes, source and
// tag of the completion from its status.
//
// The After* functions run after the PMPI call, always when Tracking() (the table must forget
// completed requests even outside the step window), and record only when `rec`.
// Thread safety: every function is thread-safe.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "recorder/mpi/comm_registry.h"
#include "recorder/mpi/request_table.h"

namespace tracedb::mpi {

extern RequestTable g_requests;
extern RequestTable
    g_messages;  // MPI_Message -> communicator id, from MPI_(I)mprobe to MPI_(I)mrecv

// Remembers request `r` started with arguments `a` (kRecv / kPersistent in `flags`).
// False when it cannot be remembered (the caller then drops the flow from its event).
bool TrackRequest(MPI_Request r, const tracedb_args& a, uint32_t flags,
                  PendingIdup* idup = nullptr) noexcept;

// Messages from MPI_Mprobe/MPI_Improbe, consumed by MPI_Mrecv/MPI_Imrecv.
void RememberMessage(MPI_Message m, const HandleState* hs) noexcept;
struct MessageComm {
  uint32_t id = kUnknownComm;
};
MessageComm TakeMessage(MPI_Message m) noexcept;
inline void SetComm(tracedb_args* a, MessageComm m) noexcept {
  a->fields |= TRACEDB_ARG_COMM;
  a->comm = m.id;
}

// A copy of `n` request handles made before a call that may overwrite them.
class KeyCopy {
 public:
  KeyCopy(int n, const MPI_Request* requests) noexcept;
  ~KeyCopy() {
    if (keys_ != stack_) std::free(keys_);
  }
  KeyCopy(const KeyCopy&) = delete;
  KeyCopy& operator=(const KeyCopy&) = delete;
  const uintptr_t* data() const { return keys_; }  // nullptr when out of memory

 private:
  uintptr_t stack_[32];
  uintptr_t* keys_ = nullptr;
};

// The status array handed to PMPI: the caller's, or a local one when the caller passed
// MPI_STATUSES_IGNORE and statuses are needed (`n` > 0).
class StatusArray {
 public:
  StatusArray(int n, MPI_Status* user) noexcept;
  ~StatusArray() {
    if (local_ != nullptr && local_ != stack_) std::free(local_);
  }
  StatusArray(const StatusArray&) = delete;
  StatusArray& operator=(const StatusArray&) = delete;
  MPI_Status* get() const { return pass_; }             // what PMPI gets
  const MPI_Status* readable() const { return read_; }  // nullptr: no statuses to read

 private:
  MPI_Status stack_[8];
  MPI_Status* local_ = nullptr;
  MPI_Status* pass_;
  const MPI_Status* read_ = nullptr;
};

// MPI_Wait, MPI_Test (`completed`: the request completed), MPI_Waitany, MPI_Testany (the key of
// the completed index, or 0).
void AfterWaitOne(LazyName& name, bool rec, int64_t t0, int64_t t1, int rc, uintptr_t key,
                  bool completed, const MPI_Status* st) noexcept;
// MPI_Waitall, MPI_Testall (`completed`: flag, or true for Waitall). `sts` may be nullptr.
void AfterWaitAll(LazyName& name, bool rec, int64_t t0, int64_t t1, int rc, int count,
                  const uintptr_t* keys, bool completed, const MPI_Status* sts) noexcept;
// MPI_Waitsome, MPI_Testsome.
void AfterWaitSome(LazyName& name, bool rec, int64_t t0, int64_t t1, int rc, const uintptr_t* keys,
                   int outcount, const int* indices, const MPI_Status* sts) noexcept;
// MPI_Start, MPI_Startall.
void AfterStart(LazyName& name, bool rec, int64_t t0, int64_t t1, int rc, uintptr_t key) noexcept;
void AfterStartAll(LazyName& name, bool rec, int64_t t0, int64_t t1, int rc, int count,
                   const MPI_Request* requests) noexcept;
// MPI_Request_free: the request is forgotten; its event carries the flow of an operation that
// was still active (the last event of that operation).
void AfterRequestFree(LazyName& name, bool rec, int64_t t0, int64_t t1, int rc,
                      uintptr_t key) noexcept;

}  // namespace tracedb::mpi
