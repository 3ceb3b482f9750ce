// Byte counts of collective calls, as the MPI interposer records them in the `bytes` argument.
//
// The rule (docs/mpi-capture.md, "Bytes"): the size of the data in this rank's send buffer;
// where this rank's send buffer is not significant (non-root ranks of MPI_Scatter(v), the root
// group of an intercommunicator gather) the size of what it receives; with MPI_IN_PLACE, the size
// of this rank's own block of the receive buffer that stands in for the send buffer. So
// MPI_Allreduce and MPI_Bcast give count * size(type), MPI_Alltoall n * sendcount *
// size(sendtype), MPI_Alltoallv sum(sendcounts) * size(sendtype), MPI_Neighbor_alltoall
// outdegree * sendcount * size(sendtype).
//
// REQUIRES: the call succeeded (arguments that the call validated are read; arguments MPI calls
// "significant only at root" are read only at the root).
// Thread safety: stateless; each function may be called from any thread.
#pragma once

#include <cstdint>

#include "recorder/mpi/comm_registry.h"

namespace tracedb::mpi {

// MPI_Bcast, MPI_Reduce: 0 where the call moves nothing (root == MPI_PROC_NULL in an
// intercommunicator's root group).
uint64_t RootedBytes(int count, MPI_Datatype type, int root) noexcept;
uint64_t GatherBytes(const HandleState* hs, MPI_Comm c, const void* sendbuf, int sendcount,
                     MPI_Datatype sendtype, int recvcount, MPI_Datatype recvtype,
                     int root) noexcept;
uint64_t GathervBytes(const HandleState* hs, MPI_Comm c, const void* sendbuf, int sendcount,
                      MPI_Datatype sendtype, const int* recvcounts, MPI_Datatype recvtype,
                      int root) noexcept;
uint64_t ScatterBytes(const HandleState* hs, MPI_Comm c, int sendcount, MPI_Datatype sendtype,
                      int recvcount, MPI_Datatype recvtype, int root) noexcept;
uint64_t ScattervBytes(const HandleState* hs, MPI_Comm c, const int* sendcounts,
                       MPI_Datatype sendtype, int recvcount, MPI_Datatype recvtype,
                       int root) noexcept;
uint64_t AllgatherBytes(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                        MPI_Datatype recvtype) noexcept;
uint64_t AllgathervBytes(const HandleState* hs, MPI_Comm c, const void* sendbuf, int sendcount,
                         MPI_Datatype sendtype, const int* recvcounts,
                         MPI_Datatype recvtype) noexcept;
uint64_t AlltoallBytes(const HandleState* hs, MPI_Comm c, const void* sendbuf, int sendcount,
                       MPI_Datatype sendtype, int recvcount, MPI_Datatype recvtype) noexcept;
uint64_t AlltoallvBytes(const HandleState* hs, MPI_Comm c, const void* sendbuf,
                        const int* sendcounts, MPI_Datatype sendtype, const int* recvcounts,
                        MPI_Datatype recvtype) noexcept;
uint64_t AlltoallwBytes(const HandleState* hs, MPI_Comm c, const void* sendbuf,
                        const int* sendcounts, const MPI_Datatype* sendtypes, const int* recvcounts,
                        const MPI_Datatype* recvtypes) noexcept;
uint64_t ReduceScatterBytes(const HandleState* hs, MPI_Comm c, const int* recvcounts,
                            MPI_Datatype type) noexcept;
uint64_t ReduceScatterBlockBytes(const HandleState* hs, MPI_Comm c, int recvcount,
                                 MPI_Datatype type) noexcept;
uint64_t NeighborAlltoallBytes(const HandleState* hs, MPI_Comm c, int sendcount,
                               MPI_Datatype sendtype) noexcept;
uint64_t NeighborAlltoallvBytes(const HandleState* hs, MPI_Comm c, const int* sendcounts,
                                MPI_Datatype sendtype) noexcept;
uint64_t NeighborAlltoallwBytes(const HandleState* hs, MPI_Comm c, const int* sendcounts,
                                const MPI_Datatype* sendtypes) noexcept;

}  // namespace tracedb::mpi
