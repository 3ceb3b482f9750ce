// Clock synchronisation of the MPI interposer: at MPI_Init and at MPI_Finalize every rank
// measures the offset of its recorder clock (tracedb_now) to rank 0's and records it with
// tracedb_clock_sync(0, local_midpoint, offset, uncertainty). Compaction interpolates between
// a rank's sync points to put all ranks on rank 0's clock.
//
// Algorithm (docs/mpi-capture.md, "Clock synchronisation"): min-RTT ping-pong. A client sends a
// ping at local t1, the server answers with its clock t_ref, the client reads t2; of 20 to 50
// round trips the one with the smallest RTT gives offset = t_ref - (t1 + t2) / 2 and
// uncertainty = RTT / 2. Hierarchical: ranks on rank 0's node and one leader per other node
// (the node's smallest rank) are served by rank 0, one after another; then every other rank is
// served by its node's leader, in parallel across nodes, and adds the leader's offset (and
// uncertainty) to its own. Nodes are MPI_COMM_TYPE_SHARED groups, or blocks of
// TRACEDB_MPI_SYNC_GROUP consecutive ranks when that variable is set (the same on every rank).
// Rank 0 records offset 0, uncertainty 0.
//
// All traffic uses PMPI on the communicator given (a private duplicate of MPI_COMM_WORLD), so it
// is neither recorded nor mixed with the application's messages.
// Thread safety: collective; call from one thread per process, as MPI_Init/MPI_Finalize are.
#pragma once

#include "recorder/mpi/runtime.h"

namespace tracedb::mpi {

struct SyncResult {
  int64_t local_ns = 0;        // local clock at the middle of the best round trip
  int64_t offset_ns = 0;       // rank 0's clock minus the local clock
  int64_t uncertainty_ns = 0;  // half the best round trip (summed over the hierarchy)
  bool ok = false;             // a round trip succeeded (else nothing is recorded)
};

// Measures and records; returns what was recorded. Collective over `comm`.
SyncResult SyncClocks(MPI_Comm comm) noexcept;

}  // namespace tracedb::mpi
