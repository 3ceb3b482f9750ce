// Byte counts of collective calls. See coll_bytes.h for the rule.
#include "recorder/mpi/coll_bytes.h"

namespace tracedb::mpi {
namespace {

bool InPlace(const void* buf) { return buf == MPI_IN_PLACE; }

uint64_t SumCounts(const int* counts, int n) {
  uint64_t total = 0;
  for (int i = 0; i < n; ++i) total += counts[i] > 0 ? static_cast<uint64_t>(counts[i]) : 0;
  return total;
}

uint64_t SumTyped(const int* counts, const MPI_Datatype* types, int n) {
  uint64_t total = 0;
  for (int i = 0; i < n; ++i) total += Bytes(counts[i], types[i]);
  return total;
}

// Blocks in a send buffer addressed to every process of the (remote) group.
int Peers(const CommShape& s) { return s.remote_size > 0 ? s.remote_size : s.size; }

}  // namespace

uint64_t RootedBytes(int count, MPI_Datatype type, int root) noexcept {
  return root == MPI_PROC_NULL ? 0 : Bytes(count, type);
}

uint64_t GatherBytes(const HandleState* hs, MPI_Comm c, const void* sendbuf, int sendcount,
                     MPI_Datatype sendtype, int recvcount, MPI_Datatype recvtype,
                     int root) noexcept {
  if (root == MPI_PROC_NULL) return 0;
  if (root == MPI_ROOT) return Bytes(recvcount, recvtype) * ShapeOf(hs, c).remote_size;
  if (InPlace(sendbuf)) return Bytes(recvcount, recvtype);
  return Bytes(sendcount, sendtype);
}

uint64_t GathervBytes(const HandleState* hs, MPI_Comm c, const void* sendbuf, int sendcount,
                      MPI_Datatype sendtype, const int* recvcounts, MPI_Datatype recvtype,
                      int root) noexcept {
  if (root == MPI_PROC_NULL) return 0;
  if (root == MPI_ROOT) {
    return SumCounts(recvcounts, ShapeOf(hs, c).remote_size) * TypeBytes(recvtype);
  }
  if (InPlace(sendbuf)) return Bytes(recvcounts[ShapeOf(hs, c).rank], recvtype);
  return Bytes(sendcount, sendtype);
}

uint64_t ScatterBytes(const HandleState* hs, MPI_Comm c, int sendcount, MPI_Datatype sendtype,
                      int recvcount, MPI_Datatype recvtype, int root) noexcept {
  if (root == MPI_PROC_NULL) return 0;
  const CommShape s = ShapeOf(hs, c);
  if (root == MPI_ROOT || (s.remote_size == 0 && root == s.rank)) {
    return Bytes(sendcount, sendtype) * Peers(s);
  }
  return Bytes(recvcount, recvtype);
}

uint64_t ScattervBytes(const HandleState* hs, MPI_Comm c, const int* sendcounts,
                       MPI_Datatype sendtype, int recvcount, MPI_Datatype recvtype,
                       int root) noexcept {
  if (root == MPI_PROC_NULL) return 0;
  const CommShape s = ShapeOf(hs, c);
  if (root == MPI_ROOT || (s.remote_size == 0 && root == s.rank)) {
    return SumCounts(sendcounts, Peers(s)) * TypeBytes(sendtype);
  }
  return Bytes(recvcount, recvtype);
}

uint64_t AllgatherBytes(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                        MPI_Datatype recvtype) noexcept {
  return InPlace(sendbuf) ? Bytes(recvcount, recvtype) : Bytes(sendcount, sendtype);
}

uint64_t AllgathervBytes(const HandleState* hs, MPI_Comm c, const void* sendbuf, int sendcount,
                         MPI_Datatype sendtype, const int* recvcounts,
                         MPI_Datatype recvtype) noexcept {
  if (InPlace(sendbuf)) return Bytes(recvcounts[ShapeOf(hs, c).rank], recvtype);
  return Bytes(sendcount, sendtype);
}

uint64_t AlltoallBytes(const HandleState* hs, MPI_Comm c, const void* sendbuf, int sendcount,
                       MPI_Datatype sendtype, int recvcount, MPI_Datatype recvtype) noexcept {
  const int n = Peers(ShapeOf(hs, c));
  return InPlace(sendbuf) ? Bytes(recvcount, recvtype) * n : Bytes(sendcount, sendtype) * n;
}

uint64_t AlltoallvBytes(const HandleState* hs, MPI_Comm c, const void* sendbuf,
                        const int* sendcounts, MPI_Datatype sendtype, const int* recvcounts,
                        MPI_Datatype recvtype) noexcept {
  const int n = Peers(ShapeOf(hs, c));
  if (InPlace(sendbuf)) return SumCounts(recvcounts, n) * TypeBytes(recvtype);
  return SumCounts(sendcounts, n) * TypeBytes(sendtype);
}

uint64_t AlltoallwBytes(const HandleState* hs, MPI_Comm c, const void* sendbuf,
                        const int* sendcounts, const MPI_Datatype* sendtypes, const int* recvcounts,
                        const MPI_Datatype* recvtypes) noexcept {
  const int n = Peers(ShapeOf(hs, c));
  if (InPlace(sendbuf)) return SumTyped(recvcounts, recvtypes, n);
  return SumTyped(sendcounts, sendtypes, n);
}

uint64_t ReduceScatterBytes(const HandleState* hs, MPI_Comm c, const int* recvcounts,
                            MPI_Datatype type) noexcept {
  return SumCounts(recvcounts, ShapeOf(hs, c).size) * TypeBytes(type);
}

uint64_t ReduceScatterBlockBytes(const HandleState* hs, MPI_Comm c, int recvcount,
                                 MPI_Datatype type) noexcept {
  return Bytes(recvcount, type) * ShapeOf(hs, c).size;
}

uint64_t NeighborAlltoallBytes(const HandleState* hs, MPI_Comm c, int sendcount,
                               MPI_Datatype sendtype) noexcept {
  return Bytes(sendcount, sendtype) * ShapeOf(hs, c).outdegree;
}

uint64_t NeighborAlltoallvBytes(const HandleState* hs, MPI_Comm c, const int* sendcounts,
                                MPI_Datatype sendtype) noexcept {
  return SumCounts(sendcounts, ShapeOf(hs, c).outdegree) * TypeBytes(sendtype);
}

uint64_t NeighborAlltoallwBytes(const HandleState* hs, MPI_Comm c, const int* sendcounts,
                                const MPI_Datatype* sendtypes) noexcept {
  return SumTyped(sendcounts, sendtypes, ShapeOf(hs, c).outdegree);
}

}  // namespace tracedb::mpi
