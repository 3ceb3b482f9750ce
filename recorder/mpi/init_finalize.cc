// The MPI interposer's hand-written wrappers: MPI_Init, MPI_Init_thread and MPI_Finalize, which
// switch the interposer on and off, register the predefined communicators and synchronise
// clocks. Every other wrapper is generated from mpi_functions.txt (gen_wrappers.py).
//
// At the end of MPI_Init every rank tells the others whether it records (TRACEDB_DIR set, or a
// session already started); when any does, all keep communicator ids and sequence numbers (so
// that ids agree) and take part in the clock synchronisation. When none does, the interposer
// stays a pass-through for the whole run.
// Thread safety: MPI_Init* and MPI_Finalize are called once, by one thread, as MPI requires.
#include <cstdlib>

#include "recorder/mpi/clock_sync.h"
#include "recorder/mpi/comm_registry.h"
#include "recorder/mpi/runtime.h"

namespace tracedb::mpi {
namespace {

LazyName g_init_name("MPI_Init");
LazyName g_init_thread_name("MPI_Init_thread");
LazyName g_finalize_name("MPI_Finalize");
MPI_Comm g_sync_comm = MPI_COMM_NULL;  // private duplicate of MPI_COMM_WORLD for clock sync

void AfterInit() noexcept {
  const char* dir = std::getenv("TRACEDB_DIR");
  int wants = (dir != nullptr && *dir != '\0') || tracedb_enabled() ? 1 : 0;
  int any = 0;
  if (PMPI_Allreduce(&wants, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS || !any) {
    return;
  }
  RegisterPredefined();
  if (PMPI_Comm_dup(MPI_COMM_WORLD, &g_sync_comm) == MPI_SUCCESS) {
    SyncClocks(g_sync_comm);
  } else {
    g_sync_comm = MPI_COMM_NULL;
  }
  g_tracking.store(true, std::memory_order_release);
}

void RecordInit(LazyName& name, int64_t t0, int64_t t1) noexcept {
  if (Tracking() && tracedb_enabled()) Emit(name, t0, t1, nullptr);
}

}  // namespace
}  // namespace tracedb::mpi

namespace rt = tracedb::mpi;

extern "C" TRACEDB_MPI_EXPORT int MPI_Init(int* argc, char*** argv) {
  const int64_t t0 = tracedb_now();
  const int rc = PMPI_Init(argc, argv);
  const int64_t t1 = tracedb_now();
  if (rc == MPI_SUCCESS) rt::AfterInit();
  rt::RecordInit(rt::g_init_name, t0, t1);
  return rc;
}

extern "C" TRACEDB_MPI_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required,
                                                  int* provided) {
  const int64_t t0 = tracedb_now();
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  const int64_t t1 = tracedb_now();
  if (rc == MPI_SUCCESS) rt::AfterInit();
  rt::RecordInit(rt::g_init_thread_name, t0, t1);
  return rc;
}

extern "C" TRACEDB_MPI_EXPORT int MPI_Finalize(void) {
  if (!rt::Tracking()) return PMPI_Finalize();
  if (rt::g_sync_comm != MPI_COMM_NULL) {
    rt::SyncClocks(rt::g_sync_comm);
    PMPI_Comm_free(&rt::g_sync_comm);
  }
  if (rt::g_world.group != MPI_GROUP_NULL) PMPI_Group_free(&rt::g_world.group);
  const bool rec = tracedb_enabled() != 0;
  const int64_t t0 = tracedb_now();
  const int rc = PMPI_Finalize();
  const int64_t t1 = tracedb_now();
  rt::g_tracking.store(false, std::memory_order_release);
  if (rec) rt::Emit(rt::g_finalize_name, t0, t1, nullptr);
  tracedb_flush();  // a rank that dies after MPI_Finalize loses nothing
  return rc;
}
