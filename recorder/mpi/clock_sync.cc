// Min-RTT clock synchronisation against rank 0. See clock_sync.h.
#include "recorder/mpi/clock_sync.h"

#include <climits>
#include <cstdint>
#include <cstdlib>

#include "engine/util/parse_number.h"

namespace tracedb::mpi {
namespace {

constexpr int kTag = 31415;
constexpr int kMinRounds = 20;
constexpr int kMaxRounds = 50;
// After kMinRounds, stop as soon as the best round trip is this short.
constexpr int64_t kGoodRttNs = 10000;

// Round trips with `server` until it has a good one; the best one's result.
SyncResult PingPong(MPI_Comm comm, int server) {
  SyncResult best;
  int64_t best_rtt = INT64_MAX;
  for (int i = 0; i < kMaxRounds; ++i) {
    int last = (i + 1 == kMaxRounds || (i + 1 >= kMinRounds && best_rtt <= kGoodRttNs)) ? 1 : 0;
    int64_t t_ref = 0;
    const int64_t t1 = tracedb_now();
    if (PMPI_Send(&last, 1, MPI_INT, server, kTag, comm) != MPI_SUCCESS ||
        PMPI_Recv(&t_ref, 1, MPI_INT64_T, server, kTag, comm, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      break;
    }
    const int64_t t2 = tracedb_now();
    const int64_t rtt = t2 - t1;
    if (rtt < best_rtt) {
      best_rtt = rtt;
      best.local_ns = t1 + rtt / 2;
      best.offset_ns = t_ref - best.local_ns;
      best.uncertainty_ns = (rtt + 1) / 2;
      best.ok = true;
    }
    if (last) break;
  }
  return best;
}

// Answers `client`'s pings until its last one.
void Serve(MPI_Comm comm, int client) {
  for (;;) {
    int last = 1;
    if (PMPI_Recv(&last, 1, MPI_INT, client, kTag, comm, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
    const int64_t now = tracedb_now();
    if (PMPI_Send(&now, 1, MPI_INT64_T, client, kTag, comm) != MPI_SUCCESS || last) return;
  }
}

int SyncGroupFromEnv() {
  const char* v = std::getenv("TRACEDB_MPI_SYNC_GROUP");
  if (v == nullptr || *v == '\0') return 0;
  int64_t n = 0;  // a whole number or none (engine/util/parse_number.h's policy)
  return engine::ParseInt64(v, &n) && n > 0 && n < INT_MAX ? static_cast<int>(n) : 0;
}

}  // namespace

SyncResult SyncClocks(MPI_Comm comm) noexcept {
  SyncResult r;
  int rank = 0, size = 1;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  MPI_Comm node = MPI_COMM_NULL;
  const int group = SyncGroupFromEnv();
  const int rc = group > 0
                     ? PMPI_Comm_split(comm, rank / group, rank, &node)
                     : PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  if (rc != MPI_SUCCESS) node = MPI_COMM_NULL;
  int node_rank = 0, node_size = 1, leader = rank;
  if (node != MPI_COMM_NULL) {
    PMPI_Comm_rank(node, &node_rank);
    PMPI_Comm_size(node, &node_size);
    PMPI_Bcast(&leader, 1, MPI_INT, 0, node);  // key = rank: node rank 0 is the smallest rank
  }
  const bool root_node = leader == 0 || node == MPI_COMM_NULL;

  // Phase 1: rank 0 serves the ranks of its node and the other nodes' leaders, in rank order.
  // Every other rank first says whether it wants to be served.
  if (rank == 0) {
    for (int peer = 1; peer < size; ++peer) {
      int wants = 0;
      if (PMPI_Recv(&wants, 1, MPI_INT, peer, kTag, comm, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      if (wants) Serve(comm, peer);
    }
  } else {
    int wants = root_node || node_rank == 0 ? 1 : 0;
    PMPI_Send(&wants, 1, MPI_INT, 0, kTag, comm);
    if (wants) r = PingPong(comm, 0);
  }

  // Phase 2: on the other nodes, the leader serves its node; offsets compose through it.
  if (node != MPI_COMM_NULL) {
    if (!root_node) {
      if (node_rank == 0) {
        for (int peer = 1; peer < node_size; ++peer) Serve(node, peer);
      } else {
        r = PingPong(node, 0);
      }
    }
    int64_t via_leader[3] = {r.offset_ns, r.uncertainty_ns, r.ok || rank == 0 ? 1 : 0};
    PMPI_Bcast(via_leader, 3, MPI_INT64_T, 0, node);
    if (!root_node && node_rank != 0) {
      r.offset_ns += via_leader[0];
      r.uncertainty_ns += via_leader[1];
      r.ok = r.ok && via_leader[2] != 0;
    }
    PMPI_Comm_free(&node);
  }

  if (rank == 0) {
    r.local_ns = tracedb_now();
    r.offset_ns = 0;
    r.uncertainty_ns = 0;
    r.ok = true;
  }
  if (r.ok) tracedb_clock_sync(0, r.local_ns, r.offset_ns, r.uncertainty_ns);
  return r;
}

}  // namespace tracedb::mpi
