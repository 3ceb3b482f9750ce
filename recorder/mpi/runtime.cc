// Process-wide state of the MPI interposer. See runtime.h.
#include "recorder/mpi/runtime.h"

namespace tracedb::mpi {

std::atomic<bool> g_tracking{false};
WorldInfo g_world;
LazyName g_request_start_name("mpi_request_start");
LazyName g_request_complete_name("mpi_request_complete");

namespace {
std::atomic<uint64_t> g_next_flow{1};
}  // namespace

uint32_t LazyName::Intern() noexcept {
  const uint32_t v = tracedb_intern(name_);
  id_.store(v, std::memory_order_relaxed);
  return v;
}

uint64_t NewFlow() noexcept { return g_next_flow.fetch_add(1, std::memory_order_relaxed); }

uint64_t TypeBytes(MPI_Datatype type) noexcept {
  if (type == MPI_DATATYPE_NULL) return 0;
  MPI_Count size = 0;
  if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size == MPI_UNDEFINED || size < 0) return 0;
  return static_cast<uint64_t>(size);
}

uint64_t StatusBytes(const MPI_Status* st) noexcept {
  // MPI_BYTE counts the received bytes whatever the receive's datatype was (and that datatype
  // may already be freed when a nonblocking receive completes).
  MPI_Count n = 0;
  if (PMPI_Get_elements_x(st, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED || n < 0) return 0;
  return static_cast<uint64_t>(n);
}

}  // namespace tracedb::mpi
